"""How well a leaderboard's intervals tell its contestants apart (Arena-Hard's separability).

Two contestants are told apart when their 95% intervals do not overlap (touching ends count as
overlapping). ``share`` is the fraction of all pairs told apart; ``adjacent`` looks at each pair of
neighbouring places, where a reader most wants to know whether the order is settled.
"""

from __future__ import annotations

from itertools import combinations

from pydantic import BaseModel

from .places import standing


class AdjacentPlaces(BaseModel):
    upper: str  # the contestant placed higher
    lower: str  # the one placed next below it
    apart: bool  # their intervals do not overlap
    overlap: float  # how far the intervals overlap, in score units (0 when apart)
    gap: float  # how far apart they are when they do not overlap (0 when they do)


class Separability(BaseModel):
    share: float  # pairs told apart over all pairs (1.0 with fewer than two contestants: nothing to confuse)
    apart_pairs: int
    pairs: int
    adjacent: list[AdjacentPlaces]


def separability(scores: dict[str, float], low: dict[str, float], high: dict[str, float]) -> Separability:
    order = [c for c in standing(scores) if low[c] == low[c] and high[c] == high[c]]  # no interval (nan): left out
    apart = sum(high[x] < low[y] or high[y] < low[x] for x, y in combinations(order, 2))
    pairs = len(order) * (len(order) - 1) // 2
    adjacent = []
    for upper, lower in zip(order, order[1:]):
        shared = min(high[upper], high[lower]) - max(low[upper], low[lower])
        adjacent.append(AdjacentPlaces(upper=upper, lower=lower, apart=shared < 0, overlap=max(shared, 0.0),
                                       gap=max(-shared, 0.0)))
    return Separability(share=apart / pairs if pairs else 1.0, apart_pairs=apart, pairs=pairs, adjacent=adjacent)


def describe(found: Separability | dict, digits: int = 0) -> list[str]:
    """Under a leaderboard with intervals: how many pairs its intervals tell apart, and, for each two
    neighbouring places, whether their intervals overlap and by how much (``found`` may be its JSON)."""
    found = Separability.model_validate(found)
    if not found.pairs:  # a board of one: nothing to tell apart
        return []
    lines = [f"separability: {found.apart_pairs} of {found.pairs} pairs have intervals that do not overlap "
             f"({found.share:.0%})"]
    if found.adjacent:
        lines.append("next places: " + "; ".join(
            f"{p.upper} / {p.lower} " + (f"apart by {p.gap:.{digits}f}" if p.apart else f"overlap by {p.overlap:.{digits}f}")
            for p in found.adjacent))
    return lines
