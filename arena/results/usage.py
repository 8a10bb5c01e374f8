"""Calls, tokens and cost per agent over a run."""

from __future__ import annotations

from pydantic import BaseModel

from arena.contract.calls import CallRecord


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
