"""An adaptive schedule in the runner (tournament.schedule): which comparisons of a reviewing game are
played, block by block; both orders of a pair always in the same match; why it stops; the same
comparisons and results after a kill and a resume as without; the dry run's range of calls; clear
sentences for schedules that cannot work; and what a model judge is sent, through the OpenAI mock."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from arena.contract.errors import ConfigError
from arena.contract.records import MatchIdentity
from arena.run.dryrun import estimate
from arena.run.scenario import parse_scenario

from conformance_kit import BACKENDS, current_prompt, local_only, mock_server, model_agent  # noqa: F401  (local_only: autouse)
from helpers import ROOT, run_reviews as run  # plays a scenario into a store: result, reviews, notes

DATA = ROOT / "scenarios" / "data"
QUESTIONS = DATA / "sample-questions.jsonl"
ANSWERS = [str(DATA / "adaptive-answers" / f"{name}.jsonl") for name in ("atlas", "birch", "cedar", "delta", "ember", "flint")]
SOURCES = ["atlas", "birch", "cedar", "delta", "ember", "flint"]
JUDGES = {
    "sage": {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": "sage", "skill": 0.05}},
    "novice": {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": "novice", "skill": 0.2}},
    "braggart": {"backend": "scripted", "strategy": "synthetic_judge",
                 "params": {"name": "braggart", "skill": 0.1, "position_bias": 0.4}},
}
FULL = 8 * 15 * 3  # questions x pairs of the six sources x judges


def adaptive(schedule: dict, agents: dict | None = None, **params) -> dict:
    return {"name": "adaptive", "seed": 7, "agents": agents or JUDGES,
            "games": [{"game": "pairwise_review", "label": "pr",
                       "params": {"questions": str(QUESTIONS), "contestants": 0, "answers": ANSWERS, **params}}],
            "tournament": {"schedule": schedule}, "concurrency": 4}


def comparisons_played(reviews) -> dict[str, dict]:
    """Per match: its question, pair (sorted), judge and the orders each of its verdicts came in."""
    out: dict[str, dict] = defaultdict(lambda: {"question": set(), "pair": set(), "judge": set(), "orders": []})
    for r in reviews:
        m = out[r.match]
        m["question"].add(r.question)
        m["pair"].add(tuple(sorted((r.a, r.b))))
        m["judge"].add(r.reviewer)
        m["orders"].append((r.order, r.a, r.b))
    return out


async def test_every_comparison_is_one_judge_on_one_pair_in_both_orders_in_one_match(tmp_path):
    result, reviews, _ = await run(tmp_path, adaptive({"rule": "default", "seed_block": 2, "block": 10, "budget": 26,
                                                       "width": 1}))
    played = comparisons_played(reviews)
    assert len(result.statuses) == 26 and result.count("finished") == 26
    assert set(played) == set(result.statuses)  # every match gave its verdicts
    for key, m in played.items():
        assert len(m["question"]) == len(m["pair"]) == len(m["judge"]) == 1, (key, m)
        (first, second), = m["pair"]
        # order 0 shows the pair as named, order 1 the other way round: both, once each (samples: 1)
        assert sorted(m["orders"]) == [(0, first, second), (1, second, first)], (key, m["orders"])
        identity = MatchIdentity.parse(key)
        assert identity.case == next(iter(m["question"]))
        assert [SOURCES[p] for p in identity.compared] == [first, second]
        assert list(JUDGES)[identity.places[0]] == next(iter(m["judge"]))
    whole = {(next(iter(m["question"])), next(iter(m["pair"])), next(iter(m["judge"]))) for m in played.values()}
    assert len(whole) == 26  # no comparison asked twice


async def test_a_clear_ranking_stops_on_stability_before_the_budget_and_says_so(tmp_path):
    result, _, notes = await run(tmp_path, adaptive({"seed_block": 2, "block": 20, "budget": 200, "tau": 0.9,
                                                     "width": 400}))
    last = result.adaptive[-1]
    assert last.stopped == "stable" and last.comparisons < 200 and len(result.statuses) == last.comparisons
    assert last.tau >= 0.9 and last.max_width <= 400
    assert [c.stopped for c in result.adaptive[:-1]] == [None] * (len(result.adaptive) - 1)
    # the ranking it stopped on is the true one: the sources were written with falling quality
    assert sorted(last.means, key=lambda n: -last.means[n]) == SOURCES
    said = [n["text"] for n in notes if n["topic"] == "schedule"]
    assert len(said) == 1 and "stopped after" in said[0] and "the ranking is stable" in said[0], said


async def test_a_ranking_held_to_a_narrow_interval_stops_on_its_budget_and_says_so(tmp_path):
    result, _, notes = await run(tmp_path, adaptive({"seed_block": 2, "block": 10, "budget": 30, "width": 1}))
    assert len(result.statuses) == 30 and result.adaptive[-1].stopped == "budget"
    said = [n["text"] for n in notes if n["topic"] == "schedule"]
    assert [n["agent"] for n in notes if n["topic"] == "schedule"] == ["pr"]  # kept under the entry's name ...
    assert said == [f"the adaptive schedule (default) stopped after 30 of {FULL} comparisons in "  # ... not repeated
                    f"{len(result.adaptive)} blocks: its budget of 30 comparisons is spent "
                    f"(Kendall tau {result.adaptive[-1].tau:.2f}, widest interval {result.adaptive[-1].max_width:.2f})"]


async def test_a_schedule_that_runs_out_of_comparisons_says_so(tmp_path):
    one = {"sage": JUDGES["sage"]}
    result, _, notes = await run(tmp_path, adaptive({"rule": "full", "block": 50, "width": 1}, agents=one))
    assert len(result.statuses) == 8 * 15 and result.adaptive[-1].stopped == "exhausted"
    assert any("no comparison is left to ask" in n["text"] for n in notes if n["topic"] == "schedule")


def cli(*args, launch=None):
    prefix = [sys.executable, "-m", "arena.cli"] if launch is None else \
        [sys.executable, str(Path(__file__).with_name("chaos_launch.py")), *map(str, launch), "--"]
    return subprocess.run([*prefix, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=300,
                          env={**__import__("os").environ, "COLUMNS": "200"})


def test_a_run_killed_mid_block_resumes_to_the_comparisons_and_results_of_an_unbroken_one(tmp_path):
    scenario = tmp_path / "adaptive.yaml"
    scenario.write_text(yaml.safe_dump(adaptive({"seed_block": 2, "block": 12, "budget": 60, "width": 1})))
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    done = cli("run", scenario, "--quiet", "--run-dir", reference)
    assert done.returncode == 0, done.stderr
    # killed twice: in the second block, just after a match was stored, and in the fourth, just before
    for point in (("arena.store.writer:RunStore.finish", 14, "after"), ("arena.store.writer:RunStore.finish", 20, "before")):
        killed = cli("run", scenario, "--quiet", "--run-dir", crashed, launch=point)
        assert killed.returncode == -9, killed.stderr
    resumed = cli("run", scenario, "--quiet", "--run-dir", crashed)
    assert resumed.returncode == 0, resumed.stderr

    def exported(run_dir):
        out = cli("export", run_dir, "--format", "jsonl")
        assert out.returncode == 0, out.stderr
        return out.stdout

    expected = exported(reference)
    keys = lambda text: sorted(json.loads(line)["key"] for line in text.splitlines())
    assert len(keys(expected)) == 60
    assert keys(exported(crashed)) == keys(expected)  # the same comparisons chosen
    assert exported(crashed) == expected  # and the same verdicts in them
    rank = lambda d: json.loads(cli("rank", d, "--json").stdout)["peer_rank"]
    assert rank(crashed) == rank(reference)
    # the run's tables and its list of matches say once why the schedule stopped, though three sessions made the run
    for command in ("rank", "show"):
        shown = cli(command, crashed)
        assert shown.returncode == 0 and shown.stdout.count("its budget of 60 comparisons is spent") == 1, shown.stdout


def test_the_dry_run_gives_the_range_of_calls_and_cost_from_the_seed_block_to_the_budget(tmp_path):
    judges = {n: {"backend": "openai", "base_url": "http://127.0.0.1:9/v1", "model": f"{n}-model", "max_tokens": 200}
              for n in ("ann", "bob")}
    raw = adaptive({"seed_block": 2, "budget": 100}, agents=judges)
    raw["prices"] = {f"{n}-model": {"input": 1.0, "output": 2.0} for n in judges}
    found = estimate(parse_scenario(raw))
    (entry,) = found.entries
    a = entry.adaptive
    assert entry.matches == 6 and entry.calls_per_match == 2  # one pair by one judge, in both orders
    assert (a.most, a.limited_by) == (100, "budget") and a.calls == (12, 200)
    assert a.cost[0] > 0 and a.cost[1] == pytest.approx(a.cost[0] * 100 / 6)
    raw["tournament"]["schedule"].pop("budget")
    assert estimate(parse_scenario(raw)).entries[0].adaptive.most == 8 * 15 * 2  # the full design of two judges
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = cli("run", path, "--dry-run")
    assert out.returncode == 0, out.stderr
    line = next(line for line in out.stdout.splitlines() if "adaptive schedule asks" in line)
    assert re.search(r"asks 6 to 240 comparisons \(its seed block to the full design\): 12 to 480 calls, \$[\d.]+ to "
                     r"\$[\d.]+", line), line


@pytest.mark.parametrize("change, where, words", [
    (lambda raw: raw["games"][0].update(game="public_goods", params={}), "tournament.schedule",
     "public_goods reports none"),
    (lambda raw: raw["games"][0]["params"].update(contestants=3, answers=None), "games[0].params",
     "with live contestants needs a judge"),  # live contestants are played (tests/test_adaptive_live.py), but judged
    (lambda raw: raw["games"][0]["params"].update(swap=False), "games[0].params.swap", "swap: true (both orders"),
    (lambda raw: raw["games"][0]["params"].update(pair=["atlas", "flint"]), "games[0].params.pair",
     "chooses pair for each comparison"),
    (lambda raw: raw["tournament"].update(repeats=3), "tournament.repeats", "remove `repeats`"),
    (lambda raw: raw["tournament"].update(format="all_pairs"), "tournament.format", "remove `format`"),
    (lambda raw: raw["tournament"]["schedule"].update(rule="best"), "tournament.schedule.rule", "elimination"),
    (lambda raw: raw["tournament"]["schedule"].update(block=0), "tournament.schedule.block", "greater than or equal to 1"),
    (lambda raw: raw["tournament"]["schedule"].update(budgett=5), "tournament.schedule.budgett", "did you mean 'budget'"),
])
def test_a_schedule_that_cannot_work_is_refused_with_a_sentence(change, where, words):
    raw = adaptive({"budget": 40})
    change(raw)
    if raw["games"][0]["params"].get("answers", ANSWERS) is None:  # live contestants: no answers files
        del raw["games"][0]["params"]["answers"]
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    text = str(caught.value)
    assert where in text and words in text, text
    assert "Traceback" not in text


def test_the_cli_refuses_a_schedule_for_a_game_without_reviews_naming_it(tmp_path):
    raw = adaptive({"budget": 40})
    raw["games"][0].update(game="public_goods", params={})
    path = tmp_path / "s.yaml"
    path.write_text(yaml.safe_dump(raw))
    out = cli("validate", path)
    assert out.returncode == 2 and "public_goods reports none" in out.stderr + out.stdout and "Traceback" not in out.stderr


def points(text: str) -> int:
    return len(set(re.findall(r"^Point (\d+)\.", text, re.M)))


def judging_by_points(body) -> str:
    """A judge that scores each answer by its key points, from the request's text alone."""
    prompt = current_prompt(body)
    first = prompt.split("[Assistant 1]\n", 1)[1].split("\n[End of Assistant 1]", 1)[0]
    second = prompt.split("[Assistant 2]\n", 1)[1].split("\n[End of Assistant 2]", 1)[0]
    return f"The first makes {points(first)} points, the second {points(second)}.\n{min(10, points(first) + 1)} " \
           f"{min(10, points(second) + 1)}"


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_model_judge_is_sent_the_question_and_both_answers_in_both_orders_for_every_comparison(backend, tmp_path):
    texts = {name: {json.loads(l)["question_id"]: json.loads(l)["text"] for l in open(path)}
             for name, path in zip(SOURCES, ANSWERS)}
    questions = {json.loads(l)["id"]: json.loads(l)["question"] for l in open(QUESTIONS)}
    with mock_server(backend, judging_by_points) as mock:
        judges = {n: model_agent(backend, mock, model=f"{n}-model") for n in ("ann", "bob")}
        raw = adaptive({"seed_block": 2, "block": 4, "budget": 10, "width": 1}, agents=judges)
        raw["match"] = {"turn_timeout": 600, "max_retries": 0}
        result, reviews, _ = await run(tmp_path, raw)
        requests = [r for r in mock.answered() if "[Assistant 1]" in current_prompt(r.body)]
    assert result.count("finished") == 10 and len(requests) == 20  # two calls a comparison, nothing else asked
    shown = defaultdict(list)
    for r in requests:
        prompt = current_prompt(r.body)
        found = next((q, a, b) for q in questions for a in SOURCES for b in SOURCES
                     if a != b and questions[q] in prompt and f"[Assistant 1]\n{texts[a][q]}\n[End of Assistant 1]" in prompt
                     and f"[Assistant 2]\n{texts[b][q]}\n[End of Assistant 2]" in prompt)
        shown[r.body["model"], found[0], frozenset(found[1:])].append(found[1:])
    assert len(shown) == 10
    for (model, question, pair), orders in shown.items():
        a, b = sorted(pair)
        assert sorted(orders) == sorted([(a, b), (b, a)]), (model, question, orders)  # each order once, same judge
    # and what the judge said is what the run kept: a review per request, each order calibrated with the other
    assert len(reviews) == 20 and {r.order for r in reviews} == {0, 1}


def test_the_schedule_offers_every_rule_of_the_policies_and_no_other():
    from typing import get_args

    from arena.rank.adaptive import RULES
    from arena.run.scenario import Schedule

    assert set(get_args(Schedule.model_fields["rule"].annotation)) == set(RULES)


async def test_a_judge_that_never_gives_a_verdict_costs_its_comparisons_and_nothing_else(tmp_path):
    # "noise" replies with garbage: its matches finish without a review and give the schedule no outcome;
    # after five such comparisons it is asked no more, and the run says so
    agents = {"sage": JUDGES["sage"], "noise": {"backend": "scripted", "strategy": "garbage"}}
    raw = adaptive({"seed_block": 2, "block": 10, "budget": 40, "width": 1}, agents=agents)
    raw["match"] = {"max_retries": 0}
    result, reviews, notes = await run(tmp_path, raw)
    assert result.count("finished") == 40 and result.adaptive[-1].stopped == "budget"
    assert {r.reviewer for r in reviews} == {"sage"}
    noisy = [k for k in result.statuses if MatchIdentity.parse(k).places == (1,)]
    assert 5 <= len(noisy) <= 5 + 10 and not {r.match for r in reviews} & set(noisy)  # at most a block past the fifth
    (said,) = [n["text"] for n in notes if n["topic"] == "schedule"]
    assert "its budget of 40 comparisons is spent" in said and "noise gave no valid verdict in 5 comparisons and was " \
        "asked no more" in said, said


@pytest.mark.parametrize("pair, words", [
    (["atlas", "zed"], "pair names two different sources of the answers (atlas, birch, cedar, delta, ember, flint); "
                       "it names atlas, zed"),
    (["atlas", "atlas"], "pair names two different sources"),
])
def test_a_pair_that_names_no_two_sources_is_refused_with_a_sentence(pair, words):
    raw = adaptive({"budget": 4})
    del raw["tournament"]
    raw["games"][0]["params"]["pair"] = pair
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    assert "games[0].params" in str(caught.value) and words in str(caught.value), str(caught.value)


def test_validate_says_how_an_adaptive_entry_grows_past_its_seed_block():
    out = cli("validate", ROOT / "scenarios" / "pairwise-review-adaptive.yaml")
    assert out.returncode == 0, out.stderr
    assert "6 matches" in out.stdout and ("adaptive schedule (default): 6 comparisons in its seed block, then blocks "
                                          "of 20 chosen by the results, up to 200 (its budget)") in out.stdout, out.stdout
