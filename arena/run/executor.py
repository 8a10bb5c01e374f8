"""Who plays the matches a run hands out.

The runner decides which matches to play, when, under which limits, and what to do with what
comes back (the store, the live view, waiting out an outage); an executor only plays a spec and
reports its events as they happen. ``InProcess`` plays every match on the run's own trio thread,
with the run's agents. Another executor (a pool of worker processes, or machines) would build
its agents from the same scenario, play the specs it is handed the same way, send every event
back to the sinks as it happens and return the ``Played`` (all of it plain data: specs, events,
records and an outage's four strings cross a process boundary as JSON); the cache is a SQLite
file several processes can share, and calls and notes would travel back like events.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from arena.contract.agent import Agent
from arena.contract.records import MatchSpec
from arena.engine.match import EventSink, Played, play_spec


class Executor(Protocol):
    async def play(self, spec: MatchSpec, sinks: Sequence[EventSink]) -> Played:
        """Play the match, handing every event to each sink as it happens; a spec that cannot be set
        up gives a failed record, never an exception."""
        ...


class InProcess:
    """Plays matches in this process, with the run's agents."""

    def __init__(self, agents: Mapping[str, Agent]):
        self.agents = agents

    async def play(self, spec: MatchSpec, sinks: Sequence[EventSink]) -> Played:
        return await play_spec(spec, self.agents, sinks)
