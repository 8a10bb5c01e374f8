"""Bradley–Terry strengths by maximum likelihood, on the Elo scale (mean 1000, 400 per factor of 10 in odds).

When the data separate the contestants (some group never lost, or never won, against the
rest), the likelihood grows without bound as their strengths part, and no maximum exists.
Then, and only then, the fit adds a stated prior: ``PRIOR_TIES`` virtual ties between every
two contestants, which pulls strengths toward each other just enough to be finite.
"""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel

from .reviews import Reviews

ELO_SCALE = 400 / np.log(10)
PRIOR_TIES = 1.0  # virtual ties between every two contestants, added only when the data separate


def pair_counts(reviews: Reviews, weights: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray]:
    """wins[i, j]: i beat j; ties[i, j]: they tied (symmetric). Weighted by reviewer when ``weights`` is given."""
    C = len(reviews.contestants)
    w = np.ones(len(reviews)) if weights is None else weights[reviews.reviewer]
    a_won, b_won, tied = reviews.score == -1, reviews.score == 1, reviews.score == 0
    wins = np.bincount(reviews.a * C + reviews.b, weights=w * a_won, minlength=C * C)
    wins += np.bincount(reviews.b * C + reviews.a, weights=w * b_won, minlength=C * C)
    ties = np.bincount(reviews.a * C + reviews.b, weights=w * tied, minlength=C * C).reshape(C, C)
    return wins.reshape(C, C), ties + ties.T


def fit_half_wins(wins: np.ndarray, ties: np.ndarray, iterations: int = 10_000, tolerance: float = 1e-10) -> np.ndarray:
    """Ties as half a win each way; Hunter's MM algorithm, vectorised over leading axes [..., C, C].
    Returns log-strengths centred on zero."""
    w = wins + ties / 2
    games = w + np.swapaxes(w, -1, -2)
    total_wins = w.sum(axis=-1)
    p = np.ones(w.shape[:-1])
    for _ in range(iterations):
        denominator = (games / (p[..., :, None] + p[..., None, :])).sum(axis=-1)
        new = np.divide(total_wins, denominator, out=np.full_like(p, 1e-12), where=denominator > 0)
        new = np.maximum(new, 1e-12)
        new /= np.exp(np.log(new).mean(axis=-1, keepdims=True))
        if np.max(np.abs(np.log(new) - np.log(p))) < tolerance:
            p = new
            break
        p = new
    theta = np.log(p)
    return theta - theta.mean(axis=-1, keepdims=True)


def fit_davidson(wins: np.ndarray, ties: np.ndarray) -> tuple[np.ndarray, float]:
    """Davidson's tie model: P(i beats j) ∝ π_i, P(tie) ∝ ν·sqrt(π_i π_j). Returns (centred log-strengths, ν)."""
    from scipy.optimize import minimize  # a third of a second to import, for this tie model only

    C = wins.shape[0]
    upper = np.triu(np.ones((C, C), dtype=bool), 1)
    t = ties / 2  # each tie was counted in both directions

    def nll(x):
        theta, log_nu = x[:C], x[C]
        ti, tj = theta[:, None], theta[None, :]
        tie_term = log_nu + (ti + tj) / 2
        log_norm = np.logaddexp(np.logaddexp(ti, tj), tie_term)
        ll = (wins * (ti - log_norm)).sum() + (t[upper] * (tie_term - log_norm)[upper]).sum()
        return -ll + 1e-6 * (theta ** 2).sum()  # a whisper of shrinkage keeps unbeaten contestants finite

    result = minimize(nll, np.zeros(C + 1), method="L-BFGS-B")
    theta = result.x[:C]
    return theta - theta.mean(), float(np.exp(result.x[C]))


class Separation(BaseModel):
    """Groups of contestants (by index) that the results split apart: ``unbeaten`` never lost to
    anyone outside their group, ``winless`` never beat (nor tied) anyone outside theirs."""

    unbeaten: list[list[int]]
    winless: list[list[int]]


def separation(wins: np.ndarray, ties: np.ndarray) -> Separation | None:
    """None when maximum likelihood has a finite answer: every contestant that played can reach
    every other through a chain of wins (a tie counts as half a win both ways)."""
    half = wins + ties / 2
    played = np.flatnonzero((half + half.T).sum(axis=1) > 0)
    if played.size < 2:
        return None
    beat = half[np.ix_(played, played)] > 0
    if (beat | np.eye(played.size, dtype=bool)).all():  # everyone beat everyone: one group, no search needed
        return None  # (the usual case, asked once per bootstrap sample)
    groups, label = _strong_components(beat)
    if groups == 1:
        return None
    member_of = np.eye(groups)[label]  # [played, groups]
    between = member_of.T @ beat @ member_of > 0  # [x, y]: someone in group x beat someone in group y
    np.fill_diagonal(between, False)
    members = [played[label == g].tolist() for g in range(groups)]
    return Separation(unbeaten=[members[g] for g in range(groups) if not between[:, g].any()],
                      winless=[members[g] for g in range(groups) if not between[g].any()])


def _strong_components(beat: np.ndarray) -> tuple[int, np.ndarray]:
    """The strongly connected components of the graph ``beat`` [n, n] (i -> j: i beat j): how many,
    and each node's, numbered in the order of their first members. Warshall's closure, one numpy
    step per node: a few µs for a panel of models, a third of a second at a thousand contestants;
    scipy's search cost 0.3 s to import on every `arena rank` whose data are not all connected."""
    reach = beat | np.eye(beat.shape[0], dtype=bool)
    for k in range(beat.shape[0]):
        reach |= reach[:, k:k + 1] & reach[k:k + 1, :]
    first = np.argmax(reach & reach.T, axis=1)  # each node's first member of its component
    leaders, label = np.unique(first, return_inverse=True)
    return len(leaders), label


def with_prior(ties: np.ndarray) -> np.ndarray:
    """``ties`` plus PRIOR_TIES between every two contestants (counted both ways, as pair_counts does)."""
    C = ties.shape[-1]
    return ties + PRIOR_TIES * (1 - np.eye(C))


class BradleyTerryResult(BaseModel):
    scores: dict[str, float]
    separation: Separation | None = None  # set when the data separate and the prior was added


def fit(reviews: Reviews, ties: Literal["half", "davidson"] = "half",
        weights: dict[str, float] | None = None) -> BradleyTerryResult:
    w = None if weights is None else np.array([weights[r] for r in reviews.reviewers])
    wins, tied = pair_counts(reviews, w)
    split = separation(wins, tied)
    if split is not None:
        tied = with_prior(tied)
    theta = fit_half_wins(wins, tied) if ties == "half" else fit_davidson(wins, tied)[0]
    return BradleyTerryResult(scores=dict(zip(reviews.contestants, (1000 + ELO_SCALE * theta).tolist())),
                              separation=split)


def bradley_terry(reviews: Reviews, ties: Literal["half", "davidson"] = "half",
                  weights: dict[str, float] | None = None) -> dict[str, float]:
    return fit(reviews, ties, weights).scores
