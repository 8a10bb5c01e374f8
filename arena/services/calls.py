"""The run-wide services every model backend shares: the response cache, the call log,
rate limits per endpoint, and the spending the budget is checked against."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from typing import Any

import trio
from pydantic import BaseModel, ConfigDict, Field

from arena.contract.calls import CachedReply, CallRecord, CallStarted, Services, Slot
from arena.services.cache import ResponseCache, cache_key
from arena.services.ratelimit import CallLimits


class LimitSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    calls: int | None = Field(None, ge=1, description="Calls in flight at once.")
    rpm: int | None = Field(None, ge=1, description="Requests per minute.")
    tpm: int | None = Field(None, ge=1, description="Tokens per minute (prompt + completion).")


class Budget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    usd: float | None = Field(None, gt=0, description="Stop starting matches once this much has been spent.")
    tokens: int | None = Field(None, gt=0, description="Stop starting matches once this many tokens were used.")


@dataclass
class Spending:
    """What the run has spent, for the budget: calls that reached a model. A reply the cache
    gave back costs nothing now, whatever it cost when it was first asked."""

    usd: float = 0.0
    tokens: int = 0
    calls: int = 0
    unknown_cost_calls: int = 0

    def add(self, call: CallRecord) -> None:
        if call.cached:
            return
        self.calls += 1
        self.tokens += (call.prompt_tokens or 0) + (call.completion_tokens or 0)
        if call.cost is None:
            self.unknown_cost_calls += 1
        else:
            self.usd += call.cost

    def reached(self, budget: Budget | None) -> str | None:
        if budget is None:
            return None
        if budget.usd is not None and self.usd >= budget.usd:
            return f"the budget of ${budget.usd:g} is spent (${self.usd:.4f})"
        if budget.tokens is not None and self.tokens >= budget.tokens:
            return f"the budget of {budget.tokens} tokens is used ({self.tokens})"
        return None


class RunServices(Services):
    """Handed to every agent of a run when it is built."""

    def __init__(self, cache: ResponseCache | None = None, use_cache: bool = True,
                 record_call: Callable[[CallRecord], None] = lambda call: None,
                 limit_settings: dict[str, LimitSettings] | None = None,
                 prices: dict[str, tuple[float, float]] | None = None,
                 on_call_started: Callable[[CallStarted], None] = lambda call: None,
                 on_note: Callable[[str, str, str, str], None] = lambda agent, endpoint, topic, text: None,
                 claim: Callable[[str], AbstractAsyncContextManager[None]] | None = None,
                 held_slot: Callable[[str, str, int], AbstractAsyncContextManager[Slot]] | None = None):
        self._on_call_started = on_call_started
        self._claim = claim  # a run played by several processes: one of them at a time asks a request
        self._held_slot = held_slot  # ... and the run's process holds the limits for all of them
        self._on_note = on_note
        self._noted: set[tuple[str, str, str, str]] = set()
        self._asking: dict[str, trio.Event] = {}  # requests being asked right now, by cache key
        self.cache = cache
        self.use_cache = use_cache
        self._record_call = record_call
        self.limit_settings = dict(limit_settings or {})
        self.prices = dict(prices or {})
        self._limits: dict[tuple[str, str], CallLimits] = {}
        self.warnings: list[str] = []  # said to the person running it at the end, whatever the view (a damaged cache)

    @asynccontextmanager
    async def cached(self, **key: Any) -> AsyncIterator[CachedReply | None]:
        if self.cache is None or not self.use_cache:
            yield None
            return
        digest = cache_key(**key)
        # Matches run at once can ask the very same thing (a summary of identical turns, the opening
        # prompt of every repeat at a fixed seed). The first asks; the others wait for its reply, so
        # what a run pays, and its calls table, do not depend on which match got there first.
        while (hit := self.cache.get(digest)) is None and digest in self._asking:
            await self._asking[digest].wait()
        if hit is not None:
            yield hit
            return
        self._asking[digest] = asked = trio.Event()
        try:
            if self._claim is None:
                yield None
            else:  # another process of the run may have asked it while this one waited its turn
                async with self._claim(digest):
                    yield self.cache.get(digest)
        finally:  # paid for or not (a failure lets the next one in line ask for itself)
            del self._asking[digest]
            asked.set()

    def remember(self, reply: CachedReply, **key: Any) -> None:
        if self.cache is not None:
            self.cache.put(cache_key(**key), reply)

    def call_started(self, call: CallStarted) -> None:
        self._on_call_started(call)

    def record_call(self, call: CallRecord) -> None:
        self._record_call(call)

    def note(self, agent: str, endpoint: str, topic: str, text: str) -> None:
        if (agent, endpoint, topic, text) not in self._noted:  # said once per run, however many matches find it
            self._noted.add((agent, endpoint, topic, text))
            self._on_note(agent, endpoint, topic, text)

    def limits(self, backend: str, endpoint: str) -> CallLimits:
        """One set of limits per backend and endpoint, shared by every agent and match that uses it."""
        key = (backend, endpoint)
        if key not in self._limits:
            settings = self.limit_settings.get(backend, LimitSettings())
            self._limits[key] = CallLimits(settings.calls, settings.rpm, settings.tpm)
        return self._limits[key]

    @asynccontextmanager
    async def slot(self, backend: str, endpoint: str, tokens: int) -> AsyncIterator[Slot]:
        place = self._held_slot(backend, endpoint, tokens) if self._held_slot else self.limits(backend, endpoint).slot(tokens)
        async with place as reservation:
            yield reservation

    def close(self) -> None:
        if self.cache is not None:
            self.cache.close()
