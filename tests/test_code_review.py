"""Code review: the writer/editor loop, the execution referee (sandboxed tests) and the LLM judge
(its JSON parsed, or the invalid-reply rules applied), played by scripted agents."""

from __future__ import annotations

import json
import random

import pytest

from arena.contract.game import InvalidReply
from arena.games.code_review import CodeReview, CodeReviewParams, extract_code, load_problems
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
from arena.contract.referee import RefereeSpec
from arena.referees.llm_judge import parse_verdict
from arena.engine.match import JUDGE

from conformance_kit import local_only, mock_server, model_agent, play, scenario  # noqa: F401  (local_only: autouse)
from forgeries import FORGERIES, forged
from helpers import ROOT, Recording, scripted
from mock_llm import body_text

PROBLEMS = str(ROOT / "scenarios" / "data" / "sample-problems.jsonl")
EXECUTION = RefereeSpec(use="execution", params={"limits": {"wall_seconds": 10, "cpu_seconds": 5}})


def judged_by(agent: str) -> RefereeSpec:
    return RefereeSpec(use="llm_judge", params={"agent": agent})


def spec(agents, problem="running-max", referees=(EXECUTION,), **params) -> MatchSpec:
    return MatchSpec(key=f"cr/{problem}", game="code_review", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"problems": PROBLEMS, "case": problem, **params}, referees=referees)


def fixed(name: str, *replies: str):
    """Says reply i in round i + 1 (cycling); a seat speaks only in its own rounds."""
    return scripted(name, "fixed", params={"replies": list(replies), "cycle": "round"})


def test_problems_load_from_humaneval_and_from_a_user_file():
    humaneval = load_problems("humaneval")
    assert len(humaneval) == 164 and humaneval["HumanEval/0"].entry_point == "has_close_elements"
    ours = load_problems(PROBLEMS)
    assert list(ours) == ["running-max", "word-lengths", "is-leap"]
    assert CodeReview.cases(CodeReviewParams(problems="humaneval", limit=3)) == ["HumanEval/0", "HumanEval/1", "HumanEval/2"]


def test_a_bad_problem_file_names_the_line(tmp_path):
    bad = tmp_path / "p.jsonl"
    bad.write_text('{"id": "a", "prompt": "def f():\\n", "entry_point": "f", "test": "def check(c): pass"}\n{"id": "b"}\n')
    with pytest.raises(ValueError, match=r"p.jsonl, line 2: not a problem"):
        load_problems(str(bad))


def test_replies_are_parsed_into_code_or_review():
    g = CodeReview(CodeReviewParams(problems=PROBLEMS), ["Programmer", "Reviewer"],
                   {"Programmer": "Programmer", "Reviewer": "Reviewer"}, random.Random(0))
    assert g.parse("Programmer", "Here:\n```python\ndef f():\n    return 1\n```\nDone.", 1) == "def f():\n    return 1\n"
    assert extract_code("def f(): pass") == "def f(): pass\n"
    with pytest.raises(InvalidReply):
        g.parse("Programmer", "   ", 1)
    assert g.parse("Reviewer", " Over. ", 2) is None  # the done word, alone: accepted
    assert g.parse("Reviewer", "Handle the empty list.", 2) == "Handle the empty list."


async def test_correct_code_passes_the_tests_and_the_reviewer_accepts():
    problem = load_problems(PROBLEMS)["running-max"]
    agents = {"p": fixed("p", f"```python\n{problem.reference}```"), "r": fixed("r", "over")}
    record = await play_match(spec(["p", "r"]), agents)
    assert record.status == "finished", record.error
    assert record.rounds == 2 and record.payoffs == {"Programmer": 1.0, "Reviewer": 1.0}
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.data["passed"] is True and verdict.recipients == () and "all tests passed" in verdict.content


async def test_broken_code_fails_the_tests_and_the_verdict_says_why():
    broken = "def running_max(values):\n    return values\n"
    agents = {"p": fixed("p", broken), "r": fixed("r", "Use a running maximum.")}
    accepted = RefereeSpec(use="rules", params={"metric": "accepted"})
    record = await play_match(spec(["p", "r"], max_reviews=2, referees=(EXECUTION, accepted)), agents)
    assert record.status == "finished"
    assert record.payoffs == {"Programmer": 0.0, "Reviewer": 0.0}
    assert record.metrics["accepted"] == {"Programmer": 0.0, "Reviewer": 0.0}  # the rules: never accepted
    assert record.rounds == 5  # write, review, revise, review, revise: the review limit ends it
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.data["status"] == "failed" and "AssertionError" in verdict.content
    assert record.metrics["revisions"] == {"Programmer": 2.0}


async def test_a_revision_after_review_fixes_the_code():
    problem = load_problems(PROBLEMS)["is-leap"]
    agents = {"p": fixed("p", "def is_leap(year):\n    return year % 4 == 0\n", "-", problem.reference, "-"),
              "r": fixed("r", "-", "1900 is not a leap year: centuries need % 400.", "-", "over")}
    record = await play_match(spec(["p", "r"], problem="is-leap"), agents)
    assert record.rounds == 4 and record.payoffs == {"Programmer": 1.0, "Reviewer": 1.0}
    replies = [m.content for m in record.messages if m.kind == "reply"]
    assert replies[1].startswith("1900") and replies[3] == "over"


async def test_the_judges_json_is_parsed_into_a_metric_beside_the_tests():
    problem = load_problems(PROBLEMS)["word-lengths"]
    verdict = {"Programmer": {"evaluation": "correct and short", "score": 9}, "reviewer": {"evaluation": "fine", "score": "7"}}
    agents = {"p": fixed("p", problem.reference), "r": fixed("r", "over"),
              "j": fixed("j", "Sure! ```json\n" + json.dumps(verdict) + "\n```")}
    record = await play_match(spec(["p", "r"], problem="word-lengths", referees=(EXECUTION, judged_by("j"))), agents)
    assert record.status == "finished", record.error
    assert record.payoffs == {"Programmer": 1.0, "Reviewer": 1.0}  # the first referee gives the payoff
    assert record.metrics["judge"] == {"Programmer": 9.0, "Reviewer": 7.0}
    judged = next(m for m in record.messages if m.kind == "verdict" and m.data["referee"] == "llm_judge")
    assert judged.data["evaluations"]["Programmer"] == "correct and short" and judged.data["agent"] == "j"


async def test_a_garbage_verdict_is_asked_again_then_left_unscored():
    problem = load_problems(PROBLEMS)["word-lengths"]
    agents = {"p": fixed("p", problem.reference), "r": fixed("r", "over"),
              "j": scripted("j", "garbage")}
    record = await play_match(spec(["p", "r"], problem="word-lengths", referees=(judged_by("j"), EXECUTION)), agents)
    assert record.status == "finished", record.error
    failures = [e for e in record.events if e.type == "turn_failed" and e.seat == JUDGE]
    assert len(failures) == 3 and all(f.failure == "invalid" for f in failures)  # asked, then twice again
    assert record.payoffs == {} and record.metrics["judge"] == {}  # the judge's payoff is missing, not made up
    assert record.metrics["tests"] == {"Programmer": 1.0, "Reviewer": 1.0}
    assert any(m.kind == "verdict" and "no valid verdict" in m.content for m in record.messages)


def test_verdicts_are_checked_seat_by_seat():
    seats = ("Programmer", "Reviewer")
    ok = parse_verdict('{"Programmer": {"score": 3}, "Reviewer": {"score": 10, "evaluation": "x"}}', seats, 1, 10)
    assert ok == {"Programmer": (3, ""), "Reviewer": (10, "x")}
    for bad, reason in [("no json here", "no JSON object"), ('{"Programmer": {"score": 3}}', "did not score Reviewer"),
                        ('{"Programmer": {"score": 11}, "Reviewer": {"score": 2}}', "whole number from 1 to 10"),
                        ('{"Programmer": {"score": 2.5}, "Reviewer": {"score": 2}}', "whole number"),
                        ('{"Programmer": 3,, }', "not valid JSON")]:
        with pytest.raises(InvalidReply, match=reason):
            parse_verdict(bad, seats, 1, 10)


HOSTILE = {
    "reads an API key": ("import os\ndef running_max(values):\n    return [os.environ['OPENAI_API_KEY']]\n", "failed", "KeyError"),
    "loops forever": ("def running_max(values):\n    while True:\n        pass\n", ("cpu", "timeout"), "limit"),
    "forks without end": ("import os\ndef running_max(values):\n    while True:\n        try:\n            os.fork()\n"
                          "        except OSError:\n            pass\n", ("processes", "timeout", "cpu"), "limit"),
    "eats memory": ("def running_max(values):\n    hog = []\n    while True:\n        hog.append(bytearray(10**7))\n",
                    "memory", "memory"),
    "writes outside": ("def running_max(values):\n    open('/tmp/arena-escaped.txt', 'w').write('x')\n    return values\n",
                       "failed", "OSError"),
}


@pytest.mark.parametrize("name", list(HOSTILE))
async def test_hostile_code_is_stopped_reported_and_the_match_goes_on(name, monkeypatch):
    code, statuses, said = HOSTILE[name]
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-must-not-leak")
    limits = RefereeSpec(use="execution", params={"limits": {"wall_seconds": 4, "cpu_seconds": 2, "memory_mb": 256,
                                                             "processes": 16}})
    agents = {"p": fixed("p", code), "r": fixed("r", "over")}
    record = await play_match(spec(["p", "r"], referees=(limits,)), agents)
    assert record.status == "finished", record.error
    assert record.payoffs == {"Programmer": 0.0, "Reviewer": 0.0}
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.data["status"] in ((statuses,) if isinstance(statuses, str) else statuses), verdict.data
    assert said in verdict.content or said in verdict.data["reason"] or said in verdict.data["stderr"]
    assert "sk-test-must-not-leak" not in verdict.content + verdict.data["stderr"]
    import os
    assert not os.path.exists("/tmp/arena-escaped.txt")


def test_arena_rank_prints_the_role_tables_of_every_metric(run_cli, tmp_path):
    result = run_cli("run", ROOT / "scenarios" / "code-review.yaml", "--quiet", "--run-dir", tmp_path / "run", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    import os
    ranked = run_cli("rank", tmp_path / "run", env={**os.environ, "COLUMNS": "200"})
    assert ranked.returncode == 0, ranked.stderr
    assert "code_review, payoff (tests): rows play Programmer, columns play Reviewer" in ranked.stdout
    assert "code_review, judge: rows play Programmer, columns play Reviewer" in ranked.stdout
    import json
    data = json.loads(run_cli("rank", tmp_path / "run", "--json").stdout)
    metrics = data["metrics"]["code_review"]
    assert list(metrics) == ["tests", "judge"]  # the payoff's metric first
    (table,) = metrics["judge"]["role_tables"]
    assert sorted(table["agents"]) == ["coder", "expert", "novice"] and table["roles"] == ["Programmer", "Reviewer"]
    from arena.results.summary import metrics_json
    from arena.contract import open_run
    from arena.store import RunStore

    store = open_run(tmp_path / "run")
    try:  # rank takes the first metric from the payoffs it read already: the same as reading the metric itself
        assert json.loads(json.dumps(metrics_json(store))) == data["metrics"]
    finally:
        store.close()


async def test_the_judge_does_not_learn_who_wrote_the_code():
    from helpers import Recording

    problem = load_problems(PROBLEMS)["word-lengths"]
    judge = Recording(fixed("j", '{"Programmer": {"score": 5}, "Reviewer": {"score": 5}}'))
    agents = {"alice": fixed("alice", problem.reference + "# written by alice, a Claude model\n"),
              "bob": fixed("bob", "over"), "j": judge}
    base = spec(["alice", "bob"], problem="word-lengths", referees=(judged_by("j"),))
    record = await play_match(base.model_copy(update={"scrub": ("alice", "Claude")}), agents)
    assert record.metrics["judge"] == {"Programmer": 5.0, "Reviewer": 5.0}
    (turn,) = judge.turns
    assert "alice" not in turn.prompt and "Claude" not in turn.prompt and "[name withheld]" in turn.prompt
    assert turn.seat == JUDGE and turn.history == ()


async def test_a_revision_that_never_comes_ends_the_match_without_asking_the_reviewer_again():
    # the programmer writes, the reviewer comments, then the programmer gives nothing (re-asked, then
    # defaulted): the reviewer is not asked to review the same code again; the first version stands
    problem = load_problems(PROBLEMS)["is-leap"]
    reviewer = Recording(fixed("r", "-", "1900 is not a leap year: centuries need % 400.", "-", "over"))
    agents = {"p": fixed("p", problem.reference, "-", ""), "r": reviewer}
    judge = scripted("judge", "fixed", params={"replies": ['{"Programmer": {"evaluation": "ok", "score": 7}, '
                                                           '"Reviewer": {"evaluation": "ok", "score": 6}}']})
    record = await play_match(spec(["p", "r"], problem="is-leap", referees=(EXECUTION, judged_by("judge")), max_reviews=3),
                              {**agents, "judge": judge})
    assert record.status == "finished", record.error
    assert record.rounds == 3 and [t.round for t in reviewer.turns] == [2]
    assert [(e.round, e.seat) for e in record.events if e.type == "action" and e.defaulted] == [(3, "Programmer")]
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    assert notice.content == ("The programmer gave no revision; the code it revised last stands, so the reviewer was "
                              "not asked: there was nothing new to review.") and notice.data["skipped"] == "Reviewer"
    assert record.payoffs == {"Programmer": 1.0, "Reviewer": 1.0}  # the first version passes: the execution's verdict
    assert record.metrics["judge"] == {"Programmer": 7.0, "Reviewer": 6.0}


async def test_a_programmer_that_never_writes_code_leaves_the_reviewer_unasked_and_unscored():
    reviewer = Recording(fixed("r", "over"))
    record = await play_match(spec(["p", "r"]), {"p": fixed("p", ""), "r": reviewer})
    assert record.status == "finished", record.error
    assert record.rounds == 1 and reviewer.turns == []
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    assert notice.content.startswith("The programmer gave no code, so the reviewer was not asked")
    assert record.payoffs == {"Programmer": 0.0}  # the empty program fails its tests; the reviewer played no turn
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.data["seats"] == ["Programmer"] and verdict.data["passed"] is False


# -- verdicts the code cannot forge ------------------------------------------------------------------
WRONG_RUNNING_MAX = "def running_max(values):\n    return values\n"


@pytest.mark.parametrize("trick", list(FORGERIES))
async def test_a_forged_verdict_scores_nothing_in_the_game(trick):
    program = forged(trick, WRONG_RUNNING_MAX, "running_max")
    agents = {"p": fixed("p", f"```python\n{program}```"), "r": fixed("r", "over")}
    record = await play_match(spec(["p", "r"]), agents)
    assert record.status == "finished", record.error
    assert record.payoffs == {"Programmer": 0.0, "Reviewer": 0.0}
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.data["passed"] is False and verdict.data["status"] == "failed"
    assert verdict.data["reason"] and verdict.content == f"Execution of running_max: tests not passed: {verdict.data['reason']}."


def _programmer_and_reviewer(code: str):
    """A model that writes ``code`` when it is the programmer, and accepts whatever it reviews."""
    def reply(body):
        text = body_text(body)
        return f"```python\n{code}```" if "You are the programmer" in text else "over"
    return reply


@pytest.mark.parametrize("trick", ["write fd 3 then _exit", "patch builtins.compile", None])
async def test_a_model_that_forges_its_verdict_scores_nothing_and_the_requests_show_its_code(trick, tmp_path):
    right = load_problems(PROBLEMS)["running-max"].reference
    code = right if trick is None else forged(trick, WRONG_RUNNING_MAX, "running_max")
    with mock_server("openai", _programmer_and_reviewer(code)) as mock:
        agents = {"ann": model_agent("openai", mock), "bob": model_agent("openai", mock)}
        raw = scenario("forge", agents, "code_review", {"problems": PROBLEMS, "ids": ["running-max"]},
                       referee=[{"use": "execution", "limits": {"wall_seconds": 10, "cpu_seconds": 5}}],
                       tournament={"role_swap": False})
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,) = await play(tmp_path, raw)
        bodies = [body_text(b) for b in mock.bodies()]
    # what the programmer's model sent is what the reviewer's model was shown, and what ran
    (written,) = [m.content for m in record.messages if m.kind == "reply" and m.sender == "Programmer"]
    assert extract_code(written) == code
    (review_request,) = [b for b in bodies if "You are the code reviewer" in b]
    assert code.strip() in review_request
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    if trick is None:
        assert record.payoffs == {"Programmer": 1.0, "Reviewer": 1.0}
        assert verdict.data["status"] == "ok" and verdict.content == "Execution of running_max: all tests passed."
    else:
        assert record.payoffs == {"Programmer": 0.0, "Reviewer": 0.0}
        assert verdict.data["status"] == "failed" and verdict.data["reason"].startswith("it failed: ")
