"""Separability of the payoff boards: for each entry, metric and role, how many pairs of agents have
mean payoffs whose 95% intervals do not overlap, and how neighbouring places overlap
(``arena.rank.separability``, which the peer-rank boards use too)."""

from __future__ import annotations

from pydantic import BaseModel

from arena.rank.separability import Separability, separability
from arena.results.payoffs import PayoffSummary


class BoardSeparability(BaseModel):
    group: str
    metric: str
    role: str
    separability: Separability


def payoff_separability(rows: list[PayoffSummary]) -> list[BoardSeparability]:
    """One per (entry, metric, role) board of ``rows`` with two agents or more, in their order."""
    boards: dict[tuple[str, str, str], list[PayoffSummary]] = {}
    for row in rows:
        boards.setdefault((row.group, row.metric, row.role), []).append(row)
    return [BoardSeparability(group=group, metric=metric, role=role, separability=separability(
        {r.agent: r.mean for r in members}, {r.agent: r.low for r in members}, {r.agent: r.high for r in members}))
        for (group, metric, role), members in boards.items() if len(members) > 1]
