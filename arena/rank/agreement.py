"""Agreement with reference labels (human raters, say): per example and per ranking."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel
from scipy import stats

from .reviews import Reviews


def verdicts(reviews: Reviews, weights: dict[str, float] | None = None) -> dict[tuple[int, int, int], int]:
    """One verdict per (question, unordered pair): the sign of the (weighted) mean of the
    reviews, oriented so +1 means the higher-coded contestant is better. For a pool of
    votes this is PRD's human majority."""
    C = len(reviews.contestants)
    lo, hi = np.minimum(reviews.a, reviews.b), np.maximum(reviews.a, reviews.b)
    oriented = np.where(reviews.a == lo, reviews.score, -reviews.score).astype(float)
    w = np.ones(len(reviews)) if weights is None else np.array([weights[r] for r in reviews.reviewers])[reviews.reviewer]
    key = (reviews.question * C + lo) * C + hi
    keys, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse, weights=w * oriented)
    sign = np.sign(np.round(total, 12)).astype(int)
    return {(int(k // (C * C)), int(k // C % C), int(k % C)): int(s) for k, s in zip(keys, sign)}


def cohen_kappa(x: np.ndarray, y: np.ndarray) -> float:
    categories = np.union1d(x, y)
    observed = float(np.mean(x == y))
    expected = float(sum(np.mean(x == c) * np.mean(y == c) for c in categories))
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def fleiss_kappa(ratings: np.ndarray) -> float:
    """ratings [items, raters] of category labels."""
    categories = np.unique(ratings)
    counts = np.stack([(ratings == c).sum(axis=1) for c in categories], axis=1).astype(float)  # [items, categories]
    n = ratings.shape[1]
    p_item = ((counts * (counts - 1)).sum(axis=1)) / (n * (n - 1))
    p_cat = counts.sum(axis=0) / counts.sum()
    expected = float((p_cat ** 2).sum())
    return 1.0 if expected == 1 else (float(p_item.mean()) - expected) / (1 - expected)


class ExampleAgreement(BaseModel):
    examples: int
    accuracy: float
    cohen_kappa: float
    fleiss_kappa: float


class RankingAgreement(BaseModel):
    spearman: float
    kendall: float


def example_agreement(predicted: dict, reference: dict) -> ExampleAgreement:
    shared = sorted(set(predicted) & set(reference))
    if not shared:
        raise ValueError("no (question, pair) is judged by both")
    x = np.array([predicted[k] for k in shared])
    y = np.array([reference[k] for k in shared])
    return ExampleAgreement(examples=len(shared), accuracy=float(np.mean(x == y)), cohen_kappa=cohen_kappa(x, y),
                            fleiss_kappa=fleiss_kappa(np.stack([x, y], axis=1)))


def ranking_agreement(scores: dict[str, float], reference: dict[str, float]) -> RankingAgreement:
    names = sorted(set(scores) & set(reference))
    x, y = [scores[n] for n in names], [reference[n] for n in names]
    return RankingAgreement(spearman=float(stats.spearmanr(x, y).statistic), kendall=float(stats.kendalltau(x, y).statistic))
