"""How ratings move as results come in: PRD's figure 4 (Elo over battles) and, for
payoff games, each agent's running mean payoff.

The Elo trajectory is ``arena.rank.elo.elo_path``: the very orderings and update of
``arena rank``'s Elo, computed once for both, so its last point is the Elo of ``arena rank``;
only the intermediate means are extra.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from arena.store.rows import ScoreRow
from ..rank.elo import checkpoints, elo_path
from ..rank.reviews import Reviews

def elo_trajectory(reviews: Reviews, orderings: int = 1000, seed: int = 0, k: float = 32, initial: float = 1000,
                   scale: float = 400) -> dict:
    """Mean (and spread) over orderings of every contestant's unweighted Elo after each checkpoint's
    number of battles. Returns {"x": battles, "mean": [C][points], "std": [C][points]}."""
    path = elo_path(reviews, orderings, seed, k, initial, scale)
    mean = path.total / orderings
    std = np.sqrt(np.maximum(path.squares / orderings - mean ** 2, 0.0))
    mean[-1], std[-1] = path.finals.mean(axis=0), path.finals.std(axis=0)  # summed the way elo() sums, to the last bit
    return {"x": path.marks.tolist(), "mean": mean.T.tolist(), "std": std.T.tolist()}


def running_payoffs(scores: Iterable[ScoreRow]) -> list[dict]:
    """Per (entry, role): each agent's mean payoff after each of its matches, from the finished
    matches' payoffs in the order of the plan. The last point of a line is the mean of ``arena
    rank``'s payoff table."""
    lines: dict[tuple[str, str], dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for row in scores:
        for seat in row.seats:
            if seat.label in row.scores:
                lines[(row.group, seat.role)][seat.agent].append(row.scores[seat.label])
    panels = []
    for (group, role), agents in lines.items():
        series = []
        for agent, values in sorted(agents.items()):
            means = np.cumsum(values) / np.arange(1, len(values) + 1)
            keep = checkpoints(len(values))[1:]  # 1-based counts of matches played
            series.append({"name": agent, "x": keep.tolist(), "y": means[keep - 1].tolist()})
        panels.append({"group": group, "role": role, "series": series})
    return panels
