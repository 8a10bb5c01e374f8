"""Peer discussion: two reviewers, initial reviews, then PRD's fixed number of turns (or turns
until they agree); opinion altering and holding aggregated by reviewer, position and pair."""

from __future__ import annotations

import json
import os

import pytest

from arena.contract import plugins
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
    return Recording(scripted(name, "fixed", params={"replies": [f"My view, round {i}.\nPreference: {p}" for i, p in enumerate(preferences)],
                                                     "cycle": "round"}))


def spec(pairs, agents, **params):
    return MatchSpec(key="d", game="peer_discussion", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"pairs": pairs, "case": "p1", **params})


def summary(record):
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    return notice.data


async def test_with_stop_agreement_the_discussion_stops_when_they_agree_and_counts_who_altered(pairs):
    # `fixed` replies by round: rounds 1, 2, 3... take replies 0, 1, 2...
    leader = says("lead", "1", "1", "1")
    other = says("other", "2", "(not its turn)", "1")
    agents = {"lead": leader, "other": other}
    record = await play_match(spec(pairs, agents, stop="agreement"), agents)
    # round 1: 1 vs 2; round 2: the leader holds 1; round 3: the other comes round to 1
    assert record.rounds == 3
    data = summary(record)
    assert data["agreed"] and data["outcome"] == -1 and data["label"] == -1 and data["turns"] == 2
    assert data["agreed_at"] == 2 and data["disagreed_at_start"] and data["leader"] == "Reviewer 1"
    assert data["reviewers"]["Reviewer 1"] == {"position": "leader", "initial": -1, "final": -1, "altered": False,
                                               "held": True, "changes": 0, "changed_after_agreement": False}
    assert data["reviewers"]["Reviewer 2"] == {"position": "follower", "initial": 1, "final": -1, "altered": True,
                                               "held": False, "changes": 1, "changed_after_agreement": False}
    assert record.payoffs == {"Reviewer 1": 1.0, "Reviewer 2": 1.0}
    assert sorted(r.battle for r in record.reviews) == [("p1", "expert", "bot", "lead", -1), ("p1", "expert", "bot", "other", -1)]
    # turns alternate, the leader first, and each sees everything said before its turn only
    assert [t.round for t in leader.turns] == [1, 2] and [t.round for t in other.turns] == [1, 3]
    assert not [m for m in leader.turns[0].history if m.kind == "reply"]  # initial reviews are independent
    assert {m.sender for m in leader.turns[1].history if m.kind == "reply"} == {"Reviewer 1", "Reviewer 2"}
    assert all(m.round < t.round for t in leader.turns + other.turns for m in t.history)


async def test_with_stop_agreement_agreeing_from_the_start_needs_no_discussion(pairs):
    agents = {"a": says("a", "tie"), "b": says("b", "tie")}
    record = await play_match(spec(pairs, agents, stop="agreement"), agents)
    assert record.rounds == 1 and summary(record)["outcome"] == 0 and summary(record)["turns"] == 0


async def test_by_default_they_discuss_prds_four_turns_and_may_change_their_minds_after_agreeing(pairs):
    # PRD: a fixed number of turns (four), the leader first; agreement does not end it
    leader = says("lead", "1", "1", "-", "2", "-")  # rounds 1, 2, 4 are the leader's
    other = says("other", "2", "-", "1", "-", "1")  # rounds 1, 3, 5 the follower's
    agents = {"lead": leader, "other": other}
    match = spec(pairs, agents)
    record = await play_match(match, agents)
    game = plugins.load("game", "peer_discussion")
    assert record.rounds == 5 == game.rounds_needed(game.Params.model_validate(match.params), 2)
    assert [t.round for t in leader.turns] == [1, 2, 4] and [t.round for t in other.turns] == [1, 3, 5]
    data = summary(record)
    assert data["stop"] == "turns" and data["turns"] == 4
    # they agree on answer 1 at turn 2; at turn 3 the leader goes over to answer 2; the follower holds answer 1
    assert [(x["turn"], x["seat"], x["preference"]) for x in data["said"]] == [
        (0, "Reviewer 1", -1), (0, "Reviewer 2", 1), (1, "Reviewer 1", -1), (2, "Reviewer 2", -1),
        (3, "Reviewer 1", 1), (4, "Reviewer 2", -1)]
    assert data["agreed_at"] == 2 and not data["agreed"] and data["outcome"] == 0  # still apart at the end: a tie
    lead, follow = data["reviewers"]["Reviewer 1"], data["reviewers"]["Reviewer 2"]
    assert lead["changed_after_agreement"] and lead["altered"] and lead["changes"] == 1
    assert not follow["changed_after_agreement"] and follow["altered"] and follow["final"] == -1
    assert record.payoffs == {"Reviewer 1": 0.0, "Reviewer 2": 1.0}
    # the leader's fourth-round request holds the agreement it then leaves
    fourth = leader.turns[2]
    assert [m.content.splitlines()[-1] for m in fourth.history if m.kind == "reply"] == [
        "Preference: 1", "Preference: 2", "Preference: 1", "Preference: 1"]
    assert "Continue the discussion" in fourth.prompt


async def test_the_leaders_initial_review_is_listed_first(pairs):
    # PRD lists the initial reviews in speaking order: when the second seat leads, its review comes first
    orders = set()
    for seed in range(8):
        a, b = says("a", "1", "1", "1"), says("b", "2", "2", "2")
        agents = {"a": a, "b": b}
        match = MatchSpec(key="d", game="peer_discussion", agents=("a", "b"), seed=seed, shuffle_seats=False,
                          params={"pairs": pairs, "case": "p1", "leader": "drawn", "max_turns": 2})
        record = await play_match(match, agents)
        leader = summary(record)["leader"]
        first_replies = [m.sender for m in record.messages if m.kind == "reply" and m.round == 1]
        assert first_replies[0] == leader
        orders.add(leader)
    assert orders == {"Reviewer 1", "Reviewer 2"}  # both seats led in some of the draws


@pytest.mark.parametrize("rule, outcome", [("tie", 0), ("leader", -1), ("follower", 1)])
async def test_a_disagreement_stops_at_max_turns_and_follows_the_rule(pairs, rule, outcome):
    agents = {"a": says("a", "1"), "b": says("b", "2")}
    record = await play_match(spec(pairs, agents, max_turns=3, on_disagreement=rule), agents)
    assert record.rounds == 1 + 3
    data = summary(record)
    assert not data["agreed"] and data["outcome"] == outcome and data["turns"] == 3 and data["agreed_at"] is None
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


def preferences_in(record: dict) -> list[tuple[int, str, int]]:
    """(turn, seat, preference) of every reply of an exported match, read from its words."""
    code = {"1": -1, "tie": 0, "2": 1}
    return [(m["round"] - 1, m["sender"], code[m["content"].rsplit("Preference: ", 1)[1].strip()])
            for m in record["messages"] if m["kind"] == "reply"]


def test_the_offline_scenario_runs_prds_turns_and_reviewers_change_their_minds_after_agreeing(run_cli, tmp_path):
    result = run_cli("run", ROOT / "scenarios" / "peer-discussion-synthetic.yaml", "--quiet", "--run-dir",
                     tmp_path / "run", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "18 of 18 matches finished" in result.stdout
    records = [json.loads(line) for line in run_cli("export", tmp_path / "run", cwd=tmp_path).stdout.splitlines()]
    assert len(records) == 18 and all(r["rounds"] == 5 for r in records)  # rounds_needed: 1 + max_turns, every time
    changed_after_agreeing = 0
    for record in records:
        (data,) = [m["data"] for m in record["messages"] if m["kind"] == "notice"]
        said = preferences_in(record)
        assert [(x["turn"], x["seat"], x["preference"]) for x in data["said"]] == said
        assert [turn for turn, _, _ in said] == [0, 0, 1, 2, 3, 4] and data["label"] is not None
        current, agreed_at, later_change = {}, None, False
        for turn, seat, preference in said:
            if agreed_at is not None and preference != current[seat]:
                later_change = True
            current[seat] = preference
            if agreed_at is None and len(current) == 2 and len(set(current.values())) == 1:
                agreed_at = turn
        assert data["agreed_at"] == agreed_at
        if agreed_at is not None and agreed_at < 4 and later_change:
            changed_after_agreeing += 1
            assert any(r["changed_after_agreement"] for r in data["reviewers"].values())
    assert changed_after_agreeing >= 1  # they agreed before the last turn, and then one changed its mind
    ranked = json.loads(run_cli("rank", tmp_path / "run", "--json", cwd=tmp_path).stdout)
    (discussion,) = ranked["summaries"]["discussion"]
    assert discussion["discussions"] == 18 and discussion["changed_after_agreement"] == changed_after_agreeing


def write_pairs(path, cases) -> str:
    path.write_text("".join(json.dumps({"id": c, "question": f"Question {c}?", "answer_a": f"A to {c}.",
                                        "answer_b": f"B to {c}.", "label": label}) + "\n" for c, label in cases))
    return str(path)


def test_arena_rank_reports_opinion_altering_and_holding_by_leader_and_follower(run_cli, tmp_path):
    """`stubborn` always backs answer 1. `pliable` backs answer 2 and holds it when it leads, but
    gives in at its first turn when it follows: PRD's ordering effect, written into the replies.
    Each leads once per pair (seating rotates with the repeat), on a pair labelled 1 and one labelled 2."""
    import yaml

    pairs = write_pairs(tmp_path / "pairs.jsonl", [("p1", -1), ("p2", 1)])
    fixed = lambda replies: {"backend": "scripted", "strategy": "fixed",  # noqa: E731
                             "params": {"replies": [f"My view.\nPreference: {r}" for r in replies], "cycle": "round"}}
    # by round: a leader speaks in rounds 1, 2, 4; a follower in rounds 1, 3, 5
    raw = {"name": "order", "seed": 1, "agents": {"stubborn": fixed("11111"), "pliable": fixed("22121")},
           "games": [{"game": "peer_discussion", "params": {"pairs": pairs}}],
           "tournament": {"repeats": 2, "seating": "rotate"}}
    (tmp_path / "order.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    assert run_cli("run", tmp_path / "order.yaml", "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path).returncode == 0
    result = run_cli("rank", tmp_path / "run", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (s,) = json.loads(result.stdout)["summaries"]["discussion"]
    assert (s["discussions"], s["labelled"], s["agreed_at_start"], s["agreed_at_end"]) == (4, 4, 0, 2)
    assert (s["initial_accuracy"], s["final_accuracy"], s["discussion_accuracy"]) == (0.5, 0.5, 0.25)
    rows = {(r["agent"], r["position"]): r for r in s["reviewers"]}
    figures = lambda r: (r["discussions"], r["disagreed"], r["altered"], r["held"], r["initial_accuracy"],  # noqa: E731
                         r["final_accuracy"])
    assert figures(rows[("pliable", "leader")]) == (2, 2, 0, 2, 0.5, 0.5)
    assert figures(rows[("pliable", "follower")]) == (2, 2, 2, 0, 0.5, 0.5) and rows[("pliable", "follower")]["altered_share"] == 1.0
    assert figures(rows[("stubborn", "leader")]) == figures(rows[("stubborn", "follower")]) == (2, 2, 0, 2, 0.5, 0.5)
    assert figures(rows[(None, "leader")])[:4] == (4, 4, 0, 4) and figures(rows[(None, "follower")])[:4] == (4, 4, 2, 2)
    pair = {p["leader"]: p for p in s["pairs"]}
    assert {k: (p["discussions"], p["agreed"], p["discussion_accuracy"]) for k, p in pair.items()} == {
        "stubborn": (2, 2, 0.5), "pliable": (2, 0, 0.0), None: (4, 2, 0.25)}
    assert pair["stubborn"]["reviewers"] == ["pliable", "stubborn"]
    assert pair["stubborn"]["initial_accuracy"] == {"pliable": 0.5, "stubborn": 0.5}
    # the same numbers as a person reads them
    text = run_cli("rank", tmp_path / "run", cwd=tmp_path, env={**os.environ, "COLUMNS": "200"}).stdout
    assert "4 peer discussions (4 labelled)" in text and "the discussion's outcome (PDA) 0.250" in text
    lines = [" ".join(line.replace("│", " ").split()) for line in text.splitlines()]
    assert "pliable follower 2 0.50 0.50 2 2 0 1.00 0" in lines
    assert "pliable leader 2 0.50 0.50 2 0 2 0.00 0" in lines
    assert "pliable / stubborn pliable 2 0 0.50 / 0.50 0.50 / 0.50 0.00" in lines
    # and in the report
    assert run_cli("report", tmp_path / "run", "-o", tmp_path / "report.html", cwd=tmp_path).returncode == 0
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert 'id="summaries"' in html and "each reviewer as leader and follower" in html
    assert "<td>pliable</td><td>follower</td>" in html.replace(' class="name"', "").replace(' class=""', "")


def reviewer_game(pairs):
    import random

    game = plugins.load("game", "peer_discussion")
    return game(game.Params.model_validate({"pairs": pairs, "case": "p1"}), ("Reviewer 1", "Reviewer 2"),
                {"Reviewer 1": "Reviewer", "Reviewer 2": "Reviewer"}, random.Random(1))


def test_a_preference_is_read_from_the_replys_closing_line_only(pairs):
    from arena.contract import InvalidReply

    game = reviewer_game(pairs)
    read = lambda reply: game.parse("Reviewer 1", reply, 1)  # noqa: E731
    assert read("Answer 1 is supported.\nPreference: 1") == -1
    assert read("Long review.\n\n**Preference:** 2\n\n") == 1
    assert read("Review.\nMy preference is: Answer 2.") == 1
    assert read("Review.\n## Final preference - tie") == 0
    # what is not a verdict: the instruction echoed (on one line or several), a verdict followed by
    # more text, a quoted verdict, a verdict in the middle of a sentence, nothing
    rule = "End every message with your preference alone on its last line: 'Preference: 1', 'Preference: 2' or 'Preference: tie'."
    for reply in (rule, "Sure.\n" + rule.replace(", ", ",\n").replace(" or ", " or\n"), "Preference: 2\nThat is all.",
                  "Review.\n'Preference: 1'", "I lean to preference 1 but tie is possible", "", "  \n "):
        with pytest.raises(InvalidReply, match="alone on its last line") as refused:
            read(reply)
        assert ("Your last line was" in refused.value.reason) is bool(reply.strip())


async def test_with_stop_agreement_two_reviewers_without_preferences_never_agree(pairs):
    # before: two defaulted initial reviews were both read as "tie" and ended the match at once, agreed
    agents = {"a": says("a", "-"), "b": says("b", "-")}
    record = await play_match(spec(pairs, agents, stop="agreement", max_turns=2), agents)
    assert record.rounds == 3
    data = summary(record)
    assert data["agreed_at_start"] is None and data["disagreed_at_start"] is None and not data["agreed"]
    assert data["outcome"] is None and data["missed"] == {"Reviewer 1": [0, 1], "Reviewer 2": [0, 2]}
    assert record.reviews == [] and record.payoffs == {"Reviewer 1": 0.0, "Reviewer 2": 0.0}


async def test_a_reviewer_that_states_its_first_preference_late_starts_no_agreement_at_the_start(pairs):
    # Reviewer 2 gives nothing in round 1, then backs answer 1 in round 3: they agree then, not at the start
    agents = {"a": says("a", "1", "1", "-"), "b": says("b", "-", "-", "1")}
    record = await play_match(spec(pairs, agents, max_turns=2), agents)
    data = summary(record)
    assert data["agreed_at_start"] is None and data["agreed"] and data["agreed_at"] == 2 and data["outcome"] == -1
    assert data["reviewers"]["Reviewer 2"]["initial"] is None and data["reviewers"]["Reviewer 2"]["final"] == -1
    assert data["reviewers"]["Reviewer 2"]["altered"] is None
    assert sorted(r.battle for r in record.reviews) == [("p1", "expert", "bot", "a", -1), ("p1", "expert", "bot", "b", -1)]
    from arena.games.discussion_summary import discussion_summaries

    (s,) = discussion_summaries([record])
    assert (s.agreed_at_start, s.agreed_at_end, s.no_outcome, s.discussion_accuracy) == (0, 1, 0, 1.0)
    assert s.initial_accuracy == 1.0  # a's initial preference, the only one stated
