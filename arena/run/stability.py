"""DeepEval's stableness condition: repeat until the ranking stops changing."""

from __future__ import annotations

import math

from pydantic import BaseModel

from arena.results.payoffs import PayoffSummary
from arena.run.scenario import UntilStable


class StabilityCheck(BaseModel):
    group: str
    repeats: int
    tau: float | None  # Kendall's tau against the previous estimate; None at the first
    max_width: float
    stable: bool
    done: bool
    means: dict[str, float]


def _key(row: PayoffSummary) -> str:
    return f"{row.agent}@{row.role}"


def kendall_tau(previous: dict[str, float], current: dict[str, float]) -> float:
    from scipy.stats import kendalltau

    keys = sorted(set(previous) & set(current))
    a = [previous[k] for k in keys]
    b = [current[k] for k in keys]
    if len(keys) < 2:
        return 1.0
    tau = kendalltau(a, b).statistic
    if math.isnan(tau):  # a constant side: all tied, so the same ranking only if both are
        return 1.0 if len(set(a)) == len(set(b)) == 1 else 0.0
    return float(tau)


def check(group: str, previous: list[PayoffSummary], current: list[PayoffSummary], repeats: int, rule: UntilStable) -> StabilityCheck:
    """Stable when Kendall's tau between the estimate without the last block
    (``previous``) and with it (``current``) reaches ``rule.tau`` and every 95%
    interval is at most ``rule.width`` wide."""
    means = {_key(r): r.mean for r in current if r.group == group}
    widths = [r.high - r.low for r in current if r.group == group]
    max_width = max(widths) if widths else 0.0
    before = {_key(r): r.mean for r in previous if r.group == group}
    tau = kendall_tau(before, means) if before else None
    stable = tau is not None and tau >= rule.tau and max_width <= rule.width
    done = repeats >= rule.max or (stable and repeats >= rule.min)
    return StabilityCheck(group=group, repeats=repeats, tau=tau, max_width=max_width, stable=stable, done=done, means=means)
