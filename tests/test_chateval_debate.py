"""ChatEval's debate: who sees what under each strategy, and how verdicts are combined."""

from __future__ import annotations

import pytest

from arena.contract.errors import ConfigError
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
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


def test_the_offline_scenario_runs(run_cli, tmp_path):
    result = run_cli("run", ROOT / "scenarios" / "chateval-debate-synthetic.yaml", "--quiet", "--run-dir", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert "matches finished" in result.stdout and "failed" not in result.stdout
