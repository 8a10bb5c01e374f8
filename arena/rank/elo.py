"""Weighted Elo (PRD, Alg. 1), averaged over random orderings of the reviews.

Elo depends on the order in which battles are fed to it, so the result is the
mean (and spread) over many seeded orderings. The orderings are run side by
side: one numpy step per review updates every ordering at once.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from .reviews import Reviews
from .winrate import reviewer_roles


class EloResult(BaseModel):
    scores: dict[str, float]  # mean over orderings
    spread: dict[str, float]  # standard deviation over orderings
    weights: dict[str, float]  # reviewer weights used in the last pass (1: full K)
    passes: int
    last_change: float  # largest change of a weight between the last two passes


def elo_runs(a: np.ndarray, b: np.ndarray, score: np.ndarray, weight: np.ndarray, order: np.ndarray, contestants: int,
             k: float = 32, initial: float = 1000, scale: float = 400) -> np.ndarray:
    """Ratings [runs, contestants] after feeding each run its reviews in ``order[run]`` (a -1 is skipped)."""
    runs = order.shape[0]
    ratings = np.full((runs, contestants), float(initial))
    row = np.arange(runs)
    for step in range(order.shape[1]):
        i = order[:, step]
        live = i >= 0
        i = np.where(live, i, 0)
        ca, cb = a[i], b[i]
        ra, rb = ratings[row, ca], ratings[row, cb]
        expected_a = 1.0 / (1.0 + 10.0 ** ((rb - ra) / scale))
        delta = np.where(live, weight[i] * k * ((1.0 - score[i]) / 2.0 - expected_a), 0.0)
        ratings[row, ca] += delta  # B's change is the mirror image of A's
        ratings[row, cb] -= delta
    return ratings


def random_orders(n_reviews: int, orderings: int, rng: np.random.Generator) -> np.ndarray:
    return np.argsort(rng.random((orderings, n_reviews)), axis=1)


MAX_ORDER_CELLS = 25_000_000  # orderings x reviews held at once: about 200 MB of indices


def mean_runs(a, b, score, weight, n_reviews: int, orderings: int, rng, contestants: int, k, initial, scale) -> np.ndarray:
    """Ratings [orderings, contestants], played in batches small enough to keep memory bounded."""
    batch = max(1, MAX_ORDER_CELLS // max(1, n_reviews))
    parts = []
    for start in range(0, orderings, batch):
        order = random_orders(n_reviews, min(batch, orderings - start), rng)
        parts.append(elo_runs(a, b, score, weight, order, contestants, k, initial, scale))
    return np.concatenate(parts)


def elo(reviews: Reviews, weighted: bool = False, fixed: dict[str, float] | None = None, orderings: int = 1000,
        passes: int = 3, seed: int = 0, k: float = 32, initial: float = 1000, scale: float = 400) -> EloResult:
    """Unweighted: every review moves ratings by the full K.

    ``weighted``: pass 1 is unweighted; each further pass weighs a reviewer's reviews by its
    rating in the pass before, min-max scaled to [0, 1] over the reviewers (the best reviewer
    moves ratings by the full K, the worst not at all). This is what reproduces PRD's Table 3
    (GPT-4 1213, Claude 1125, ...); rescaling those weights to mean 1, as the listing of Alg. 1
    suggests, puts GPT-4 near 1222. Reviewers that are not contestants keep their ``fixed``
    weight (default 1).
    """
    rng = np.random.default_rng(seed)
    C = len(reviews.contestants)
    as_contestant, _ = reviewer_roles(reviews, fixed)
    scorers = as_contestant >= 0
    fixed = fixed or {}
    weights = np.array([fixed.get(r, 1.0) for r in reviews.reviewers], dtype=float)
    weights[scorers] = 1.0
    score = reviews.score.astype(float)
    change = 0.0
    total = passes if weighted else 1
    for _ in range(total):
        runs = mean_runs(reviews.a, reviews.b, score, weights[reviews.reviewer], len(reviews), orderings, rng,
                         C, k, initial, scale)
        mean = runs.mean(axis=0)
        used = weights.copy()
        if weighted and scorers.any():
            ratings = mean[as_contestant[scorers]]
            low, span = ratings.min(), ratings.max() - ratings.min()
            new = weights.copy()
            new[scorers] = (ratings - low) / span if span > 0 else 1.0
            change = float(np.max(np.abs(new - weights)))
            weights = new
    return EloResult(scores=dict(zip(reviews.contestants, mean.tolist())),
                     spread=dict(zip(reviews.contestants, runs.std(axis=0).tolist())),
                     weights=dict(zip(reviews.reviewers, used.tolist())), passes=total, last_change=change)
