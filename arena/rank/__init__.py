"""Peer rank: turning review tuples and payoffs into leaderboards people can trust (PRD, DeepEval)."""

from __future__ import annotations

from typing import Literal

import numpy as np
from pydantic import BaseModel

from . import bootstrap as bs
from .agreement import ExampleAgreement, RankingAgreement, example_agreement, ranking_agreement, verdicts
from .bias import ReviewerBias, reviewer_bias
from .bradley_terry import bradley_terry
from .elo import elo
from .reviews import ReviewError, Reviews
from .winrate import pairwise_matrix, win_rate

Method = Literal["winrate", "elo", "bt"]
METHODS: tuple[Method, ...] = ("winrate", "elo", "bt")


class MethodResult(BaseModel):
    method: Method
    weighted: bool
    scores: dict[str, float]
    low: dict[str, float]  # bootstrap 95% interval, questions resampled
    high: dict[str, float]
    weights: dict[str, float] | None = None  # reviewer weights behind the scores
    iterations: int | None = None  # win rate: iterations to the fixed point; Elo: passes
    last_change: float | None = None
    spread: dict[str, float] | None = None  # Elo: standard deviation over orderings

    def ranking(self) -> list[str]:
        return sorted(self.scores, key=lambda c: -self.scores[c])


class Agreement(BaseModel):
    method: Method
    examples: ExampleAgreement
    ranking: RankingAgreement


class Leaderboard(BaseModel):
    contestants: list[str]
    reviewers: list[str]
    reviews: int
    reference: str | None
    methods: list[MethodResult]
    pairwise: list[list[float | None]]  # win rate of row over column, ties half
    bias: list[ReviewerBias]
    agreement: list[Agreement]


def _fit(method: Method, reviews: Reviews, weighted: bool, fixed, orderings: int, samples: int, seed: int) -> MethodResult:
    rng = np.random.default_rng(seed)
    counts = bs.question_counts(reviews, samples, rng)
    names = reviews.contestants
    if method == "winrate":
        found = win_rate(reviews, weighted, fixed)
        low, high = bs.interval(bs.win_rate_samples(reviews, counts, weighted, fixed))
        extra = dict(weights=found.weights, iterations=found.iterations, last_change=found.last_change)
    elif method == "elo":
        found = elo(reviews, weighted, fixed, orderings=orderings, seed=seed)
        w = np.array([found.weights[r] for r in reviews.reviewers])
        low, high = bs.interval(bs.elo_samples(reviews, counts, w, rng))
        extra = dict(weights=found.weights, iterations=found.passes, last_change=found.last_change, spread=found.spread)
    else:
        weights = win_rate(reviews, True, fixed).weights if weighted else None
        found_scores = bradley_terry(reviews, weights=weights)
        w = None if weights is None else np.array([weights[r] for r in reviews.reviewers])
        low, high = bs.interval(bs.bradley_terry_samples(reviews, counts, w))
        return MethodResult(method=method, weighted=weighted, scores=found_scores, low=dict(zip(names, low.tolist())),
                            high=dict(zip(names, high.tolist())), weights=weights)
    return MethodResult(method=method, weighted=weighted, scores=found.scores, low=dict(zip(names, low.tolist())),
                        high=dict(zip(names, high.tolist())), **extra)


def leaderboard(
    reviews: Reviews,
    methods: tuple[Method, ...] = METHODS,
    reviewers: list[str] | None = None,
    weighted: bool = False,
    fixed: dict[str, float] | None = None,
    reference: str | None = "human",
    orderings: int = 1000,
    bootstrap: int = 200,
    seed: int = 0,
) -> Leaderboard:
    """Rank the contestants from ``reviewers``' reviews (default: everyone but the ``reference``),
    and, when the reference reviewer (human raters) is present, measure agreement with it."""
    reference = reference if reference in reviews.reviewers else None
    chosen = reviewers or [r for r in reviews.reviewers if r != reference]
    if not chosen:
        raise ReviewError("no reviewers left to rank with")
    selected = reviews.by(chosen).collapse_votes()
    results = [_fit(m, selected, weighted, fixed, orderings, bootstrap, seed) for m in methods]
    agreement = []
    if reference is not None and reference not in chosen:
        truth = reviews.by([reference]).collapse_votes()
        truth_verdicts = verdicts(truth)
        for result in results:
            vote_weights = result.weights if result.weighted and result.method == "winrate" else None
            truth_scores = _fit(result.method, truth, False, None, orderings, 2, seed).scores
            agreement.append(Agreement(
                method=result.method,
                examples=example_agreement(verdicts(selected, vote_weights), truth_verdicts),
                ranking=ranking_agreement(result.scores, truth_scores),
            ))
    matrix = pairwise_matrix(selected)
    return Leaderboard(
        contestants=selected.contestants, reviewers=selected.reviewers, reviews=len(selected), reference=reference,
        methods=results, pairwise=[[None if np.isnan(v) else float(v) for v in row] for row in matrix],
        bias=reviewer_bias(selected), agreement=agreement,
    )


__all__ = ["Leaderboard", "MethodResult", "ReviewError", "Reviews", "leaderboard"]
