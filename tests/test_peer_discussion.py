"""Peer discussion: two reviewers, initial reviews, turns until agreement or max_turns."""

from __future__ import annotations

import pytest

from arena.games.questions import load_pairs
from arena.engine.match import play_match
from arena.contract.records import MatchSpec

from helpers import ROOT, Recording, scripted

LFQA = ROOT.parent / "shared" / "data" / "prd" / "lfqa" / "experts_pairwise_human_preferences.jsonl"


@pytest.fixture
def pairs(tmp_path):
    path = tmp_path / "pairs.jsonl"
    path.write_text('{"id": "p1", "question": "Why is the sea salty?", "answer_a": "Rivers carry minerals.", '
                    '"answer_b": "Because of fish.", "source_a": "expert", "source_b": "bot", "label": -1}\n')
    return str(path)


def says(name, *preferences):
    return Recording(scripted(name, "fixed", params={"replies": [f"My view, round {i}.\nPreference: {p}" for i, p in enumerate(preferences)]}))


def spec(pairs, agents, **params):
    return MatchSpec(key="d", game="peer_discussion", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"pairs": pairs, "case": "p1", **params})


def summary(record):
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    return notice.data


async def test_the_discussion_stops_when_they_agree_and_counts_who_altered(pairs):
    # `fixed` replies by round: rounds 1, 2, 3... take replies 0, 1, 2...
    leader = says("lead", "1", "1", "1")
    other = says("other", "2", "(not its turn)", "1")
    agents = {"lead": leader, "other": other}
    record = await play_match(spec(pairs, agents), agents)
    # round 1: 1 vs 2; round 2: the leader holds 1; round 3: the other comes round to 1
    assert record.rounds == 3
    data = summary(record)
    assert data["agreed"] and data["outcome"] == -1 and data["label"] == -1 and data["turns"] == 2
    assert data["reviewers"]["Reviewer 1"] == {"initial": -1, "final": -1, "altered": False, "held": True}
    assert data["reviewers"]["Reviewer 2"] == {"initial": 1, "final": -1, "altered": True, "held": False}
    assert record.payoffs == {"Reviewer 1": 1.0, "Reviewer 2": 1.0}
    assert sorted(r.battle for r in record.reviews) == [("p1", "expert", "bot", "lead", -1), ("p1", "expert", "bot", "other", -1)]
    # turns alternate, the leader first, and each sees everything said before its turn only
    assert [t.round for t in leader.turns] == [1, 2] and [t.round for t in other.turns] == [1, 3]
    assert not [m for m in leader.turns[0].history if m.kind == "reply"]  # initial reviews are independent
    assert {m.sender for m in leader.turns[1].history if m.kind == "reply"} == {"Reviewer 1", "Reviewer 2"}
    assert all(m.round < t.round for t in leader.turns + other.turns for m in t.history)


async def test_agreement_from_the_start_needs_no_discussion(pairs):
    agents = {"a": says("a", "tie"), "b": says("b", "tie")}
    record = await play_match(spec(pairs, agents), agents)
    assert record.rounds == 1 and summary(record)["outcome"] == 0 and summary(record)["turns"] == 0


@pytest.mark.parametrize("rule, outcome", [("tie", 0), ("leader", -1), ("follower", 1)])
async def test_a_disagreement_stops_at_max_turns_and_follows_the_rule(pairs, rule, outcome):
    agents = {"a": says("a", "1"), "b": says("b", "2")}
    record = await play_match(spec(pairs, agents, max_turns=3, on_disagreement=rule), agents)
    assert record.rounds == 1 + 3
    data = summary(record)
    assert not data["agreed"] and data["outcome"] == outcome and data["turns"] == 3
    assert all(r["held"] for r in data["reviewers"].values())


async def test_role_reminder_and_criteria_can_be_switched_off(pairs):
    for reminder, criteria in ((True, True), (False, False)):
        a, b = says("a", "1"), says("b", "2")
        agents = {"a": a, "b": b}
        await play_match(spec(pairs, agents, max_turns=2, role_reminder=reminder, criteria=criteria), agents)
        assert ("Remember: you are Reviewer 1" in a.turns[1].prompt) is reminder
        assert ("unsupported information" in a.turns[0].prompt) is criteria


async def test_a_reply_without_a_preference_is_asked_again_then_the_last_view_stands(pairs):
    agents = {"a": says("a", "1", "1", "1"), "b": Recording(scripted("b", "fixed", params={"replies": ["Preference: 2", "-", "hmm"]}))}
    record = await play_match(spec(pairs, agents, max_turns=2), agents)
    failures = [e for e in record.events if e.type == "turn_failed"]
    assert failures and "Preference: 1" in failures[0].reason
    assert summary(record)["reviewers"]["Reviewer 2"]["final"] == 1  # its initial view (answer 2), kept


@pytest.mark.skipif(not LFQA.is_file(), reason=f"PRD's LFQA data is not at {LFQA} (../shared/data beside the project)")
def test_prds_lfqa_file_is_read_as_it_is():
    cases = load_pairs(str(LFQA))
    assert len(cases) == 140  # 260 expert judgments of 140 pairs
    assert {c.label for c in cases.values()} == {-1, 0, 1}
    assert {(c.source_a, c.source_b) for c in cases.values()} == {("human", "human"), ("human", "machine"), ("machine", "human")}


def test_the_offline_scenario_runs_and_keeps_its_promises(run_cli, tmp_path):
    import json

    result = run_cli("run", ROOT / "scenarios" / "peer-discussion-synthetic.yaml", "--quiet", "--run-dir", tmp_path / "run")
    assert result.returncode == 0, result.stderr
    assert "18 of 18 matches finished" in result.stdout
    records = [json.loads(line) for line in run_cli("export", tmp_path / "run").stdout.splitlines()]
    summaries = [m["data"] for r in records for m in r["messages"] if m["kind"] == "notice"]
    assert len(summaries) == 18 and all(s["label"] is not None for s in summaries)
    assert all(s["agreed"] or s["turns"] == 4 for s in summaries)
    assert any(any(v["altered"] for v in s["reviewers"].values()) for s in summaries)  # someone was persuaded
