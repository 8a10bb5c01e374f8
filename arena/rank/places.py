"""Places on a leaderboard: equal scores share a place."""

from __future__ import annotations

SAME = 9  # decimals: scores that agree this far are equal (sums in another order differ in the last bits)


def standing(scores: dict[str, float]) -> list[str]:
    """Best first; equal scores in name order, so the listing does not depend on input order."""
    return sorted(scores, key=lambda name: (-round(scores[name], SAME), name))


def competition_ranks(scores: dict[str, float]) -> dict[str, int]:
    """Standard competition ranking, "1, 2, 2, 4": contestants with equal scores share the best
    place among them, and the next contestant's place counts everyone above it."""
    places: dict[str, int] = {}
    previous = None
    for position, name in enumerate(standing(scores), start=1):
        value = round(scores[name], SAME)
        places[name] = places[previous] if previous is not None and value == round(scores[previous], SAME) else position
        previous = name
    return places
