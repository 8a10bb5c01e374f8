"""`arena rescore`: a recorded run replayed, its judges swapped, as a user runs it against local mock models.

The contestants and the first judge answer from one mock server, the new judges from another: what each
server was sent is what each side was asked.
"""

from __future__ import annotations

import json
import re

import yaml

from arena.contract import open_run

from conformance_kit import between, local_only, model_agent  # noqa: F401  (local_only: a fixture)
from helpers import ROOT
from mock_llm import OpenAIMock, body_text

QUESTIONS = {"q1": "How do I keep basil alive on a windowsill?", "q2": "Why do cats purr?"}


def contestant_or_judge(prefers: str):
    """Contestants answer with their model's name in the text (which the judge must never read); the judge
    scores the longer answer higher (``prefers="longer"``) or the shorter, and refuses its first try at q1."""

    def reply(body) -> str:
        text = body_text(body)
        if "You are Contestant" in text:
            seat = re.search(r"You are (Contestant \d+)", text).group(1)
            question = between(text, "Question: ", "\n\nWrite your answer.")
            words = " ".join(["detail"] * len(body["model"]))  # each contestant's answers are its own
            return f"As {body['model']}, {seat} says about '{question}': {words}."
        first = between(text, "[Assistant 1]\n", "\n[End of Assistant 1]")
        second = between(text, "[Assistant 2]\n", "\n[End of Assistant 2]")
        if first is None or second is None:
            return "I was not shown two answers."
        if QUESTIONS["q1"] in text and not any(m["role"] == "assistant" for m in body["messages"]):
            return "I cannot decide yet."  # refused: asked again with the reason
        longer_first = len(first) > len(second)
        high_first = longer_first if prefers == "longer" else not longer_first
        return f"Weighed {len(first)} against {len(second)} characters.\n{'8 3' if high_first else '3 8'}"

    return reply


def write_scenario(tmp_path, mock, game="pairwise_review") -> str:
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": k, "question": v}) + "\n" for k, v in QUESTIONS.items()),
                         encoding="utf-8")
    raw = {"name": "review", "seed": 3,
           "agents": {"ann": model_agent("openai", mock, model="gpt-4"),
                      "bob": model_agent("openai", mock, model="claude-2"),
                      "judge": model_agent("openai", mock, model="judge-model")},
           "games": [{"game": game, "params": {"questions": "questions.jsonl"}}],
           "match": {"turn_timeout": 600}}
    path = tmp_path / "review.yaml"  # the questions path is relative to it, as users write it
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def records(run_dir):
    store = open_run(run_dir)
    try:
        return {r.key: r for r in store.records(status=None)}
    finally:
        store.close()


def played(run_cli, tmp_path, mock):
    scenario = write_scenario(tmp_path, mock)
    result = run_cli("run", scenario, "--run-dir", tmp_path / "source", "--quiet")
    assert result.returncode == 0, result.stderr
    return tmp_path / "source"


def test_a_run_replayed_from_its_own_store_is_the_same_byte_for_byte_and_asks_nobody(run_cli, tmp_path):
    with OpenAIMock(responder=contestant_or_judge("longer")) as mock:
        source = played(run_cli, tmp_path, mock)
        asked = mock.count
        assert asked == 4 * 2 + 4 * 2 + 2 * 2  # 4 matches: 2 answers, 2 comparisons; q1's 2 matches: a refusal each
        result = run_cli("rescore", source, "-o", tmp_path / "replayed", "--quiet")
        assert result.returncode == 0, result.stderr
        assert mock.count == asked  # no request reached a model
    for form in ("jsonl", "csv"):
        exports = [run_cli("export", run, "--format", form) for run in (source, tmp_path / "replayed")]
        assert exports[0].returncode == 0 and exports[0].stdout
        assert exports[0].stdout == exports[1].stdout
    again = records(tmp_path / "replayed")
    assert all(r.status == "finished" for r in again.values())
    assert any(e.type == "turn_failed" for r in again.values() for e in r.events)  # the refusals were replayed too
    scenario = yaml.safe_load((tmp_path / "replayed" / "scenario.yaml").read_text(encoding="utf-8"))
    assert scenario["rescored_from"] == str(source.resolve())
    assert {a["backend"] for a in scenario["agents"].values()} == {"replay"}
    # the new run names its source wherever a run is described
    shown = run_cli("show", tmp_path / "replayed")
    assert f"a rescore of {source.resolve()}" in shown.stdout.replace("\n", ""), shown.stdout
    assert json.loads(run_cli("show", tmp_path / "replayed", "--json").stdout)["run"]["rescored_from"] == str(source.resolve())
    listed = {r["run_dir"]: r for r in json.loads(run_cli("runs", tmp_path, "--json").stdout)}
    assert listed[str(tmp_path / "replayed")]["rescored_from"] == str(source.resolve())
    assert listed[str(source)]["rescored_from"] is None
    assert json.loads(run_cli("rank", tmp_path / "replayed", "--json").stdout)["run"]["rescored_from"] == str(source.resolve())
    assert run_cli("report", tmp_path / "replayed", "-o", tmp_path / "report.html").returncode == 0
    assert f"a rescore of {source.resolve()}" in (tmp_path / "report.html").read_text(encoding="utf-8")
    # run again, it resumes: every match is kept and nothing is asked
    result = run_cli("rescore", source, "-o", tmp_path / "replayed", "--plain")
    assert result.returncode == 0 and "4 finished matches are kept" in result.stdout, result.stdout + result.stderr


def test_rescoring_with_another_judge_changes_only_the_verdicts(run_cli, tmp_path):
    with OpenAIMock(responder=contestant_or_judge("longer")) as mock, \
            OpenAIMock(responder=contestant_or_judge("shorter")) as judges:
        source = played(run_cli, tmp_path, mock)
        asked = mock.count
        (tmp_path / "judges.yaml").write_text(yaml.safe_dump({"strict": model_agent("openai", judges, model="judge-2")}))
        result = run_cli("rescore", source, "--judge", "judge=strict", "--agents", tmp_path / "judges.yaml",
                         "-o", tmp_path / "rescored", "--quiet")
        assert result.returncode == 0, result.stderr
        assert mock.count == asked  # the contestants (and the old judge) were asked nothing
        requests = judges.answered()
    # one request per comparison, in both orders, and the refused first tries at q1 again
    assert len(requests) == 4 * 2 + 2 * 2
    before, after = records(source), records(tmp_path / "rescored")
    assert sorted(k.replace("+judge", "+strict") for k in before) == sorted(after)
    for key, old in before.items():
        new = after[key.replace("+judge", "+strict")]
        assert new.status == "finished"
        answers = [(m.sender, m.content) for m in old.messages if m.kind == "reply" and m.round == 1]
        assert [(m.sender, m.content) for m in new.messages if m.kind == "reply" and m.round == 1] == answers
        verdicts = [sorted((r.a, r.b, r.score) for r in rec.reviews) for rec in (old, new)]
        assert verdicts[0] and [(a, b) for a, b, _ in verdicts[0]] == [(a, b) for a, b, _ in verdicts[1]]
        assert [s for *_, s in verdicts[0]] == [-s for *_, s in verdicts[1]]  # the new judge prefers the other
        assert {r.reviewer for r in new.reviews} == {"strict"}
    # what the new judge was sent: the question and both recorded answers, with no name of who wrote them
    answers = {m.content for r in before.values() for m in r.messages if m.kind == "reply" and m.round == 1}
    for request in requests:
        text = request.text
        assert any(q in text for q in QUESTIONS.values())
        shown = [between(text, f"[Assistant {i}]\n", f"\n[End of Assistant {i}]") for i in (1, 2)]
        for answer in shown:
            assert answer is not None and answer.replace("[name withheld]", "") != answer
            assert any(answer == a.replace("gpt-4", "[name withheld]").replace("claude-2", "[name withheld]")
                       for a in answers)
        for name in ("gpt-4", "claude-2", "ann", "bob"):
            assert not re.search(rf"\b{re.escape(name)}\b", text), name


def test_rescore_refuses_what_it_cannot_do_in_a_sentence(run_cli, tmp_path):
    with OpenAIMock(responder=contestant_or_judge("longer")) as mock:
        source = played(run_cli, tmp_path, mock)
        (tmp_path / "judges.yaml").write_text(yaml.safe_dump({"strict": model_agent("openai", mock)}))
        cases = {
            ("--judge", "jduge=strict"): "the run has no agent 'jduge' (its agents: ann, bob, judge)",
            ("--judge", "judge=nobody"): "no agent 'nobody' is defined; define it in --agents FILE",
            ("--judge", "judge"): "expected NAME=AGENT",
        }
        for args, sentence in cases.items():
            result = run_cli("rescore", source, *args, "--agents", tmp_path / "judges.yaml", "-o", tmp_path / "x")
            assert result.returncode == 2 and sentence in result.stderr, result.stderr
            assert "Traceback" not in result.stderr
        empty = tmp_path / "empty"
        empty.mkdir()
        result = run_cli("rescore", empty)
        assert result.returncode == 2 and "Traceback" not in result.stderr and str(empty) in result.stderr


def test_a_missing_turn_fails_its_match_naming_the_match_and_the_turn(run_cli, tmp_path):
    with OpenAIMock(responder=contestant_or_judge("longer")) as mock:
        scenario = write_scenario(tmp_path, mock)
        result = run_cli("run", scenario, "--run-dir", tmp_path / "source", "--quiet", "--limit", "2")
        assert result.returncode == 0, result.stderr
        asked = mock.count
        result = run_cli("rescore", tmp_path / "source", "-o", tmp_path / "replayed", "--quiet")
        assert mock.count == asked
    assert result.returncode == 1
    failed = {k: r.error for k, r in records(tmp_path / "replayed").items() if r.status == "failed"}
    assert len(failed) == 2
    for key, error in failed.items():
        assert f"has no reply for match {key!r}, seat 'Contestant 1' (Contestant), round 1" in error


def test_rescoring_a_peer_discussion_with_other_reviewers_replays_only_the_fixed_answers(run_cli, tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "question": "Why is the sea salty?", "answer_a": "Rivers carry salts "
                                 "from rocks into it, and evaporation leaves them behind.", "answer_b": "Fish.",
                                 "label": -1}) + "\n", encoding="utf-8")

    def reviewer(body):
        seat = re.search(r"You are (Reviewer \d)", body_text(body)).group(1)
        return f"{seat} ({body['model']}) thinks the first answer explains more.\nPreference: 1"

    with OpenAIMock(responder=reviewer) as mock, OpenAIMock(responder=reviewer) as fresh:
        raw = {"name": "talk", "agents": {"ann": model_agent("openai", mock), "bob": model_agent("openai", mock)},
               "games": [{"game": "peer_discussion", "params": {"pairs": str(pairs), "max_turns": 2}}],
               "tournament": {"role_swap": False}}
        (tmp_path / "talk.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert run_cli("run", tmp_path / "talk.yaml", "--run-dir", tmp_path / "source", "--quiet").returncode == 0
        asked = mock.count
        (tmp_path / "pair.yaml").write_text(yaml.safe_dump({"cat": model_agent("openai", fresh, model="m-cat"),
                                                            "dan": model_agent("openai", fresh, model="m-dan")}))
        result = run_cli("rescore", tmp_path / "source", "--judge", "ann=cat", "--judge", "bob=dan",
                         "--agents", tmp_path / "pair.yaml", "-o", tmp_path / "rescored", "--quiet")
        assert result.returncode == 0, result.stderr
        assert mock.count == asked  # the first pair was asked nothing
        requests = fresh.answered()
    assert len(requests) == 2 + 2  # both review, then two turns of talk
    for request in requests:
        assert "Rivers carry salts from rocks into it" in request.text and "Fish." in request.text
    scenario = yaml.safe_load((tmp_path / "rescored" / "scenario.yaml").read_text(encoding="utf-8"))
    assert sorted(scenario["agents"]) == ["cat", "dan"]  # nothing left to replay: the answers are the game's own
    (record,) = records(tmp_path / "rescored").values()
    assert {s.agent for s in record.seats} == {"cat", "dan"} and record.status == "finished"


def test_rescoring_with_another_referee_asks_only_its_judge(run_cli, tmp_path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text("".join(json.dumps({"id": f"t{i}", "source_lang": "de", "target_lang": "en", "source": source,
                                         "reference": "The cat sleeps."}) + "\n"
                             for i, source in enumerate(("Die Katze schläft.", "Der Hund bellt."))), encoding="utf-8")

    def reply(body) -> str | dict:
        text = body_text(body)
        if "You are a professional translator." in text:
            return f"The animal rests, says {body['model']}."
        if "You are a professional translation editor." in text:
            return "The animal is resting."
        found = re.search(r"Score each of (.*?) on a scale of (\d+) to (\d+)", text)
        seats = [s.strip() for s in found.group(1).split(",")]
        score = 9 if body["model"] == "lenient" else 2
        return {seat: {"evaluation": f"{seat} did fine", "score": score} for seat in seats}

    with OpenAIMock(responder=reply) as mock, OpenAIMock(responder=reply) as fresh:
        raw = {"name": "translate", "match": {"turn_timeout": 600},
               "agents": {"ann": model_agent("openai", mock, model="m-ann"), "bob": model_agent("openai", mock),
                          "judge": model_agent("openai", mock, model="lenient")},
               "games": [{"game": "translation", "params": {"texts": str(texts)}, "agents": ["ann", "bob"],
                          "referee": [{"use": "llm_judge", "agent": "judge"}]}],
               "tournament": {"role_swap": False}}
        (tmp_path / "translate.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert run_cli("run", tmp_path / "translate.yaml", "--run-dir", tmp_path / "source", "--quiet").returncode == 0
        asked = mock.count
        (tmp_path / "judges.yaml").write_text(yaml.safe_dump({"strict": model_agent("openai", fresh, model="strict")}))
        result = run_cli("rescore", tmp_path / "source", "--referee", "{use: llm_judge, agent: strict}",
                         "--agents", tmp_path / "judges.yaml", "-o", tmp_path / "rescored", "--quiet")
        assert result.returncode == 0, result.stderr
        assert mock.count == asked  # neither the seats nor the old judge were asked
        requests = fresh.answered()
    assert len(requests) == 2  # one brief per match
    for request in requests:
        assert "The animal is resting." in request.text and "The animal rests, says [name withheld]." in request.text
        assert not re.search(r"\b(m-ann|ann|bob)\b", request.text)
    before, after = records(tmp_path / "source"), records(tmp_path / "rescored")
    assert sorted(before) == sorted(after)
    for key, old in before.items():
        new = after[key]
        assert [m.content for m in new.messages if m.kind == "reply"] == [m.content for m in old.messages if m.kind == "reply"]
        assert set(old.metrics["judge"].values()) == {9.0} and set(new.metrics["judge"].values()) == {2.0}


def test_a_table_the_source_never_sat_has_nothing_to_replay(run_cli, tmp_path):
    # code review's programmer and reviewer both replay: the same programmer with another reviewer is another match
    source = tmp_path / "source"
    result = run_cli("run", ROOT / "scenarios" / "code-review.yaml", "--run-dir", source, "--limit", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    result = run_cli("rescore", source, "-o", tmp_path / "replayed", "--quiet")
    assert result.returncode == 1
    before, after = records(source), records(tmp_path / "replayed")
    finished = sorted(k for k, r in after.items() if r.status == "finished")
    assert finished == sorted(k for k, r in before.items() if r.status == "finished") and len(finished) == 2
    for key, record in after.items():
        if record.status != "finished":
            assert f"has no reply for match {key!r}" in record.error


def test_code_review_rescored_under_other_sandbox_limits_reruns_only_the_tests(run_cli, tmp_path):
    # the programs are the recorded ones; only the execution referee runs them again, here with a wall
    # time no interpreter starts in, so every test run that passed before now fails
    source = tmp_path / "source"
    result = run_cli("run", ROOT / "scenarios" / "code-review.yaml", "--run-dir", source, "--limit", "2", "--quiet")
    assert result.returncode == 0, result.stderr
    result = run_cli("rescore", source, "--referee", "{use: execution, limits: {wall_seconds: 0.001}}",
                     "-o", tmp_path / "tight", "--quiet")
    assert result.returncode == 1  # the matches the source never played have nothing to replay
    before, after = records(source), records(tmp_path / "tight")
    finished = sorted(k for k, r in before.items() if r.status == "finished")
    assert len(finished) == 2 and sorted(k for k, r in after.items() if r.status == "finished") == finished
    for key in finished:
        old, new = before[key], after[key]
        assert [m.content for m in new.messages if m.sender != "Referee"] == \
            [m.content for m in old.messages if m.sender != "Referee"]
        assert set(old.payoffs.values()) == {1.0} and set(new.payoffs.values()) == {0.0}
        assert "judge" in old.metrics and "judge" not in new.metrics  # the new referee replaces the old ones


def test_recorded_answers_judged_again_by_a_panel_of_three_judge_seats(run_cli, tmp_path):
    # the source had one judge seat; a panel of three seats changes the table, so the contestants replay
    # by their role's places (match_by: role), and only the three judges are asked
    with OpenAIMock(responder=contestant_or_judge("longer")) as mock, \
            OpenAIMock(responder=contestant_or_judge("shorter")) as judges:
        source = played(run_cli, tmp_path, mock)
        asked = mock.count
        replay = {"backend": "replay", "record": str(source), "match_by": "role"}
        raw = {"name": "panel", "seed": 3,
               "agents": {"ann": {**replay, "model": "gpt-4"}, "bob": {**replay, "model": "claude-2"},
                          **{f"j{i}": model_agent("openai", judges, model=f"judge-{i}") for i in (1, 2, 3)}},
               "games": [{"game": "pairwise_review", "agents": ["ann", "bob", "j1", "j2", "j3"],
                          "params": {"questions": str(tmp_path / "questions.jsonl"), "contestants": 2,
                                     "panel": "vote"}}],
               "match": {"turn_timeout": 600}}
        (tmp_path / "panel.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        result = run_cli("run", tmp_path / "panel.yaml", "--run-dir", tmp_path / "panel", "--quiet")
        assert result.returncode == 0, result.stderr
        assert mock.count == asked  # no contestant (nor the old judge) was asked
        requests = judges.answered()
    assert {r.body["model"] for r in requests} == {"judge-1", "judge-2", "judge-3"}
    before, after = records(source), records(tmp_path / "panel")
    assert len(after) == len(before) and all(r.status == "finished" for r in after.values())
    answers = {(r.params["case"], m.sender, m.content) for r in before.values()
               for m in r.messages if m.kind == "reply" and m.round == 1 and m.sender.startswith("Contestant")}
    replayed = {(r.params["case"], m.sender, m.content) for r in after.values()
                for m in r.messages if m.kind == "reply" and m.round == 1 and m.sender.startswith("Contestant")}
    assert replayed == answers
    assert all({v.reviewer for v in r.reviews} == {"j1", "j2", "j3"} for r in after.values())
