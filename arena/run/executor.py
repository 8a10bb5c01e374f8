"""Who plays the matches a run hands out.

The runner decides which matches to play, when, under which limits, and what to do with what
comes back (the store, the live view, waiting out an outage); an executor only plays a spec and
reports its events as they happen. ``InProcess`` plays every match on the run's own trio thread,
with the run's agents. ``arena.run.workers.Workers`` plays them in worker processes that build
their agents from the same scenario and send every event, call and note back as it happens (all
of it plain data: specs, store rows, records and an outage's four strings, pickled). Machines
would be one more executor of the same shape.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Protocol

from arena.contract.agent import Agent
from arena.contract.calls import Services
from arena.contract.errors import ArenaError
from arena.contract.records import MatchSpec
from arena.engine.match import EventSink, Played, play_spec
from arena.run.scenario import Scenario
from arena.store import RunStore


class ExecutorError(ArenaError):
    """The executor cannot start: Ray is not installed, its cluster cannot be reached or has no room for the
    workers. Said in a sentence before any match is played."""


def build_agents(scenario: Scenario, services: Services | None = None) -> dict[str, Agent]:
    """The scenario's agents, each given the services of the process it plays in."""
    agents = {}
    for name in scenario.agents:
        backend, config = scenario.agent_config(name)
        agents[name] = backend(name, config, services)
    return agents


class Executor(Protocol):
    def serving(self, services: Services) -> AbstractAsyncContextManager[object]:
        """Hold what playing needs (processes, their sockets) while the run's block runs; the run's
        ``services`` get the calls and notes of agents that live elsewhere."""
        ...

    async def ready(self) -> None:
        """Return when the agents are prepared; raise ``FatalAgentError`` when one cannot play."""
        ...

    async def play(self, spec: MatchSpec, sinks: Sequence[EventSink], store: RunStore | None = None) -> Played:
        """Play the match, handing every event to each sink and its rows to the store as it happens;
        a spec that cannot be set up gives a failed record, never an exception. None: the process playing
        it was lost (a Ray worker killed); the run wipes what it stored of the match and plays it again."""
        ...


class InProcess:
    """Plays matches in this process, with the run's agents."""

    def __init__(self, agents: Mapping[str, Agent]):
        self.agents = agents

    @asynccontextmanager
    async def serving(self, services: Services) -> AsyncIterator[InProcess]:
        yield self  # the agents were built with the run's services

    async def ready(self) -> None:
        for agent in self.agents.values():
            await agent.prepare()

    async def play(self, spec: MatchSpec, sinks: Sequence[EventSink], store: RunStore | None = None) -> Played:
        return await play_spec(spec, self.agents, sinks if store is None else (store.record_event, *sinks))
