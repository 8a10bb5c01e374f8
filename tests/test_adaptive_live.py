"""An adaptive schedule with live contestants, proven by what the mock server was sent: each contestant
is asked each question at most once, and only when a played comparison needed that answer; every
judge is shown the question and the two kept answers verbatim, in both orders, and no contestant's
name; a killed and resumed run asks no answer twice and ends as an unbroken one; a contestant that
gives no answer leaves its comparisons unplayed and the run says so; the dry run's range; validate."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
from collections import Counter, defaultdict
from pathlib import Path

import pytest
import yaml

from arena.contract.errors import ConfigError
from arena.contract.records import MatchIdentity
from arena.run.dryrun import estimate
from arena.run.scenario import parse_scenario

from conformance_kit import current_prompt, local_only, mock_server, model_agent  # noqa: F401  (local_only: autouse)
from helpers import ROOT, run_reviews as run  # plays a scenario into a store: result, reviews, notes
from mock_llm import is_probe

QUESTIONS_FILE = ROOT / "scenarios" / "data" / "sample-questions.jsonl"
QUESTIONS = {json.loads(line)["id"]: json.loads(line)["question"] for line in QUESTIONS_FILE.read_text().splitlines()
             if line.strip()}
POINTS = {"quokka": 5, "narwhal": 4, "axolotl": 2, "pangolin": 1}  # each answer's key points: the true order
CONTESTANTS = list(POINTS)
JUDGES = ["ann", "bob"]


def answer_text(model: str, question: str) -> str:
    """A contestant's answer: an opaque token of (model, question), so that each answer is told apart,
    and as many key points as the contestant's quality; no name in it."""
    token = hashlib.sha256(f"{model}|{question}".encode()).hexdigest()[:12]
    points = POINTS[model.removesuffix("-model")]
    return f"Reply {token}.\n" + "\n".join(f"Point {i}. A fact that answers it." for i in range(1, points + 1))


def points(text: str) -> int:
    return len(set(re.findall(r"^Point (\d+)\.", text, re.M)))


def shown(prompt: str, which: int) -> str:
    return prompt.split(f"[Assistant {which}]\n", 1)[1].split(f"\n[End of Assistant {which}]", 1)[0]


def model(body) -> str | dict:
    """Contestants answer by their quality; judges score each shown answer by its key points."""
    if is_probe(body):  # the CLI's check that the model answers at all
        return "ok"
    prompt = current_prompt(body)
    if "[Assistant 1]" in prompt:
        first, second = points(shown(prompt, 1)), points(shown(prompt, 2))
        return f"The first makes {first} points, the second {second}.\n{min(10, first + 1)} {min(10, second + 1)}"
    question = prompt.split("Question: ", 1)[1].split("\n\nWrite your answer.", 1)[0]
    return answer_text(body["model"], question)


def live(mock, schedule: dict, dead=None, concurrency: int = 4) -> dict:
    """The four contestants (listed first: they answer) and the two judges, on the mock (``dead``: pangolin's)."""
    def agent(name):
        server = dead if name == "pangolin" and dead is not None else mock
        if server is None:  # validated only: nothing is asked
            return {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": f"{name}-model"}
        return model_agent("openai", server, model=f"{name}-model")
    agents = {name: agent(name) for name in CONTESTANTS + JUDGES}
    return {"name": "live", "seed": 3, "agents": agents,
            "games": [{"game": "pairwise_review", "label": "pr",
                       "params": {"questions": str(QUESTIONS_FILE), "contestants": len(CONTESTANTS)}}],
            "tournament": {"schedule": schedule}, "concurrency": concurrency,
            "match": {"turn_timeout": 600, "max_retries": 1}}


def question_of(prompt: str) -> str:
    return next(q for q, text in QUESTIONS.items() if text in prompt)


def answers_asked(requests) -> Counter:
    """(contestant, question id) -> how many times it was asked, from the requests' bodies."""
    return Counter((r.body["model"].removesuffix("-model"), question_of(current_prompt(r.body)))
                   for r in requests if not r.is_probe and "[Assistant 1]" not in current_prompt(r.body))


def judge_requests(requests) -> list:
    return [r for r in requests if not r.is_probe and "[Assistant 1]" in current_prompt(r.body)]


async def test_each_contestant_is_asked_a_question_once_and_only_when_a_played_comparison_needs_it(tmp_path):
    with mock_server("openai", model) as mock:
        result, reviews, notes = await run(tmp_path, live(mock, {"seed_block": 2, "block": 4, "budget": 12, "width": 1}))
        requests = mock.answered()
    asked = answers_asked(requests)
    assert asked and set(asked.values()) == {1}, asked  # never twice
    for r in requests:  # an answer request holds its question and nothing else: no other answer, no verdict asked
        prompt = current_prompt(r.body)
        if not r.is_probe and "[Assistant 1]" not in prompt:
            assert prompt == f"Question: {QUESTIONS[question_of(prompt)]}\n\nWrite your answer.", prompt
    needed = {(who, r.question) for r in reviews for who in (r.a, r.b)}
    assert set(asked) == needed  # only what a played comparison showed: not every contestant on every question
    assert len(asked) < len(CONTESTANTS) * len(QUESTIONS)
    # the answers were asked before the comparisons that show them, each in a match of its own
    answer_keys = [k for k in result.statuses if MatchIdentity.parse(k).role_places("Contestant")]
    assert len(answer_keys) == len(asked) and all(result.statuses[k] == "finished" for k in answer_keys)
    comparisons = [k for k in result.statuses if MatchIdentity.parse(k).compared]
    assert len(comparisons) == 12 and len(judge_requests(requests)) == 24  # both orders, one judge, each
    # the reviews name the contestants and the judges, not sources or seats
    assert {r.a for r in reviews} | {r.b for r in reviews} == set(CONTESTANTS)
    assert {r.reviewer for r in reviews} <= set(JUDGES)
    (said,) = [n["text"] for n in notes if n["topic"] == "schedule"]
    assert f"{len(asked)} answers asked and kept (each once)" in said and "missing" not in said, said


async def test_a_judge_is_shown_the_question_and_both_kept_answers_verbatim_in_both_orders_and_no_name(tmp_path):
    with mock_server("openai", model) as mock:
        _, reviews, _ = await run(tmp_path, live(mock, {"seed_block": 2, "block": 6, "budget": 20, "width": 1}))
        requests = mock.answered()
    texts = {(who, q): answer_text(f"{who}-model", QUESTIONS[q]) for who in CONTESTANTS for q in QUESTIONS}
    asked = answers_asked(requests)
    orders = defaultdict(list)
    for r in judge_requests(requests):
        prompt, body = current_prompt(r.body), json.dumps(r.body).lower()
        for name in CONTESTANTS:
            assert name not in body, (name, body[:400])  # neither in the prompt, nor in the rules, nor anywhere
        q = question_of(prompt)
        assert QUESTIONS[q] in prompt
        first = next(who for who in CONTESTANTS if shown(prompt, 1) == texts[who, q])  # verbatim, whole
        second = next(who for who in CONTESTANTS if shown(prompt, 2) == texts[who, q])
        assert (first, q) in asked and (second, q) in asked  # a kept answer: what that contestant was asked for
        orders[r.body["model"], q, frozenset((first, second))].append((first, second))
    assert len(orders) == 20
    for (_, _, pair), seen in orders.items():
        a, b = sorted(pair)
        assert sorted(seen) == sorted([(a, b), (b, a)])  # each order once, to the same judge
    assert len(reviews) == 40 and {r.order for r in reviews} == {0, 1}


def cli(*args, launch=None):
    prefix = [sys.executable, "-m", "arena.cli"] if launch is None else \
        [sys.executable, str(Path(__file__).with_name("chaos_launch.py")), *map(str, launch), "--"]
    return subprocess.run([*prefix, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "COLUMNS": "200"})


def test_a_killed_and_resumed_run_asks_no_answer_twice_and_ends_as_an_unbroken_one(tmp_path):
    with mock_server("openai", model) as mock:
        scenario = tmp_path / "live.yaml"
        # one match at a time: a kill just after a commit leaves no request of an unsaved match behind
        raw = live(mock, {"seed_block": 2, "block": 6, "budget": 24, "width": 1}, concurrency=1)
        raw["match"]["outage_wait"] = 5  # a failing mock fails the test, rather than keep it waiting
        scenario.write_text(yaml.safe_dump(raw, sort_keys=False))  # the agents' order says who answers
        reference, crashed = tmp_path / "reference", tmp_path / "crashed"
        done = cli("run", scenario, "--quiet", "--run-dir", reference)
        assert done.returncode == 0, done.stderr
        unbroken = answers_asked(mock.answered())
        mock.reset(None)
        # killed twice: among the seed block's answers, and in a later block
        for nth in (4, 22):
            killed = cli("run", scenario, "--quiet", "--run-dir", crashed, launch=("arena.store.writer:RunStore.flush", nth, "after"))
            assert killed.returncode == -9, killed.stderr
        resumed = cli("run", scenario, "--quiet", "--run-dir", crashed)
        assert resumed.returncode == 0, resumed.stderr
        sessions = answers_asked(mock.answered())
    assert set(sessions.values()) == {1}, sessions  # across the three sessions, no answer asked twice
    assert sessions == unbroken  # and the same answers as the unbroken run

    def exported(run_dir):
        out = cli("export", run_dir, "--format", "jsonl")
        assert out.returncode == 0, out.stderr
        return out.stdout

    expected = exported(reference)
    keys = lambda text: sorted(json.loads(line)["key"] for line in text.splitlines())
    assert len([k for k in keys(expected) if ";compared=" in k]) == 24
    assert keys(exported(crashed)) == keys(expected)
    assert exported(crashed) == expected


async def test_a_contestant_that_gives_no_answer_leaves_its_comparisons_unplayed_and_the_run_says_so(tmp_path):
    # pangolin's server answers every request with an empty text: after the match's retries its turn is
    # defaulted, so its answer match keeps no answer
    with mock_server("openai", model) as mock, mock_server("openai", model) as dead:
        dead.set_script(lambda count, body: "ok" if is_probe(body) else "empty")
        result, reviews, notes = await run(tmp_path, live(mock, {"seed_block": 2, "block": 6, "budget": 24, "width": 1},
                                                          dead=dead))
        asked_dead = answers_asked(dead.requests)
        judged = judge_requests(mock.answered())
    # each of its answers was asked for once (with the match's one retry), never again in a later block
    assert asked_dead and set(asked_dead.values()) == {2}, asked_dead
    assert {r.a for r in reviews} | {r.b for r in reviews} == {"quokka", "narwhal", "axolotl"}  # none of its scored
    played = [k for k in result.statuses if MatchIdentity.parse(k).compared]
    assert played and all(CONTESTANTS.index("pangolin") not in MatchIdentity.parse(k).compared for k in played)
    assert len(judge_requests(judged)) == 2 * len(played)
    (said,) = [n["text"] for n in notes if n["topic"] == "schedule"]
    assert re.search(rf"{len(asked_dead)} missing \(pangolin {len(asked_dead)}: no answer after the match's retries\), "
                     r"so \d+ comparisons were not played", said), said


async def test_a_contestant_whose_server_is_down_is_given_up_on_and_no_comparison_shows_it(tmp_path):
    # a server that answers 500 is an outage: the run waits match.outage_wait for it, then stops, and
    # the matches that need it are left for the next `arena run`
    with mock_server("openai", model) as mock, mock_server("openai", model) as dead:
        dead.set_script(lambda count, body: "500")
        raw = live(mock, {"seed_block": 2, "block": 6, "budget": 24, "width": 1}, dead=dead)
        raw["match"]["outage_wait"] = 0.5
        raw["agents"]["pangolin"]["retries"] = 0
        result, reviews, _ = await run(tmp_path, raw)
        judged = judge_requests(mock.answered())
    # left for the next run: its answer matches either never started or failed on the outage (which of
    # the two depends on how many had started when the first 500 came back)
    left = set(result.unplayed) | {k for k, status in result.statuses.items() if status != "finished"}
    assert result.outages and left
    assert all(MatchIdentity.parse(k).role_places("Contestant") == (CONTESTANTS.index("pangolin"),) for k in left)
    assert "pangolin" not in {r.a for r in reviews} | {r.b for r in reviews}
    assert not any(answer_text("pangolin-model", q) in json.dumps(r.body) for r in judged for q in QUESTIONS.values())


def test_the_dry_run_gives_the_range_of_answers_and_judge_calls(tmp_path):
    agents = {n: {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": f"{n}-model", "max_tokens": 200}
              for n in CONTESTANTS + JUDGES}
    raw = {"name": "live", "seed": 3, "agents": agents,
           "games": [{"game": "pairwise_review", "label": "pr",
                      "params": {"questions": str(QUESTIONS_FILE), "contestants": 4}}],
           "tournament": {"schedule": {"seed_block": 2, "budget": 40}},
           "prices": {f"{n}-model": {"input": 1.0, "output": 2.0} for n in agents}}
    (entry,) = estimate(parse_scenario(raw)).entries
    a = entry.adaptive
    seed = entry.matches  # the seed block's comparisons
    assert (a.most, a.limited_by) == (40, "budget") and a.calls == (2 * seed, 80)  # judge calls: two a comparison
    low, high = a.answers
    assert 2 <= low <= 2 * seed and high == 4 * len(QUESTIONS)  # the seed block's needs to every answer, once
    assert a.answer_calls == (low, high) and a.answer_cost[0] > 0
    assert a.answer_cost[1] == pytest.approx(a.answer_cost[0] * high / low)
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    out = cli("run", path, "--dry-run")
    assert out.returncode == 0, out.stderr
    assert re.search(rf"asks {seed} to 40 comparisons \(its seed block to its budget\): {2 * seed} to 80 calls", out.stdout)
    assert re.search(rf"live contestants are asked {low} to {high} answers \(the seed block's to every contestant on "
                     rf"every question, each once\): {low} to {high} calls, \$[\d.]+ to \$[\d.]+", out.stdout), out.stdout


@pytest.mark.parametrize("change, where, words", [
    (lambda raw: raw["games"][0]["params"].update(contestants=6), "games[0].params",
     "with live contestants needs a judge"),
    (lambda raw: raw["games"][0]["params"].update(contestants=1), "games[0].params", "set contestants to 2 or more"),
    (lambda raw: raw["games"][0]["params"].update(panel="vote"), "games[0].params", "a panel needs two judges or more"),
    (lambda raw: raw["games"][0]["params"].update(swap=False), "games[0].params.swap", "remove swap"),
])
def test_validate_refuses_what_still_cannot_work_with_a_sentence(change, where, words):
    raw = live(None, {"budget": 10})
    change(raw)
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    text = str(caught.value)
    assert where in text and words in text, text
    assert "Traceback" not in text


def test_validate_accepts_live_contestants_with_a_schedule_and_says_what_they_will_be_asked():
    out = cli("validate", ROOT / "scenarios" / "pairwise-review-adaptive-live.yaml")
    assert out.returncode == 0, out.stderr
    assert "fixed answers only" not in out.stdout + out.stderr
    assert re.search(r"the live contestants \(oak, pine, willow, hazel; judged by sage, braggart\) answer first: \d+ "
                     r"answers for the seed block, at most 32 in all \(each contestant asked each question at most "
                     r"once", out.stdout), out.stdout


async def test_a_contestant_that_signs_its_answer_is_not_named_to_the_judge(tmp_path):
    # the kept answer is the contestant's own words; a judge reads it through the anonymity filter, as it
    # would read what another seat wrote, so a signature does not give the contestant away
    def signing(body):
        reply = model(body)
        if not is_probe(body) and "[Assistant 1]" not in current_prompt(body):
            reply += f"\n-- written by {body['model'].removesuffix('-model').capitalize()} ({body['model']})"
        return reply

    with mock_server("openai", signing) as mock:
        _, reviews, _ = await run(tmp_path, live(mock, {"seed_block": 2, "block": 4, "budget": 8, "width": 1}))
        judged = judge_requests(mock.answered())
    assert len(judged) == 16 and len(reviews) == 16
    for r in judged:
        text = json.dumps(r.body).lower()
        assert not any(name in text for name in CONTESTANTS), text[:600]
        assert "written by [name withheld] ([name withheld])" in current_prompt(r.body)


async def test_with_peer_review_the_contestants_answer_once_and_judge_each_other(tmp_path):
    raw = yaml.safe_load((ROOT / "scenarios" / "pairwise-review-adaptive-live.yaml").read_text(encoding="utf-8"))
    for judge in ("sage", "braggart"):
        del raw["agents"][judge]
    raw["games"][0]["params"].update(questions=str(QUESTIONS_FILE), peer=True)
    raw["tournament"]["schedule"].update(budget=20)
    result, reviews, _ = await run(tmp_path, raw)
    contestants = ["oak", "pine", "willow", "hazel"]
    answers = [k for k in result.statuses if MatchIdentity.parse(k).role_places("Contestant")]
    assert len(answers) == len(set(answers)) and all(result.statuses[k] == "finished" for k in answers)
    assert {r.reviewer for r in reviews} <= set(contestants) and {r.a for r in reviews} <= set(contestants)
    assert len([k for k in result.statuses if MatchIdentity.parse(k).compared]) <= 20
