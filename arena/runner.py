"""Turning a scenario into matches and playing them, several at once."""

from __future__ import annotations

from collections.abc import Callable

import trio

from . import seeding
from .agent import Agent
from .match import EventSink, MatchRecord, MatchSpec, play_match
from .scenario import Scenario


def plan(scenario: Scenario) -> list[MatchSpec]:
    """Every match of the scenario. Seeds come from the scenario seed and the
    match's key, so neither order nor concurrency changes what a match is."""
    specs = []
    for entry in scenario.games:
        for repeat in range(1, entry.repeats + 1):
            key = f"{entry.name}#{repeat}"
            specs.append(
                MatchSpec(
                    key=key, group=entry.name, game=entry.game, params=entry.params, agents=tuple(entry.agents),
                    seed=seeding.derive(scenario.seed, key), shuffle_seats=entry.shuffle_seats,
                    referee=entry.referee, settings=scenario.match,
                )
            )
    return specs


def build_agents(scenario: Scenario) -> dict[str, Agent]:
    agents = {}
    for name in scenario.agents:
        backend, config = scenario.agent_config(name)
        agents[name] = backend(name, config)
    return agents


async def run_scenario(
    scenario: Scenario,
    on_event: EventSink | None = None,
    on_record: Callable[[MatchRecord], None] | None = None,
    concurrency: int | None = None,
) -> list[MatchRecord]:
    specs = plan(scenario)
    agents = build_agents(scenario)
    limiter = trio.CapacityLimiter(concurrency or scenario.concurrency)
    done: dict[str, MatchRecord] = {}

    async def play(spec: MatchSpec) -> None:
        async with limiter:
            record = await play_match(spec, agents, on_event)
        done[spec.key] = record
        if on_record is not None:
            on_record(record)

    try:
        async with trio.open_nursery() as nursery:
            for spec in specs:
                nursery.start_soon(play, spec)
    finally:
        with trio.CancelScope(shield=True):
            for agent in agents.values():
                await agent.aclose()
    return [done[spec.key] for spec in specs]
