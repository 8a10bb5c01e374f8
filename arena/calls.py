"""What an LLM call costs, and the run-wide services every model backend shares:
the response cache, the call log, rate limits and the budget."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict, Field

from .cache import ResponseCache
from .ratelimit import CallLimits


class CallRecord(BaseModel):
    """One request to a model (or a cache hit standing in for it)."""

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


class Usage(BaseModel):
    """One agent's calls over a run."""

    agent: str
    calls: int
    cached: int
    retries: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # USD; None when some call's price is unknown
    latency: float  # mean seconds per call that reached the model


def usage_by_agent(calls: list[CallRecord]) -> list[Usage]:
    rows: dict[str, list[CallRecord]] = {}
    for call in calls:
        rows.setdefault(call.agent, []).append(call)
    out = []
    for agent, mine in sorted(rows.items()):
        live = [c for c in mine if not c.cached]
        costs = [c.cost for c in live if c.error is None]
        out.append(Usage(
            agent=agent, calls=len(mine), cached=len(mine) - len(live), retries=sum(c.retries for c in mine),
            failed=sum(c.error is not None for c in mine),
            prompt_tokens=sum(c.prompt_tokens or 0 for c in live), completion_tokens=sum(c.completion_tokens or 0 for c in live),
            cost=None if any(c is None for c in costs) else sum(costs),
            latency=sum(c.latency for c in live) / len(live) if live else 0.0,
        ))
    return out


@dataclass
class Services:
    """Handed to every agent of a run (``Agent.services``)."""

    cache: ResponseCache | None = None
    use_cache: bool = True
    record_call: Callable[[CallRecord], None] = lambda call: None
    limit_settings: dict[str, LimitSettings] = field(default_factory=dict)
    prices: dict[str, tuple[float, float]] = field(default_factory=dict)
    _limits: dict[tuple[str, str], CallLimits] = field(default_factory=dict)

    def limits(self, backend: str, endpoint: str) -> CallLimits:
        """One set of limits per backend and endpoint, shared by every agent and match that uses it."""
        key = (backend, endpoint)
        if key not in self._limits:
            settings = self.limit_settings.get(backend, LimitSettings())
            self._limits[key] = CallLimits(settings.calls, settings.rpm, settings.tpm)
        return self._limits[key]
