"""What a model call is, and what a run lends the agents that make calls.

An agent that calls a model is given a ``Services`` when it is built. This base lends
nothing (no cache, no call log, no limits), so an agent also works on its own, in a
notebook or a test; a run gives it the real services (``arena.services``).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, NamedTuple

from pydantic import BaseModel, ConfigDict, Field


# The seat a probe's record names: a minimal chat request that asks whether an endpoint works, not a
# turn's call (never cached, never scored, and not a real answer for the outage breaker)
PROBE_SEAT = "(probe)"


class CallRecord(BaseModel):
    """One request to a model (or a cache hit standing in for it).

    A cache hit (``cached``) carries the tokens, cost and latency of the request it replays, as
    they were when it was first asked: reports show them as saved, and the budget ignores them."""

    model_config = ConfigDict(frozen=True)

    match: str
    seat: str
    round: int
    attempt: int
    agent: str
    backend: str
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = Field(None, description="USD; None when the model's price is unknown.")
    latency: float = 0.0
    cached: bool = False
    retries: int = 0
    error: str | None = None
    token: str | None = Field(None, description="Pairs the record with the CallStarted that opened it.")


class CallStarted(BaseModel):
    """A request on its way to a model: the live view shows it as in flight until its record arrives."""

    model_config = ConfigDict(frozen=True)

    token: str
    match: str
    seat: str
    round: int
    attempt: int
    agent: str
    backend: str
    model: str


class CachedReply(NamedTuple):
    """A reply the response cache holds, with what it cost when it was first asked: a hit is
    reported as saved at these figures (None: not known, as for entries older than the figure)."""

    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None  # USD
    latency: float | None = None  # seconds the first asking took


class Slot:
    """A place under an endpoint's limits; set ``tokens`` to what the call really used."""

    def __init__(self, tokens: int):
        self.tokens = tokens


class Services:
    """The run's shared services, as an agent sees them. Every method is a no-op here."""

    use_cache: bool = False
    prices: dict[str, tuple[float, float]] = {}

    @asynccontextmanager
    async def cached(self, **key: Any) -> AsyncIterator[CachedReply | None]:
        """The reply stored for this exact request (``key`` holds everything that shapes it), or None:
        then the caller asks, inside the block, and ``remember``s what it paid for. An identical
        request already being asked is waited for rather than sent again."""
        yield None

    def remember(self, reply: CachedReply, **key: Any) -> None:
        """Store a reply that was paid for."""

    def call_started(self, call: CallStarted) -> None:
        """A request is about to be sent (before each try); its ``CallRecord`` follows."""

    def record_call(self, call: CallRecord) -> None:
        """Log one call (or a cache hit standing in for it)."""

    def note(self, agent: str, endpoint: str, topic: str, text: str) -> None:
        """A fact about an endpoint found while playing, worth saying once and keeping with the run
        (``topic`` names it, e.g. "output mode"; ``text`` says it to a person)."""

    @asynccontextmanager
    async def slot(self, backend: str, endpoint: str, tokens: int) -> AsyncIterator[Slot]:
        """Wait for room under the endpoint's limits (calls in flight, requests and tokens per minute)."""
        yield Slot(tokens)
