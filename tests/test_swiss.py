"""`format: swiss` for game tournaments: ceil(log2 N) rounds in which agents meet others of their
standing, every agent once a round, no pair twice while it can be helped; or rounds until the
ranking is stable. Resumable: a run stopped part way pairs its later rounds as an unbroken one."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest
import yaml

from arena.contract.errors import ConfigError
from arena.contract.records import MatchIdentity
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.run.tournament import count, plan
from arena.store import RunStore


def giver(coins: int) -> dict:
    """Puts ``coins`` in every round: in a match of two, the one who gives less earns more."""
    return {"backend": "scripted", "strategy": "fixed", "params": {"replies": [json.dumps({"reason": "fixed", "coins": coins})]}}


AGENTS = {f"c{k}": giver(k) for k in range(8)}


def swiss(repeats=1, agents=AGENTS) -> dict:
    return {"name": "swiss", "seed": 3, "agents": agents,
            "games": [{"game": "public_goods", "label": "pg", "params": {"rounds": 2}}],
            "tournament": {"format": "swiss", "repeats": repeats}, "concurrency": 3}


async def run(tmp_path, raw, folder="run", limit=None):
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / folder, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
    try:
        result = await run_tournament(scenario, store, limit=limit)
        return result, list(store.read.matches())
    finally:
        store.close()


def rounds(rows) -> dict[int, list[tuple[str, str]]]:
    """Each round's tables as the agents at them, and each agent's payoff per round."""
    out = defaultdict(list)
    for row in rows:
        out[row.repeat].append(tuple(sorted(s.agent for s in row.seats)))
    return out


def payoffs_in(rows, repeat) -> dict[str, float]:
    return {s.agent: row.payoffs[s.label] for row in rows if row.repeat == repeat for s in row.seats}


async def test_eight_agents_play_three_rounds_each_paired_by_standing_and_never_twice(tmp_path):
    result, rows = await run(tmp_path, swiss())
    assert result.count("finished") == 3 * 4 == len(rows)  # ceil(log2 8) rounds of four tables
    tables = rounds(rows)
    assert sorted(tables) == [1, 2, 3]
    for r, pairs in tables.items():
        assert sorted(a for pair in pairs for a in pair) == sorted(AGENTS), r  # everyone, once a round
    met = [frozenset(p) for pairs in tables.values() for p in pairs]
    assert len(set(met)) == len(met)  # no rematch
    # round 2: the leader after round 1 meets the best-placed agent it has not met yet
    standing = payoffs_in(rows, 1)
    leader = max(standing, key=standing.get)
    first_met = next(p for p in tables[1] if leader in p)
    expected = max((a for a in standing if a not in first_met), key=standing.get)
    assert tuple(sorted((leader, expected))) in tables[2]
    # the lower giver earns more in every match (known order), and the keys name rounds as repeats
    for row in rows:
        (a, pa), (b, pb) = ((s.agent, row.payoffs[s.label]) for s in row.seats)
        assert (int(a[1:]) < int(b[1:])) == (pa > pb), (row.key, a, pa, b, pb)
        assert MatchIdentity.parse(row.key).repeat == row.repeat


async def test_an_odd_field_gives_one_bye_a_round_never_to_the_same_agent_twice(tmp_path):
    agents = {k: v for k, v in AGENTS.items() if k != "c7"}
    result, rows = await run(tmp_path, swiss(agents=agents))
    tables = rounds(rows)
    assert sorted(tables) == [1, 2, 3] and all(len(pairs) == 3 for pairs in tables.values())
    byes = [next(a for a in agents if all(a not in p for p in pairs)) for _, pairs in sorted(tables.items())]
    assert len(set(byes)) == 3, byes


async def test_a_run_stopped_part_way_pairs_its_later_rounds_as_an_unbroken_one(tmp_path):
    whole, rows = await run(tmp_path, swiss(), "whole")
    part, _ = await run(tmp_path, swiss(), "broken", limit=6)  # round 1 and half of round 2
    assert part.count("finished") == 6
    resumed, again = await run(tmp_path, swiss(), "broken")
    assert resumed.resumed == 6
    key = lambda rs: sorted((r.key, tuple(sorted(r.payoffs.items()))) for r in rs)
    assert key(again) == key(rows)


async def test_until_stable_plays_rounds_until_the_ranking_stops_moving(tmp_path):
    rule = {"block": 1, "min": 2, "max": 6, "tau": 0.5, "width_abs": 100}
    result, rows = await run(tmp_path, swiss(repeats=rule))
    checks = result.stability
    assert checks and checks[-1].done and checks[-1].stable and checks[-1].repeats == max(rounds(rows))
    assert 2 <= checks[-1].repeats < 6
    assert [c.repeats for c in checks] == list(range(1, checks[-1].repeats + 1))


def test_the_plan_holds_the_first_round_and_the_count_says_so():
    scenario = parse_scenario(swiss())
    first = plan(scenario)
    assert len(first) == count(scenario) == 4 and {s.repeat for s in first} == {1}
    assert plan(scenario) == first  # paired from the seed: the same every time


@pytest.mark.parametrize("change, words", [
    (lambda raw: raw["tournament"].update(repeats=4), "a Swiss tournament plays ceil(log2 N) rounds (here 3)"),
    (lambda raw: raw["games"][0].update(seats=3), "swiss plays two-seat tables; seats is 3"),
])
def test_a_swiss_tournament_that_cannot_be_played_is_refused_with_a_sentence(change, words):
    raw = swiss()
    change(raw)
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    assert words in str(caught.value), str(caught.value)


def test_validate_says_a_swiss_entry_plans_its_first_round_only():
    from arena.run.tournament import growth_note

    scenario = parse_scenario(swiss())
    assert growth_note(scenario, scenario.games[0]) == ("Swiss: round 1 of 3 planned; each next round is paired by "
                                                        "the standings")
