"""ChatEval's debate: who sees what under each strategy, and how verdicts are combined."""

from __future__ import annotations

import json
import os

import pytest

from arena.contract import plugins
from arena.contract.errors import ConfigError
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
from arena.games.debate_verdicts import verdict_scores
from arena.run.scenario import parse_scenario

from helpers import ROOT, Recording, scripted


@pytest.fixture
def pairs(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "p1", "question": "Q?", "answer_a": "A.", "answer_b": "B.", "label": 1}\n')
    return str(path)


def debater(name, *verdicts):
    return Recording(scripted(name, "fixed", params={"replies": [f"{name} argues.\nVerdict: {v}" for v in verdicts]}))


def spec(pairs, agents, **params):
    return MatchSpec(key="d", game="chateval_debate", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"pairs": pairs, "case": "p1", **params})


def summary(record):
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    return notice.data


async def test_one_by_one_each_debater_sees_every_earlier_turn(pairs):
    agents = {n: debater(n, "1") for n in ("a", "b", "c")}
    record = await play_match(spec(pairs, agents, strategy="one_by_one", turns=2), agents)
    assert record.rounds == 6
    third = agents["c"].turns[0]  # round 3: a and b have spoken this turn
    assert [m.sender for m in third.history if m.kind == "reply"] == ["Debater 1", "Debater 2"]
    last = agents["a"].turns[1]  # round 4: all of the first turn
    assert [m.sender for m in last.history if m.kind == "reply"] == ["Debater 1", "Debater 2", "Debater 3"]
    assert all(m.round < t.round for agent in agents.values() for t in agent.turns for m in t.history)


async def test_simultaneous_talk_shows_no_message_of_the_same_turn(pairs):
    agents = {n: debater(n, "1", "2") for n in ("a", "b", "c")}
    record = await play_match(spec(pairs, agents, strategy="simultaneous_talk", turns=2), agents)
    assert record.rounds == 2
    for agent in agents.values():
        first, second = agent.turns
        assert not [m for m in first.history if m.kind == "reply"]
        assert {m.sender for m in second.history if m.kind == "reply"} == {"Debater 1", "Debater 2", "Debater 3"}
        assert all(m.round == 1 for m in second.history if m.kind == "reply")


async def test_with_a_summarizer_debaters_see_the_summary_not_each_other(pairs):
    agents = {n: debater(n, "1") for n in ("a", "b")}
    agents["sum"] = Recording(scripted("sum", "fixed", params={"replies": ["Both lean to answer 1."]}))
    record = await play_match(spec(pairs, agents, strategy="simultaneous_talk_with_summarizer", turns=2), agents)
    assert record.rounds == 4
    turn_two = agents["a"].turns[1]
    others = [m for m in turn_two.history if m.kind == "reply" and m.sender != turn_two.seat]
    assert [m.sender for m in others] == ["Summarizer"] and others[0].content == "Both lean to answer 1."
    summarizer_view = agents["sum"].turns[0].history
    assert {m.sender for m in summarizer_view if m.kind == "reply"} == {"Debater 1", "Debater 2"}
    assert record.payoffs["Summarizer"] == 0.0


async def test_the_majority_decides_and_the_last_verdict_counts(pairs):
    agents = {"a": debater("a", "2", "1"), "b": debater("b", "1", "1"), "c": debater("c", "1", "2")}
    record = await play_match(spec(pairs, agents, strategy="simultaneous_talk", turns=2), agents)
    data = summary(record)
    assert data["finals"] == {"Debater 1": -1, "Debater 2": -1, "Debater 3": 1} and data["verdict"] == -1
    assert record.payoffs == {"Debater 1": 0.0, "Debater 2": 0.0, "Debater 3": 1.0}  # the label says answer 2
    assert sorted(r.battle for r in record.reviews) == [("p1", "answer_a", "answer_b", "a", -1), ("p1", "answer_a", "answer_b", "b", -1),
                                      ("p1", "answer_a", "answer_b", "c", 1)]
    assert set(data["personas"].values()) <= {"Everyday reader", "Critic", "Domain expert", "Editor", "Teacher"}


async def test_scores_are_averaged(pairs):
    agents = {"a": Recording(scripted("a", "fixed", params={"replies": ["x\nScores: 8 4"]})),
              "b": Recording(scripted("b", "fixed", params={"replies": ["x\nScores: 5 7"]}))}
    record = await play_match(spec(pairs, agents, strategy="simultaneous_talk", turns=1, output="scores"), agents)
    assert summary(record)["verdict"] == pytest.approx(((4 - 8) + (7 - 5)) / 2)


def test_personas_and_seats_are_checked(pairs):
    agents = {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["Verdict: 1"]}} for n in "abc"}
    with pytest.raises(ConfigError, match="3 debaters but only 2 personas"):
        parse_scenario({"name": "d", "agents": agents, "games": [{"game": "chateval_debate", "params": {
            "pairs": pairs, "personas": {"One": "x", "Two": "y"}}}]})
    two = {k: agents[k] for k in "ab"}
    with pytest.raises(ConfigError, match="at least two debaters"):
        parse_scenario({"name": "d", "agents": two, "games": [{"game": "chateval_debate", "params": {
            "pairs": pairs, "strategy": "simultaneous_talk_with_summarizer"}}]})




# -- position calibration: both orders, combined ----------------------------------------------------
@pytest.fixture
def labelled(tmp_path):
    path = tmp_path / "labelled.jsonl"
    path.write_text("".join(json.dumps({"id": c, "question": f"Q {c}?", "answer_a": f"First answer to {c}.",
                                        "answer_b": f"Second answer to {c}.", "source_a": "ann", "source_b": "bob",
                                        "label": label}) + "\n"
                            for c, label in (("p1", -1), ("p2", 1), ("p3", 0))))
    return str(path)


async def play_all(pairs, agents, **params):
    """Every case the game plans, as the tournament would hand them out."""
    game = plugins.load("game", "chateval_debate")
    cases = game.cases(game.Params.model_validate({"pairs": pairs, **params}))
    records = []
    for case in cases:
        records.append(await play_match(MatchSpec(key=f"debate/{case}#1:a+b+c", group="debate", game="chateval_debate",
                                                  agents=tuple(agents), seed=1, shuffle_seats=False,
                                                  params={"pairs": pairs, "case": case, **params}), agents))
    return cases, records


async def test_calibration_debates_each_pair_in_both_orders_in_matches_of_their_own(labelled):
    agents = {n: debater(n, "1", "1") for n in "abc"}
    cases, records = await play_all(labelled, agents, position_calibration=True, strategy="simultaneous_talk")
    assert cases == ["p1", "p1@swapped", "p2", "p2@swapped", "p3", "p3@swapped"]
    swapped = records[1]
    rules = next(m.content for m in swapped.messages if m.kind == "rules")
    assert "[Answer 1]\nSecond answer to p1.\n[End of Answer 1]" in rules and "[Answer 2]\nFirst answer to p1." in rules
    data = summary(swapped)
    assert (data["case"], data["pair"], data["swapped"], data["label"], data["verdict"]) == ("p1@swapped", "p1", True, 1, -1)
    assert swapped.payoffs == {"Debater 1": 0.0, "Debater 2": 0.0, "Debater 3": 0.0}  # the shown first is the worse
    # one question to peer rank, in the order shown: the position bias shows as a flip
    assert sorted(r.battle for r in swapped.reviews) == [("p1", "bob", "ann", s, -1) for s in "abc"]
    assert all(r.order == 1 and r.sample == 0 for r in swapped.reviews)  # shown the other way round


async def test_a_group_that_always_backs_the_first_shown_scores_ties_once_calibrated(labelled):
    agents = {n: debater(n, "1", "1") for n in "abc"}
    _, records = await play_all(labelled, agents, position_calibration=True, strategy="simultaneous_talk")
    (score,) = verdict_scores(records)
    # each pair: -1 as given, -1 swapped (+1 once turned back): they cancel, a tie; only p3 is a tie
    assert (score.calibrated, score.examples, score.left_out) == (True, 3, 0)
    assert score.accuracy == pytest.approx(1 / 3) and score.cohen_kappa == pytest.approx(0.0)
    # alone, each order: p1 right as given, p2 right swapped, p3 never
    assert (score.as_shown, score.as_shown_accuracy) == (6, pytest.approx(2 / 6))
    assert [(d.agent, d.examples, d.accuracy) for d in score.debaters] == [(n, 3, pytest.approx(1 / 3)) for n in "abc"]
    # one order missing: the pair is left out, not scored from half its evidence
    (partial,) = verdict_scores([r for r in records if r.params["case"] != "p2@swapped"])
    assert (partial.examples, partial.left_out) == (2, 1)


async def test_calibrated_scores_are_the_mean_score_difference_of_both_orders(labelled):
    # a: prefers the first shown by 3 points; b: the second by 1; c: the second by 2. As given:
    # mean (-3 + 1 + 2) / 3 = 0; swapped the same words, turned back: 0. A tie, and right only on p3.
    agents = {"a": Recording(scripted("a", "fixed", params={"replies": ["x\nScores: 8 5"] * 2})),
              "b": Recording(scripted("b", "fixed", params={"replies": ["x\nScores: 6 7"] * 2})),
              "c": Recording(scripted("c", "fixed", params={"replies": ["x\nScores: 4 6"] * 2}))}
    _, records = await play_all(labelled, agents, position_calibration=True, strategy="simultaneous_talk",
                                output="scores", turns=1)
    assert [summary(r)["verdict"] for r in records] == [pytest.approx(0.0)] * 6
    (score,) = verdict_scores(records)
    assert score.output == "scores" and score.accuracy == pytest.approx(1 / 3)
    # a alone: first shown better by 3, both orders: cancels to a tie; b and c likewise
    assert all(d.accuracy == pytest.approx(1 / 3) for d in score.debaters)


async def test_without_calibration_each_match_is_an_example_and_kappa_is_cohens(labelled):
    agents = {"a": debater("a", "1"), "b": debater("b", "2"), "c": debater("c", "2")}
    _, records = await play_all(labelled, agents, strategy="simultaneous_talk", turns=1)
    (score,) = verdict_scores(records)
    # the majority says answer 2 every time: right on p2 only
    assert (score.calibrated, score.examples, score.accuracy) == (False, 3, pytest.approx(1 / 3))
    # predicted (1, 1, 1) against (-1, 1, 0): observed 1/3, chance 1 x 1/3
    assert score.cohen_kappa == pytest.approx(0.0)
    assert {d.agent: d.accuracy for d in score.debaters} == {"a": pytest.approx(1 / 3), "b": pytest.approx(1 / 3),
                                                            "c": pytest.approx(1 / 3)}


def test_the_offline_scenario_scores_each_strategys_group_verdict_against_the_labels(run_cli, tmp_path):
    result = run_cli("run", ROOT / "scenarios" / "chateval-debate-synthetic.yaml", "--quiet", "--run-dir",
                     tmp_path / "run", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "72 of 72 matches finished" in result.stdout  # 12 pairs x 2 orders x 3 strategies
    records = [json.loads(line) for line in run_cli("export", tmp_path / "run", cwd=tmp_path).stdout.splitlines()]
    ranked = json.loads(run_cli("rank", tmp_path / "run", "--json", cwd=tmp_path).stdout)
    scores = {s["group"]: s for s in ranked["summaries"]["debate_verdicts"]}
    assert set(scores) == {"one_by_one", "simultaneous", "with_summarizer"}
    for group, score in scores.items():
        # the group's verdict recomputed from the transcripts: each debater's last 'Scores: X Y', both orders
        verdicts: dict[str, list[float]] = {}
        labels = {}
        for record in (r for r in records if r["group"] == group):
            (data,) = [m["data"] for m in record["messages"] if m["kind"] == "notice"]
            last = {}
            for m in record["messages"]:
                if m["kind"] == "reply" and m["sender"].startswith("Debater"):
                    first, second = map(float, m["content"].rsplit("Scores: ", 1)[1].split())
                    last[m["sender"]] = second - first
            mean = sum(last.values()) / len(last)
            turned = -1 if data["case"].endswith("@swapped") else 1
            verdicts.setdefault(data["pair"], []).append(turned * mean)
            labels[data["pair"]] = turned * data["label"]
        sign = lambda x: (x > 1e-9) - (x < -1e-9)  # noqa: E731
        right = [sign(sum(v)) == labels[p] for p, v in verdicts.items()]
        assert all(len(v) == 2 for v in verdicts.values()) and len(right) == 12
        assert (score["calibrated"], score["examples"], score["left_out"]) == (True, 12, 0)
        assert score["accuracy"] == pytest.approx(sum(right) / 12)
        assert score["accuracy"] > 0.5  # better than chance on three labels: the careful reviewers carry the group
    text = run_cli("rank", tmp_path / "run", cwd=tmp_path, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "Debate verdicts against the labels" in text
    assert f"{scores['one_by_one']['accuracy']:.3f}" in next(line for line in text.splitlines() if "│ one_by_one " in line)


async def test_a_synthetic_debater_comes_round_to_the_debaters_it_has_heard():
    pairs = str(ROOT / "scenarios" / "data" / "labelled-pairs.jsonl")  # f1: answer 1 is better
    judge = lambda name, **p: Recording(scripted(name, "synthetic_judge", params={"name": name, **p}))  # noqa: E731
    agents = {"a": judge("a", openness=0.0), "b": judge("b", openness=0.0),
              "c": judge("c", position_bias=-0.9, openness=1.0)}  # c misreads: it always favours the answer shown second
    record = await play_match(MatchSpec(key="d", game="chateval_debate", agents=("a", "b", "c"), seed=1,
                                        shuffle_seats=False, params={"pairs": pairs, "case": "f1",
                                                                     "strategy": "simultaneous_talk", "turns": 2}), agents)
    data = summary(record)
    assert data["firsts"] == {"Debater 1": -1, "Debater 2": -1, "Debater 3": 1}  # alone, c gets it wrong
    assert data["finals"] == {"Debater 1": -1, "Debater 2": -1, "Debater 3": -1}  # having heard a and b, it agrees
    second = agents["c"].turns[1]
    assert second.prompt_data["others"] == {"Debater 1": -1, "Debater 2": -1}
    assert "Debater 1 said:\nMy reading of the two answers.\nVerdict: 1" in "\n".join(
        m["content"] for m in second.as_chat())  # what it read, as a model would
    (score,) = verdict_scores([record])
    c = next(d for d in score.debaters if d.agent == "c")
    assert (c.first_accuracy, c.accuracy) == (0.0, 1.0)
    # with a summarizer between them, a debater hears no verdicts, and keeps its own
    agents = {"a": judge("a"), "b": judge("b", position_bias=-0.9, openness=1.0), "s": judge("s")}
    record = await play_match(MatchSpec(key="d", game="chateval_debate", agents=("a", "b", "s"), seed=1,
                                        shuffle_seats=False, params={"pairs": pairs, "case": "f1", "turns": 2,
                                                                     "strategy": "simultaneous_talk_with_summarizer"}),
                              agents)
    assert summary(record)["finals"]["Debater 2"] == 1 and not agents["b"].turns[1].prompt_data["others"]


def debate_game(pairs, **params):
    import random

    game = plugins.load("game", "chateval_debate")
    seats = ("Debater 1", "Debater 2")
    return game(game.Params.model_validate({"pairs": pairs, "case": "p1", **params}), seats,
                {s: "Debater" for s in seats}, random.Random(1))


def test_a_verdict_is_read_from_the_messages_closing_line_only(pairs):
    from arena.contract import InvalidReply

    choice, scores = debate_game(pairs), debate_game(pairs, output="scores")
    assert choice.parse_verdict("Argument.\n**Verdict:** 2") == 1
    assert choice.parse_verdict("Argument.\nFinal verdict - tie.") == 0
    assert scores.parse_verdict("Argument.\nScores: 8, 6") == -2 and scores.parse_verdict("x\n__Scores: 4 7__") == 3
    echo = "End each message with your verdict alone on its last line: 'Verdict: 1', 'Verdict: 2' or 'Verdict: tie'."
    for reply in (echo, "Verdict: 1\nI may still change my mind.", "Some say verdict 2, others verdict tie", ""):
        with pytest.raises(InvalidReply, match="verdict alone on its last line"):
            choice.parse_verdict(reply)
    for reply in ("Scores: 8 6\nThat is all.", "I would say Scores: 8 6 or so, then more", "Scores: X Y"):
        with pytest.raises(InvalidReply, match="scores alone on its last line"):
            scores.parse_verdict(reply)


async def test_a_debater_without_a_verdict_at_its_first_turn_has_no_first_verdict(pairs):
    # b gives nothing at its first turn (re-asked, then defaulted), then backs answer 2: its first
    # verdict is missing, not its second one moved forward; its final verdict counts
    agents = {"a": debater("a", "2", "2"), "b": Recording(scripted("b", "fixed", params={"replies": ["No idea.", "x\nVerdict: 2"]}))}
    record = await play_match(spec(pairs, agents, strategy="simultaneous_talk", turns=2), agents)
    data = summary(record)
    assert data["firsts"] == {"Debater 1": 1} and data["finals"] == {"Debater 1": 1, "Debater 2": 1}
    assert [(e.round, e.seat) for e in record.events if e.type == "action" and e.defaulted] == [(1, "Debater 2")]
