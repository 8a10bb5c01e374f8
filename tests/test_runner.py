"""Running a whole scenario: planning, seeds, concurrency, and failures that stay contained."""

from __future__ import annotations

import pytest

from arena import plugins
from arena.runner import plan, run_scenario
from arena.scenario import parse_scenario

from helpers import Roundtable

AGENTS = {
    "a": {"backend": "scripted", "strategy": "free_rider"},
    "b": {"backend": "scripted", "strategy": "tit_for_tat"},
    "c": {"backend": "scripted", "strategy": "random_contributor", "delay": 0.01},
}


def scenario(games, seed=3, concurrency=4):
    return parse_scenario({"name": "t", "seed": seed, "agents": AGENTS, "games": games, "concurrency": concurrency})


def test_plan_gives_stable_keys_and_seeds():
    s = scenario([{"game": "public_goods", "agents": ["a", "b", "c"], "repeats": 3}])
    keys = [m.key for m in plan(s)]
    assert keys == ["public_goods#1", "public_goods#2", "public_goods#3"]
    assert len({m.seed for m in plan(s)}) == 3
    assert [m.seed for m in plan(s)] == [m.seed for m in plan(scenario(s.model_dump()["games"]))]
    assert [m.seed for m in plan(s)] != [m.seed for m in plan(scenario(s.model_dump()["games"], seed=4))]


async def test_concurrency_does_not_change_results():
    games = [{"game": "public_goods", "agents": ["a", "b", "c"], "repeats": 6, "params": {"mode": 2}}]
    serial = await run_scenario(scenario(games, concurrency=1))
    parallel = await run_scenario(scenario(games, concurrency=6))
    assert [r.payoffs for r in serial] == [r.payoffs for r in parallel]
    assert [r.messages for r in serial] == [r.messages for r in parallel]


@pytest.fixture
def buggy_game():
    class Buggy(Roundtable):
        def apply(self, round, actions):
            raise RuntimeError("scoring exploded")

    plugins.register("game", "buggy", Buggy)
    yield
    plugins.unregister("game", "buggy")


async def test_a_failing_match_does_not_stop_the_others(buggy_game):
    games = [
        {"game": "buggy", "agents": ["a", "b"], "repeats": 2},
        {"game": "public_goods", "agents": ["a", "b", "c"], "repeats": 3},
    ]
    finished = []
    records = await run_scenario(scenario(games), on_record=finished.append)
    assert [r.status for r in records] == ["failed", "failed", "finished", "finished", "finished"]
    assert all("RuntimeError: scoring exploded" in r.error for r in records[:2])
    assert len(finished) == 5
