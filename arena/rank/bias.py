"""How each reviewer leans: towards the answer shown first, away from its own verdict when the
order is swapped, and towards its own answers."""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from .reviews import Reviews
from .winrate import wins_and_battles


class ReviewerBias(BaseModel):
    reviewer: str
    reviews: int
    first_shown_wins: float  # share of reviews won by the answer shown first (ties half); 0.5 is unbiased
    swapped_pairs: int  # (question, pair) reviewed in both orders
    flip_rate: float | None  # share of those whose verdict changes with the order
    self_preference: float | None  # own win rate by its own reviews minus by the others'; None if not a contestant


def reviewer_bias(reviews: Reviews) -> list[ReviewerBias]:
    C = len(reviews.contestants)
    lo, hi = np.minimum(reviews.a, reviews.b), np.maximum(reviews.a, reviews.b)
    verdict = np.where(reviews.a == lo, reviews.score, -reviews.score)  # +1: the higher-coded contestant is better
    shown_first_low = (reviews.a == lo).astype(np.int64)
    wins, battles = wins_and_battles(reviews)
    rates = np.divide(wins, battles, out=np.full_like(wins, np.nan), where=battles > 0)
    out = []
    for r, name in enumerate(reviews.reviewers):
        mine = reviews.reviewer == r
        first = float(((1.0 - reviews.score[mine]) / 2).mean())
        key = (reviews.question[mine] * C + lo[mine]) * C + hi[mine]
        both = np.zeros(0)
        if mine.any():
            # for each (question, pair): verdict when the lower code was shown first, and when it was second
            slot = key * 2 + shown_first_low[mine]
            order = np.argsort(slot, kind="stable")
            slot_sorted, v_sorted = slot[order], verdict[mine][order]
            unique_slots, first_index = np.unique(slot_sorted, return_index=True)
            pair_key = unique_slots // 2
            shared, counts = np.unique(pair_key, return_counts=True)
            twice = shared[counts == 2]
            if twice.size:
                v = v_sorted[first_index]
                in_both = np.isin(pair_key, twice)
                v_pairs = v[in_both].reshape(-1, 2)
                both = v_pairs[:, 0] != v_pairs[:, 1]
        self_pref = None
        if name in reviews.contestants:
            c = reviews.contestants.index(name)
            others = [rates[o, c] for o in range(len(reviews.reviewers)) if o != r and not np.isnan(rates[o, c])]
            if not np.isnan(rates[r, c]) and others:
                self_pref = float(rates[r, c] - np.mean(others))
        out.append(ReviewerBias(
            reviewer=name, reviews=int(mine.sum()), first_shown_wins=first, swapped_pairs=int(np.size(both)),
            flip_rate=float(np.mean(both)) if np.size(both) else None, self_preference=self_pref,
        ))
    return out
