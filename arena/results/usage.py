"""Calls, tokens and cost per agent over a run: what was spent, and what the response cache saved."""

from __future__ import annotations

from pydantic import BaseModel

from arena.contract.calls import CallRecord


class Usage(BaseModel):
    """One agent's calls over a run.

    Spent (``prompt_tokens``, ``completion_tokens``, ``cost``, ``seconds``): the calls that reached
    a model. Saved (``saved_*``): the replies the response cache gave back instead, at what they
    cost when they were first asked. A count or a cost is None (unknown) when some call's is: a
    call the turn's deadline cut off, an answer without usage, a model without a price. Such a
    call is not taken for a free one; ``unknown`` counts the calls whose tokens nobody knows."""

    agent: str
    calls: int
    cached: int
    retries: int
    failed: int
    unknown: int  # calls that reached a model (or may have) whose token counts are unknown
    prompt_tokens: int | None
    completion_tokens: int | None
    cost: float | None  # USD
    latency: float  # mean seconds per call that reached the model
    seconds: float  # those calls' seconds, added up
    saved_prompt_tokens: int | None
    saved_completion_tokens: int | None
    saved_cost: float | None
    saved_seconds: float  # what the cached replies took when they were first asked


def known_sum(values) -> int | float | None:
    """The sum, or None when any value is unknown: a partial total read as the whole is wrong."""
    total = 0
    for value in values:
        if value is None:
            return None
        total += value
    return total


def dollars(spent: float | None, unpriced: int = 0) -> str:
    """Spend as every view says it (tables, dashboard, match lines, report): ``$0.0123``; ``unknown``
    when no price is known (a model behind a server that `prices:` does not name); ``$0.0123 (+2
    unpriced)`` for the known part when some calls' price is unknown. A model run in this process costs
    $0.0000: its backend says it is free, it needs no price."""
    if spent is None:
        return "unknown"
    return f"${spent:.4f}" + (f" (+{unpriced} unpriced)" if unpriced else "")


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
            unknown=sum(c.prompt_tokens is None or c.completion_tokens is None for c in live),
            prompt_tokens=known_sum(c.prompt_tokens for c in live),
            completion_tokens=known_sum(c.completion_tokens for c in live),
            cost=known_sum(c.cost for c in live), latency=sum(c.latency for c in live) / len(live) if live else 0.0,
            seconds=sum(c.latency for c in live),
            saved_prompt_tokens=known_sum(c.prompt_tokens for c in cached),
            saved_completion_tokens=known_sum(c.completion_tokens for c in cached),
            saved_cost=known_sum(c.cost for c in cached), saved_seconds=sum(c.latency for c in cached),
        ))
    return out
