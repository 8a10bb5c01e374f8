"""DeepEval's stableness condition: repeat until the ranking stops changing."""

from __future__ import annotations

import math

from pydantic import BaseModel

from arena.contract.runs.schema import ScoreRow
from arena.results.payoffs import PayoffSummary
from arena.run.scenario import UntilStable

# Why an until_stable entry stopped adding repeats, as the store keeps it (stability.stopped):
STABLE = "stable"  # tau and width both reached, at min repeats or later
AT_CAP = "max repeats"  # max repeats played without both
# the run stopped before the entry's next whole block (the runner records these on the last check)
BUDGET, OUTAGE, LIMIT = "budget", "outage", "limit"


class StabilityCheck(BaseModel):
    group: str
    repeats: int
    tau: float | None  # Kendall's tau against the previous estimate; None at the first
    max_width: float
    width_limit: float  # the widest an interval may be, in payoff units: width_abs, or width times the range
    stable: bool
    done: bool
    stopped: str | None  # STABLE or AT_CAP once done; None while more blocks follow
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


def payoff_range(group: str, scores: list[ScoreRow]) -> float:
    """The entry's highest payoff minus its lowest, over every scored seat of its finished matches."""
    values = [v for row in scores if row.group == group for v in row.scores.values()]
    return max(values) - min(values) if values else 0.0


def check(group: str, previous: list[PayoffSummary], current: list[PayoffSummary], repeats: int, rule: UntilStable,
          spread: float) -> StabilityCheck:
    """Stable when Kendall's tau between the estimate without the last block
    (``previous``) and with it (``current``) reaches ``rule.tau`` and every 95%
    interval is at most ``rule.width`` times ``spread`` (the payoff range, from
    ``payoff_range``) wide, or ``rule.width_abs`` when the scenario gives that."""
    means = {_key(r): r.mean for r in current if r.group == group}
    widths = [r.high - r.low for r in current if r.group == group]
    max_width = max(widths) if widths else 0.0
    limit = rule.width_abs if rule.width_abs is not None else rule.width * spread
    before = {_key(r): r.mean for r in previous if r.group == group}
    tau = kendall_tau(before, means) if before else None
    stable = tau is not None and tau >= rule.tau and max_width <= limit
    settled = stable and repeats >= rule.min
    done = repeats >= rule.max or settled
    stopped = STABLE if settled else AT_CAP if done else None
    return StabilityCheck(group=group, repeats=repeats, tau=tau, max_width=max_width, width_limit=limit, stable=stable,
                          done=done, stopped=stopped, means=means)
