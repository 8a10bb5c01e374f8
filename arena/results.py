"""Payoffs per agent over repeated matches (DeepEval Eq. 1, and Eq. 2 per role)."""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from .match import MatchRecord


class PayoffSummary(BaseModel):
    group: str
    agent: str
    role: str
    matches: int
    mean: float
    low: float | None  # 95% interval of the mean; None with a single match
    high: float | None
    std: float
    invalid_replies: int
    defaulted_turns: int


def mean_interval(values: Iterable[float], level: float = 0.95) -> tuple[float, float | None, float | None, float]:
    """Mean with a Student-t interval: small repeat counts are the normal case."""
    x = np.asarray(list(values), dtype=float)
    mean = float(x.mean())
    if x.size < 2:
        return mean, None, None, 0.0
    from scipy import stats  # imported here: it costs most of the CLI's start-up time

    std = float(x.std(ddof=1))
    half = float(stats.t.ppf(0.5 + level / 2, x.size - 1)) * std / math.sqrt(x.size)
    return mean, mean - half, mean + half, std


def summarize(records: Iterable[MatchRecord]) -> list[PayoffSummary]:
    """One row per (scenario entry, agent, role), best mean first within each entry.

    In a symmetric game every seat has the same role, so this is Eq. 1; in an
    asymmetric one the rows split by role, which is Eq. 2.
    """
    payoffs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    invalid: dict[tuple[str, str, str], int] = defaultdict(int)
    defaulted: dict[tuple[str, str, str], int] = defaultdict(int)
    order: list[str] = []
    for record in records:
        if record.status != "finished":
            continue
        if record.group not in order:
            order.append(record.group)
        for seat in record.seats:
            payoffs[(record.group, seat.agent, seat.role)].append(record.payoffs[seat.label])
        for event in record.events:
            if event.type == "turn_failed" and event.failure == "invalid":
                invalid[(record.group, record.agent_of(event.seat), record.role_of(event.seat))] += 1
            elif event.type == "action" and event.defaulted:
                defaulted[(record.group, record.agent_of(event.seat), record.role_of(event.seat))] += 1
    rows = []
    for (group, agent, role), values in payoffs.items():
        mean, low, high, std = mean_interval(values)
        key = (group, agent, role)
        rows.append(PayoffSummary(group=group, agent=agent, role=role, matches=len(values), mean=mean, low=low,
                                  high=high, std=std, invalid_replies=invalid[key], defaulted_turns=defaulted[key]))
    rows.sort(key=lambda r: (order.index(r.group), r.role, -r.mean, r.agent))
    return rows
