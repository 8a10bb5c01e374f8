"""Calls, tokens and cost per agent over a run: what was spent, and what the response cache saved."""

from __future__ import annotations

from pydantic import BaseModel

from arena.contract.calls import CallRecord


class Usage(BaseModel):
    """One agent's calls over a run.

    Spent (``prompt_tokens``, ``completion_tokens``, ``cost``, ``seconds``): the calls that reached
    a model. Saved (``saved_*``): the replies the response cache gave back instead, at what they
    cost when they were first asked. A cost is None when some call's price is unknown."""

    agent: str
    calls: int
    cached: int
    retries: int
    failed: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None  # USD
    latency: float  # mean seconds per call that reached the model
    seconds: float  # those calls' seconds, added up
    saved_prompt_tokens: int
    saved_completion_tokens: int
    saved_cost: float | None
    saved_seconds: float  # what the cached replies took when they were first asked


def _cost(calls: list[CallRecord]) -> float | None:
    costs = [c.cost for c in calls if c.error is None]  # a failed call returns no usage and is not billed
    return None if any(c is None for c in costs) else sum(costs)


def usage_by_agent(calls: list[CallRecord]) -> list[Usage]:
    rows: dict[str, list[CallRecord]] = {}
    for call in calls:
        rows.setdefault(call.agent, []).append(call)
    out = []
    for agent, mine in sorted(rows.items()):
        live = [c for c in mine if not c.cached]
        cached = [c for c in mine if c.cached]
        out.append(Usage(
            agent=agent, calls=len(mine), cached=len(cached), retries=sum(c.retries for c in mine),
            failed=sum(c.error is not None for c in mine),
            prompt_tokens=sum(c.prompt_tokens or 0 for c in live), completion_tokens=sum(c.completion_tokens or 0 for c in live),
            cost=_cost(live), latency=sum(c.latency for c in live) / len(live) if live else 0.0,
            seconds=sum(c.latency for c in live),
            saved_prompt_tokens=sum(c.prompt_tokens or 0 for c in cached),
            saved_completion_tokens=sum(c.completion_tokens or 0 for c in cached),
            saved_cost=_cost(cached), saved_seconds=sum(c.latency for c in cached),
        ))
    return out
