"""How each reviewer leans: towards the answer shown first, away from its own verdict when the
order is swapped, and towards its own answers.

Position bias is read from the reviews as they were given, before any calibration: a comparison
is one reviewer's reviews of one question and pair in one match and repeat, and each of its
orders has a verdict, the sign of the mean of that order's samples (score differences where
given), so every swap counts whatever the number of samples and repeats.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from .reviews import Reviews, group_ids, order_means, signs
from .winrate import wins_and_battles


class ReviewerBias(BaseModel):
    reviewer: str
    reviews: int
    first_shown_wins: float  # share of reviews won by the answer shown first (ties half); 0.5 is unbiased
    swapped_pairs: int  # comparisons (question, pair, match, repeat) reviewed in both orders
    flip_rate: float | None  # share of those whose verdict changes with the order
    self_preference: float | None  # own win rate by its own battles minus by the others'; None if not a contestant


def reviewer_bias(reviews: Reviews, battles: Reviews | None = None) -> list[ReviewerBias]:
    """Per reviewer of ``reviews`` (as given); self-preference from ``battles``, the verdicts peer
    rank counts (default: ``reviews.battles()``), which must have the same reviewers."""
    battles = reviews.battles() if battles is None else battles
    # A million reviews make each temporary below 8 MB: they are let go of as soon as they are used,
    # and the counts come first, so that their temporaries are gone before the comparisons' are made.
    wins, played = wins_and_battles(battles)
    rates = np.divide(wins, played, out=np.full_like(wins, np.nan), where=played > 0)
    pair = np.minimum(reviews.a, reviews.b)  # the pair as one number, lower code first: (lo, hi) in their order
    pair *= len(reviews.contestants)
    pair += np.maximum(reviews.a, reviews.b)
    group, first = group_ids(reviews.reviewer, reviews.question, pair, reviews.match, reviews.repeat)
    del pair
    turned = reviews.a > reviews.b  # shown the other way round from the pair's own (lower code first)
    value = np.where(np.isnan(reviews.difference), reviews.score, reviews.difference)
    oriented = np.where(turned, -value, value)  # > 0: the higher-coded contestant is better
    del value
    means = order_means(group, turned, oriented, first.size)  # [comparisons, 2 orders]
    del group, oriented, turned
    swapped = ~np.isnan(means).any(axis=1)
    np.nan_to_num(means, copy=False)
    flipped = signs(means[:, 0]) != signs(means[:, 1])
    del means
    owner = reviews.reviewer[first]  # each comparison's reviewer
    out = []
    for r, name in enumerate(reviews.reviewers):
        mine = reviews.reviewer == r
        both = flipped[swapped & (owner == r)]
        self_pref = None
        if name in reviews.contestants:
            c = reviews.contestants.index(name)
            others = [rates[o, c] for o in range(len(reviews.reviewers)) if o != r and not np.isnan(rates[o, c])]
            if not np.isnan(rates[r, c]) and others:
                self_pref = float(rates[r, c] - np.mean(others))
        out.append(ReviewerBias(
            reviewer=name, reviews=int(mine.sum()), first_shown_wins=float(((1.0 - reviews.score[mine]) / 2).mean()),
            swapped_pairs=int(both.size), flip_rate=float(np.mean(both)) if both.size else None, self_preference=self_pref,
        ))
    return out
