"""Weighted win rate (PRD, Alg. 2 and Eq. 1-2) and the pairwise win-rate matrix."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from .reviews import ReviewError, Reviews


def wins_and_battles(reviews: Reviews) -> tuple[np.ndarray, np.ndarray]:
    """Per reviewer and contestant: wins (ties count half) and battles, arrays [R, C]."""
    R, C = len(reviews.reviewers), len(reviews.contestants)
    a_wins = (1.0 - reviews.score) / 2  # f(-s): 1 when A wins, 0.5 for a tie
    wins = np.bincount(reviews.reviewer * C + reviews.a, weights=a_wins, minlength=R * C)
    wins += np.bincount(reviews.reviewer * C + reviews.b, weights=1.0 - a_wins, minlength=R * C)
    battles = np.bincount(reviews.reviewer * C + reviews.a, minlength=R * C) + np.bincount(reviews.reviewer * C + reviews.b, minlength=R * C)
    return wins.reshape(R, C), battles.reshape(R, C).astype(float)


def min_max_normalise(scores: np.ndarray) -> np.ndarray:
    """PRD's weights: scaled to [0, 1] over the reviewers, then to sum 1 (along the last axis)."""
    low = scores.min(axis=-1, keepdims=True)
    span = scores.max(axis=-1, keepdims=True) - low
    scaled = np.divide(scores - low, span, out=np.ones_like(scores), where=span > 0)  # all equal: equal weights
    return scaled / scaled.sum(axis=-1, keepdims=True)


class WinRateResult(BaseModel):
    scores: dict[str, float]
    weights: dict[str, float]  # the reviewer weights behind the scores
    iterations: int
    last_change: float  # largest change of a weight at the last iteration


def reviewer_roles(reviews: Reviews, fixed: dict[str, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """For each reviewer: its index among contestants (-1 if it is not one) and its fixed weight (nan if none)."""
    fixed = fixed or {}
    as_contestant = np.array([reviews.contestants.index(r) if r in reviews.contestants and r not in fixed else -1
                              for r in reviews.reviewers])
    fixed_weight = np.array([fixed.get(r, np.nan) for r in reviews.reviewers], dtype=float)
    free = (as_contestant < 0) & np.isnan(fixed_weight)
    fixed_weight[free] = 1.0 / len(reviews.reviewers)  # a reviewer we cannot score keeps the starting weight
    return as_contestant, fixed_weight


def iterate_weights(rates: np.ndarray, as_contestant: np.ndarray, fixed_weight: np.ndarray, weighted: bool,
                    start: np.ndarray | None = None, max_iterations: int = 100, tolerance: float = 1e-12):
    """The fixed point of PRD's Eq. 2, vectorised over any leading axes of ``rates`` [..., R, C].

    Returns scores [..., C], weights [..., R], iterations and the last change."""
    R = rates.shape[-2]
    weights = np.broadcast_to(np.full(R, 1.0 / R) if start is None else np.asarray(start, float), rates.shape[:-1]).copy()
    scorers = as_contestant >= 0
    weights[..., ~scorers] = fixed_weight[~scorers]
    present = ~np.isnan(rates)
    clean = np.where(present, rates, 0.0)
    change, iterations = 0.0, 0
    for iterations in range(1, (max_iterations if weighted else 1) + 1):
        mass = np.einsum("...r,...rc->...c", weights, present.astype(float))
        scores = np.einsum("...r,...rc->...c", weights, clean) / mass
        if not weighted:
            break
        new = weights.copy()
        if scorers.any():
            new[..., scorers] = min_max_normalise(scores[..., as_contestant[scorers]]) * (1.0 - fixed_weight[~scorers].sum())
        change = float(np.max(np.abs(new - weights)))
        weights = new
        if change <= tolerance:
            mass = np.einsum("...r,...rc->...c", weights, present.astype(float))
            scores = np.einsum("...r,...rc->...c", weights, clean) / mass
            break
    return scores, weights, iterations, change


def win_rate(reviews: Reviews, weighted: bool = False, fixed: dict[str, float] | None = None,
             start: dict[str, float] | None = None) -> WinRateResult:
    wins, battles = wins_and_battles(reviews)
    unreviewed = [c for c, n in zip(reviews.contestants, battles.sum(axis=0)) if n == 0]
    if unreviewed:
        raise ReviewError(f"nobody reviewed {', '.join(map(repr, unreviewed))}: no win rate can be computed")
    rates = np.divide(wins, battles, out=np.full_like(wins, np.nan), where=battles > 0)
    as_contestant, fixed_weight = reviewer_roles(reviews, fixed)
    start_weights = None if start is None else np.array([start.get(r, 1.0 / len(reviews.reviewers)) for r in reviews.reviewers])
    scores, weights, iterations, change = iterate_weights(rates, as_contestant, fixed_weight, weighted, start_weights)
    return WinRateResult(scores=dict(zip(reviews.contestants, scores.tolist())),
                         weights=dict(zip(reviews.reviewers, weights.tolist())), iterations=iterations, last_change=change)


def pairwise_matrix(reviews: Reviews, weights: dict[str, float] | None = None) -> np.ndarray:
    """M[i, j]: how often contestant i beat j (ties half), weighted by reviewer; nan where they never met."""
    C = len(reviews.contestants)
    w = np.ones(len(reviews)) if weights is None else np.array([weights[r] for r in reviews.reviewers])[reviews.reviewer]
    a_wins = (1.0 - reviews.score) / 2
    won = np.bincount(reviews.a * C + reviews.b, weights=w * a_wins, minlength=C * C)
    won += np.bincount(reviews.b * C + reviews.a, weights=w * (1 - a_wins), minlength=C * C)
    met = np.bincount(reviews.a * C + reviews.b, weights=w, minlength=C * C)
    met += np.bincount(reviews.b * C + reviews.a, weights=w, minlength=C * C)
    won, met = won.reshape(C, C), met.reshape(C, C)
    return np.divide(won, met, out=np.full_like(won, np.nan), where=met > 0)
