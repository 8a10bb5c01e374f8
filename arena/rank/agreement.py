"""Agreement with reference labels (human raters, say): per example and per ranking.

An example is judged in one of two units:

- ``"order"`` (PRD's Table 5): every presentation of a pair is an example. The reviewers'
  verdict on (question, A shown first, B) is the sign of their (weighted) scores for that
  order, and it is checked against the reference's verdict on the pair, both read as
  "first shown better / tie / second shown better", as the reviewers gave them.
- ``"pair"``: both presentation orders are merged first, one example per (question, pair),
  read as "this contestant better / tie / that one better" in the contestants' name order.

Accuracy does not depend on the reading; the kappas do, through the share of each label,
which is why the order unit keeps the reviewers' own. The reference's verdict is always per
pair: for a pool of votes, their majority.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Literal

import numpy as np
from pydantic import BaseModel

from .reviews import Reviews

Unit = Literal["order", "pair"]
UNITS: tuple[Unit, ...] = ("order", "pair")
# what an agreement table's examples are, for its title in the terminal and the report
UNIT_TITLES = {"order": "per presented order of a pair, as PRD's Table 5",
               "pair": "pair verdicts: one per question and pair, both presentation orders merged (as BPC calibrates "
                       "them)"}


def verdicts(reviews: Reviews, weights: dict[str, float] | None = None, unit: Unit = "pair") -> dict[tuple[int, ...], int]:
    """The sign of the (weighted) sum of the reviews of each example. Per pair: keyed (question,
    low, high) by contestant code, +1 when the higher-coded contestant is better. Per order:
    keyed (question, low, high, shown first), in the reviews' own terms (-1: the answer shown
    first is better). For a pool of votes per pair this is PRD's human majority."""
    if unit not in UNITS:
        raise ValueError(f"unknown agreement unit {unit!r}; one of {', '.join(UNITS)}")
    C = len(reviews.contestants)
    lo, hi = np.minimum(reviews.a, reviews.b), np.maximum(reviews.a, reviews.b)
    oriented = np.where(reviews.a == lo, reviews.score, -reviews.score).astype(float)
    w = np.ones(len(reviews)) if weights is None else np.array([weights[r] for r in reviews.reviewers])[reviews.reviewer]
    key = (reviews.question * C + lo) * C + hi
    if unit == "order":
        key, oriented = key * C + reviews.a, reviews.score.astype(float)
    keys, inverse = np.unique(key, return_inverse=True)
    total = np.bincount(inverse, weights=w * oriented)
    sign = np.sign(np.round(total, 12)).astype(int)
    if unit == "order":
        return {(int(k // C ** 3), int(k // (C * C) % C), int(k // C % C), int(k % C)): int(s) for k, s in zip(keys, sign)}
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


def panel_agreement(items: Sequence[Sequence[Hashable]]) -> float | None:
    """Fleiss' kappa of a panel: ``items`` lists, per item judged, the members' verdicts (a member
    without one is left out of that item). Members may differ in number from item to item, as
    when one gave no verdict: each item's agreement is over its own raters, and the categories'
    shares are over all ratings. Items with fewer than two verdicts say nothing about agreement and
    are skipped; None when none is left."""
    rated = [list(item) for item in items if len(item) >= 2]
    if not rated:
        return None
    categories = sorted({v for item in rated for v in item}, key=repr)
    counts = np.array([[item.count(c) for c in categories] for item in rated], dtype=float)  # [items, categories]
    n = counts.sum(axis=1)
    p_item = (counts * (counts - 1)).sum(axis=1) / (n * (n - 1))
    p_cat = counts.sum(axis=0) / counts.sum()
    expected = float((p_cat ** 2).sum())
    return 1.0 if expected == 1 else (float(p_item.mean()) - expected) / (1 - expected)


class ExampleAgreement(BaseModel):
    unit: Unit = "pair"
    examples: int
    accuracy: float
    cohen_kappa: float
    fleiss_kappa: float


class RankingAgreement(BaseModel):
    spearman: float
    kendall: float


def example_agreement(predicted: dict, reference: dict) -> ExampleAgreement:
    """``predicted`` per pair or per order (see ``verdicts``), ``reference`` per pair: each predicted
    example is checked against the reference's verdict on its pair, read the way the example is.
    Cohen's kappa and Fleiss' kappa treat the prediction and the reference as two raters."""
    shared = sorted(k for k in predicted if k[:3] in reference)
    if not shared:
        raise ValueError("no (question, pair) is judged by both")
    x = np.array([predicted[k] for k in shared])
    # per order: the reference's "+1, the higher code is better" is "+1, the second shown is better"
    # exactly when the lower code was shown first
    y = np.array([reference[k[:3]] if len(k) == 3 or k[3] == k[1] else -reference[k[:3]] for k in shared])
    return ExampleAgreement(unit="order" if len(shared[0]) == 4 else "pair", examples=len(shared),
                            accuracy=float(np.mean(x == y)), cohen_kappa=cohen_kappa(x, y),
                            fleiss_kappa=fleiss_kappa(np.stack([x, y], axis=1)))


def ranking_agreement(scores: dict[str, float], reference: dict[str, float]) -> RankingAgreement:
    names = sorted(set(scores) & set(reference))
    x, y = [scores[n] for n in names], [reference[n] for n in names]
    from scipy import stats  # a quarter of a second to import, for runs with a reference only

    return RankingAgreement(spearman=float(stats.spearmanr(x, y).statistic), kendall=float(stats.kendalltau(x, y).statistic))
