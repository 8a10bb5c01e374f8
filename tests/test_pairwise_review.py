"""Pairwise review: one match per question, FairEval's calibrations, and review tuples for peer rank."""

from __future__ import annotations

import json
from collections import Counter

import pytest
from scipy import stats

from arena.contract import Review
from arena.engine.match import play_match
from arena.rank.bias import reviewer_bias
from arena.rank.reviews import Reviews
from arena.contract.records import MatchSettings, MatchSpec
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.contract.errors import ConfigError
from arena.store import RunStore
from arena.run.tournament import plan

from helpers import Recording, scripted, play


@pytest.fixture
def questions(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text('{"id": "q1", "question": "How do I boil an egg?"}\n'
                    '{"id": 2, "question": "Why is the sky blue?", "category": "science"}\n')
    return str(path)


def fixed(name, *replies):
    # by round: a judge's comparisons stand alone, so it sees none of its earlier turns to count
    return scripted(name, "fixed", params={"replies": list(replies), "cycle": "round"})


def spec(questions, agents, **params):
    return MatchSpec(key="m", game="pairwise_review", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"questions": questions, "case": "q1", **params}, settings=MatchSettings(max_retries=1))


async def test_bpc_shows_each_pair_in_both_orders_and_averages_the_2k_results(questions):
    # `fixed` replies by round: rounds 2-5 are the four comparisons and get replies 1, 2, 3, 0
    judge = Recording(fixed("judge", "First.\n8 3", "First.\n8 3", "Hm.\n5 5", "Second.\n2 9"))
    agents = {"x": fixed("x", "Answer X."), "y": fixed("y", "Answer Y."), "judge": judge}
    record = await play_match(spec(questions, agents, samples=2), agents)
    assert record.status == "finished" and record.rounds == 1 + 4
    shown = [tuple(t.prompt_data["answers"]) for t in judge.turns]
    assert shown == [("Answer X.", "Answer Y."), ("Answer X.", "Answer Y."), ("Answer Y.", "Answer X."), ("Answer Y.", "Answer X.")]
    assert all("Assistant 1]\n" + a in t.prompt for t, (a, _) in zip(judge.turns, shown))
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    (verdict,) = notice.data["verdicts"]
    # score differences from the pair's side (< 0: X better): X first "8 3" -> -5; X first "5 5" -> 0;
    # Y first "2 9" -> X better by 7, -7; Y first "8 3" -> Y better by 5, +5
    assert verdict["results"] == [-5, 0, -7, 5]
    assert verdict["verdict"] == -1  # mean -1.75: X is better
    assert verdict["bpde"] == pytest.approx(stats.entropy([2, 1, 1]))  # two X, one tie, one Y
    # the reviews are the comparisons as shown (A: shown first), each with its sample, order and difference
    assert record.reviews == [
        Review("q1", "x", "y", "judge", -1, sample=0, order=0, difference=-5.0, match="m"),
        Review("q1", "x", "y", "judge", 0, sample=1, order=0, difference=0.0, match="m"),
        Review("q1", "y", "x", "judge", 1, sample=0, order=1, difference=7.0, match="m"),
        Review("q1", "y", "x", "judge", -1, sample=1, order=1, difference=-5.0, match="m"),
    ]
    assert record.payoffs == {"Contestant 1": 1.0, "Contestant 2": 0.0, "Judge": 0.0}
    # peer rank calibrates them into the notice's verdict: order means -2.5 and -1, their mean -1.75
    (battle,) = Reviews.from_rows(record.reviews).battles().rows()
    assert battle.battle == ("q1", "x", "y", "judge", -1) and battle.difference == pytest.approx(-1.75)


async def test_a_fixed_judge_says_its_replies_by_its_own_turns_though_it_sees_none_of_them(questions):
    # a judge's comparisons stand alone: its history holds none of its earlier turns, yet the engine counts them
    replies = ["First.\n8 3", "Hm.\n5 5", "Second.\n2 9", "First.\n8 3"]
    judge = Recording(scripted("judge", "fixed", params={"replies": replies}))
    agents = {"x": fixed("x", "Answer X."), "y": fixed("y", "Answer Y."), "judge": judge}
    record = await play_match(spec(questions, agents, samples=2), agents)
    assert [t.turn for t in judge.turns] == [0, 1, 2, 3] and [t.round for t in judge.turns] == [2, 3, 4, 5]
    assert all(not [m for m in t.history if m.kind == "prompt"] for t in judge.turns)
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    assert notice.data["verdicts"][0]["results"] == [-5, 0, -7, 5]  # replies 0, 1, 2, 3, in that order


async def test_a_pure_position_bias_cancels_out(questions):
    agents = {"x": fixed("x", "Answer X."), "y": fixed("y", "Answer Y."), "judge": fixed("judge", "First!\n9 2")}
    record = await play_match(spec(questions, agents, samples=3), agents)
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    (verdict,) = notice.data["verdicts"]
    assert verdict["results"] == [-7, -7, -7, 7, 7, 7] and verdict["verdict"] == 0
    assert verdict["bpde"] == pytest.approx(stats.entropy([3, 3]))  # the most uncertain a 2-way split can be
    assert [(r.battle, r.sample, r.order) for r in record.reviews] == (
        [(("q1", "x", "y", "judge", -1), k, 0) for k in range(3)] + [(("q1", "y", "x", "judge", -1), k, 1) for k in range(3)])
    reviews = Reviews.from_rows(record.reviews)
    assert [b.battle for b in reviews.battles().rows()] == [("q1", "x", "y", "judge", 0)]  # rank's verdict: a tie too
    (bias,) = reviewer_bias(reviews)
    assert (bias.first_shown_wins, bias.swapped_pairs, bias.flip_rate) == (1.0, 1, 1.0)  # the bias, seen in full
    unswapped = await play_match(spec(questions, agents, samples=3, swap=False), agents)
    assert [r.battle for r in unswapped.reviews] == [("q1", "x", "y", "judge", -1)] * 3 and unswapped.rounds == 1 + 3


@pytest.mark.parametrize("replies", [("1 too", "tie", "2", "2"), ("2", "1", "tie", "1")])
async def test_bpde_is_the_entropy_of_the_2k_results(questions, replies):
    agents = {"x": fixed("x", "X."), "y": fixed("y", "Y."), "judge": fixed("judge", *(f"why\n{r}" for r in replies))}
    record = await play_match(spec(questions, agents, samples=2, output="choice"), agents)
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    (verdict,) = notice.data["verdicts"]
    results = [r for r in verdict["results"] if r is not None]  # choices: -1, 0, 1
    assert len(verdict["results"]) == 4 and set(results) <= {-1, 0, 1}
    assert verdict["bpde"] == pytest.approx(stats.entropy(list(Counter(results).values())))


async def test_templates_put_the_verdict_on_the_first_or_last_line(questions):
    agents = {"x": fixed("x", "X."), "y": fixed("y", "Y."), "judge": fixed("judge", "7 4\nbecause X says more")}
    first = await play_match(spec(questions, agents, template="verdict_first", swap=False), agents)
    assert [r.battle for r in first.reviews] == [("q1", "x", "y", "judge", -1)]  # "7 4": the first shown, X, is better
    last = await play_match(spec(questions, agents, template="evidence_first", swap=False), agents)
    failures = [e for e in last.events if e.type == "turn_failed"]
    assert failures and "last line must be only two scores" in failures[0].reason
    assert last.reviews == []  # no valid verdict: the comparison is left out, not guessed


async def test_judges_see_each_comparison_alone_and_contestants_never_see_each_other(questions):
    judge = Recording(fixed("judge", "ok\n6 6"))
    x = Recording(fixed("x", "X."))
    agents = {"x": x, "y": fixed("y", "Y."), "z": fixed("z", "Z."), "judge": judge}
    record = await play_match(spec(questions, agents, contestants=3), agents)
    assert len(judge.turns) == 3 * 2  # three pairs, both orders
    assert all({m.kind for m in t.history} == {"rules"} for t in judge.turns)
    assert all(m.sender in (t.seat, "Referee") for t in x.turns for m in t.history)
    assert len(record.reviews) == 3 * 2


def test_one_match_per_question_and_clear_errors(questions, tmp_path):
    agents = {"x": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["X"]}},
              "y": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["Y"]}},
              "j": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["a\n5 6"]}}}
    scenario = parse_scenario({"name": "pr", "agents": agents, "tournament": {"role_swap": False, "repeats": 2},
                               "games": [{"game": "pairwise_review", "params": {"questions": questions}}]})
    keys = [s.key for s in plan(scenario)]
    assert keys == ["pairwise_review/q1#1:Contestant=0+1,Judge=2", "pairwise_review/2#1:Contestant=0+1,Judge=2",
                    "pairwise_review/q1#2:Contestant=0+1,Judge=2", "pairwise_review/2#2:Contestant=0+1,Judge=2"]
    with pytest.raises(ConfigError, match="no seat is left to judge"):
        parse_scenario({"name": "pr", "agents": {k: agents[k] for k in "xy"},
                        "games": [{"game": "pairwise_review", "params": {"questions": questions}}]})
    # the scenario checks the file before the game reads it, so the message names the field
    with pytest.raises(ConfigError, match=r"games\[0\]\.params\.questions: no file at .*nope.jsonl"):
        parse_scenario({"name": "pr", "agents": agents,
                        "games": [{"game": "pairwise_review", "params": {"questions": str(tmp_path / "nope.jsonl")}}]})
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"id": 1, "question": "fine"}\n{"question": "no id"}\n')
    with pytest.raises(ConfigError, match="bad.jsonl, line 2: not a question"):
        parse_scenario({"name": "pr", "agents": agents, "games": [{"game": "pairwise_review", "params": {"questions": str(bad)}}]})


# lines of MT-Bench's question.jsonl as published: a question and its follow-up in "turns", a reference answer per turn
MT_BENCH = (
    '{"question_id": 81, "category": "writing", "turns": ["Compose an engaging travel blog post about a recent trip to '
    'Hawaii, highlighting cultural experiences and must-see attractions.", "Rewrite your previous response. Start every '
    'sentence with the letter A."]}\n'
    '{"question_id": 82, "category": "writing", "turns": ["Draft a professional email seeking your supervisor\'s feedback '
    'on the \'Quarterly Financial Report\' you prepared.", "Take a moment to evaluate and critique your own response."]}\n'
    '{"question_id": 111, "category": "math", "turns": ["The vertices of a triangle are at points (0, 0), (-1, 1), and '
    '(3, 3). What is the area of the triangle?", "What\'s area of the circle circumscribing the triangle?"], '
    '"reference": ["Area is 3", "5pi"]}\n')


async def test_mt_benchs_question_file_is_read_as_it_is_and_its_first_turn_asked(tmp_path):
    path = tmp_path / "question.jsonl"
    path.write_text(MT_BENCH, encoding="utf-8")
    agents = {"x": Recording(fixed("x", "X.")), "y": fixed("y", "Y."), "judge": fixed("judge", "ok\n6 6")}
    scenario = parse_scenario({"name": "mt", "agents": {n: {"backend": "scripted", "strategy": "fixed",
                                                            "params": {"replies": ["X."]}} for n in agents},
                               "tournament": {"role_swap": False},
                               "games": [{"game": "pairwise_review", "params": {"questions": str(path)}}]})
    assert [s.key.split("#")[0] for s in plan(scenario)] == ["pairwise_review/81", "pairwise_review/82", "pairwise_review/111"]
    record = await play_match(MatchSpec(key="m", game="pairwise_review", agents=("x", "y", "judge"), seed=1,
                                        shuffle_seats=False, params={"questions": str(path), "case": "81"}), agents)
    assert record.status == "finished"
    [asked] = agents["x"].turns
    assert asked.prompt.startswith("Question: Compose an engaging travel blog post about a recent trip to Hawaii")
    assert "Start every sentence with the letter A" not in asked.prompt  # the follow-up is another turn, not asked


def test_a_line_of_another_shape_is_refused_naming_the_fields_expected_and_found(tmp_path):
    agents = {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["X."]}} for n in ("x", "y", "j")}
    bad = tmp_path / "answers.jsonl"  # an answer file given as the questions
    bad.write_text('{"question_id": 81, "answer_id": "a1", "model_id": "gpt-4", "choices": [{"turns": ["..."]}]}\n')
    with pytest.raises(ConfigError) as raised:
        parse_scenario({"name": "pr", "agents": agents,
                        "games": [{"game": "pairwise_review", "params": {"questions": str(bad)}}]})
    said = str(raised.value)
    assert "answers.jsonl, line 1: not a question: question or text or turns: field required." in said, said
    assert "Expected fields: id or question_id, question or text or turns, category (optional), reference (optional)" in said
    assert "found: question_id, answer_id, model_id, choices" in said
    assert "validation error for Question" not in said


async def test_peer_review_feeds_peer_rank(questions, tmp_path):
    import subprocess
    import sys

    # three peers answer and judge each other; everyone rates "long" above "mid" above "short" by length
    def peer(name, answer):
        return {"backend": "scripted", "strategy": "fixed", "params": {"replies": [answer]}}

    scenario = parse_scenario({
        "name": "peers", "tournament": {"role_swap": False},
        "agents": {"short": peer("short", "S"), "mid": peer("mid", "M"), "long": peer("long", "L")},
        "games": [{"game": "pairwise_review", "params": {"questions": questions, "contestants": 3, "peer": True,
                                                         "output": "choice"}}],
    })
    from arena.contract import plugins
    from arena.agents.strategies import Strategy

    class ByLength(Strategy):
        def reply(self, turn, rng):
            data = turn.prompt_data
            if data["task"] == "answer":
                return {"Contestant 1": "short", "Contestant 2": "a middling answer", "Contestant 3": "a long, full answer"}[turn.seat]
            first, second = data["answers"]
            return "why\n" + ("1" if len(first) > len(second) else "2")

    plugins.register("strategy", "by_length", ByLength)
    try:
        for name in scenario.agents:
            scenario.agents[name] = {"backend": "scripted", "strategy": "by_length"}
        store = RunStore.create_or_resume(tmp_path / "run", "peers", "t", scenario.fingerprint())
        result, records = await play(scenario, store)
        store.close()
    finally:
        plugins.unregister("strategy", "by_length")
    assert all(r.status == "finished" for r in records)
    assert len(records[0].reviews) == 3 * 3 * 2  # three judges x three pairs x two orders
    out = subprocess.run([sys.executable, "-m", "arena.cli", "rank", str(tmp_path / "run"), "--json"], capture_output=True, text=True)
    board = json.loads(out.stdout)["peer_rank"]
    winrate = next(m for m in board["methods"] if m["method"] == "winrate")
    assert sorted(winrate["scores"], key=lambda c: -winrate["scores"][c]) == ["long", "mid", "short"]


def test_peer_rank_and_bpc_undo_a_biased_judge():
    """Synthetic peers whose true quality is known; one judge favours the first-shown answer and its own."""
    import importlib.util

    from helpers import ROOT

    loader = importlib.util.spec_from_file_location("judging_bias", ROOT / "bench" / "judging_bias.py")
    bench = importlib.util.module_from_spec(loader)
    loader.loader.exec_module(bench)
    figures = bench.measure()
    assert figures["tau_all_weighted"] == pytest.approx(1.0)  # the true order
    assert figures["tau_braggart_alone"] < 1.0  # it ranks itself too high
    assert figures["braggart_weight"] < figures["sage_weight"]
    assert figures["braggart_first_shown_wins"] > 0.55  # its position bias shows in single-order verdicts
    assert figures["braggart_accuracy_bpc"] > figures["braggart_accuracy_uncalibrated"] + 0.05


# Human in the loop (arena annotate) is tested in test_annotate.py.


async def test_fixed_answers_from_files_are_judged_by_every_seat(questions, tmp_path):
    (tmp_path / "answer_alpha.jsonl").write_text('{"question_id": "q1", "text": "Boil it for eight minutes."}\n')
    (tmp_path / "beta.jsonl").write_text('{"question_id": "q1", "text": "Eggs?", "model_id": "beta-model"}\n')
    files = [str(tmp_path / "answer_alpha.jsonl"), str(tmp_path / "beta.jsonl")]
    judge = Recording(fixed("judge", "fine\n7 2"))
    agents = {"judge": judge, "other": fixed("other", "fine\n6 6")}
    record = await play_match(spec(questions, agents, contestants=0, answers=files, swap=True), agents)
    assert record.status == "finished", record.error
    assert tuple(judge.turns[0].prompt_data["answers"]) == ("Boil it for eight minutes.", "Eggs?")
    assert sorted(set(r[1:3] for r in record.reviews)) == [("alpha", "beta-model"), ("beta-model", "alpha")]
    assert {r[3] for r in record.reviews} == {"judge", "other"}
    with pytest.raises(ConfigError, match="set contestants: 0"):
        parse_scenario({"name": "f", "agents": {"j": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["x"]}},
                                                "k": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["x"]}}},
                        "games": [{"game": "pairwise_review", "params": {"questions": questions, "answers": files}}]})


@pytest.mark.skipif(not (pytest.importorskip("helpers").ROOT.parent / "shared" / "data" / "prd").is_dir(),
                    reason="PRD's data is not at ../shared/data beside the project")
def test_vicuna80_generations_are_read_as_they_are():
    from arena.games.pairwise_review import fixed_answers
    from helpers import ROOT

    folder = ROOT.parent / "shared" / "data" / "prd" / "vicuna80" / "generations"
    sources = fixed_answers(tuple(str(p) for p in sorted(folder.glob("answer_*.jsonl"))))
    assert len(sources) == 5 and all(len(texts) == 80 for texts in sources.values())
