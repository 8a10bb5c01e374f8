"""How ratings move as results come in: PRD's figure 4 (Elo over battles) and, for
payoff games, each agent's running mean payoff.

The Elo trajectory replays exactly the orderings ``arena.rank.elo.elo`` draws (same
seed, same batches, same update), so its last point is the Elo of ``arena rank``;
only the intermediate means are extra. The replay keeps no history, which is why
the trajectory has its own loop (``elo_loop.checkpoint_sums``, compiled like the replay).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np

from arena.store.rows import ScoreRow
from ..rank.elo import batch_sizes, random_orders
from ..rank.elo_loop import checkpoint_sums
from ..rank.reviews import Reviews

POINTS = 200  # checkpoints along the x axis: enough for a smooth line, small in the page


def checkpoints(n: int, points: int = POINTS) -> np.ndarray:
    return np.unique(np.round(np.linspace(0, n, min(n, points) + 1)).astype(int))


def elo_trajectory(reviews: Reviews, orderings: int = 1000, seed: int = 0, k: float = 32, initial: float = 1000,
                   scale: float = 400) -> dict:
    """Mean (and spread) over orderings of every contestant's unweighted Elo after each checkpoint's
    number of battles. Returns {"x": battles, "mean": [C][points], "std": [C][points]}."""
    n, C = len(reviews), len(reviews.contestants)
    rng = np.random.default_rng(seed)
    marks = checkpoints(n)
    slot_of_step = np.full(n + 1, -1)
    slot_of_step[marks] = np.arange(len(marks))
    total = np.zeros((len(marks), C))
    squares = np.zeros((len(marks), C))
    finals = []
    for size in batch_sizes(n, orderings):
        order = random_orders(n, size, rng)
        summed, squared, ratings = checkpoint_sums(reviews.a, reviews.b, reviews.score.astype(float), order,
                                                   slot_of_step, len(marks), C, k, initial, scale)
        total += summed
        squares += squared
        finals.append(ratings)
    mean = total / orderings
    std = np.sqrt(np.maximum(squares / orderings - mean ** 2, 0.0))
    last = np.concatenate(finals)
    mean[-1], std[-1] = last.mean(axis=0), last.std(axis=0)  # summed the way elo() sums, to the last bit
    return {"x": marks.tolist(), "mean": mean.T.tolist(), "std": std.T.tolist()}


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
