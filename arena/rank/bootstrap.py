"""Bootstrap intervals by resampling questions, for every method.

Reviews are first summed per question, so a bootstrap sample is a matrix
product of question counts with those sums, not a pass over the reviews.
"""

from __future__ import annotations

import numpy as np

from .bradley_terry import ELO_SCALE, fit_half_wins, separation, with_prior
from .elo_loop import numpy_cost, pack, replay, shuffled, shuffled_rows, takes_compiled
from .reviews import Reviews
from .winrate import iterate_weights, reviewer_roles


def question_counts(reviews: Reviews, samples: int, rng: np.random.Generator) -> np.ndarray:
    Q = len(reviews.questions)
    return rng.multinomial(Q, np.full(Q, 1.0 / Q), size=samples).astype(float)  # [B, Q]


def _per_question(reviews: Reviews, cell: np.ndarray, values: np.ndarray, cells: int) -> np.ndarray:
    Q = len(reviews.questions)
    return np.bincount(reviews.question * cells + cell, weights=values, minlength=Q * cells).reshape(Q, cells)


def win_rate_samples(reviews: Reviews, counts: np.ndarray, weighted: bool, fixed: dict[str, float] | None) -> np.ndarray:
    """Scores [B, C] of the (weighted) win rate on each bootstrap sample."""
    R, C = len(reviews.reviewers), len(reviews.contestants)
    a_wins = (1.0 - reviews.score) / 2
    wins = _per_question(reviews, reviews.reviewer * C + reviews.a, a_wins, R * C)
    wins += _per_question(reviews, reviews.reviewer * C + reviews.b, 1.0 - a_wins, R * C)
    ones = np.ones(len(reviews))
    battles = _per_question(reviews, reviews.reviewer * C + reviews.a, ones, R * C)
    battles += _per_question(reviews, reviews.reviewer * C + reviews.b, ones, R * C)
    w, n = (counts @ wins).reshape(-1, R, C), (counts @ battles).reshape(-1, R, C)
    rates = np.divide(w, n, out=np.full_like(w, np.nan), where=n > 0)
    as_contestant, fixed_weight = reviewer_roles(reviews, fixed)
    scores, *_ = iterate_weights(rates, as_contestant, fixed_weight, weighted)
    return scores


def bradley_terry_samples(reviews: Reviews, counts: np.ndarray, weights: np.ndarray | None = None
                          ) -> tuple[np.ndarray, int]:
    """Elo-scale Bradley–Terry strengths [B, C] (ties as half wins) on each bootstrap sample, and how
    many samples separate (those are fitted with the prior of ``bradley_terry.with_prior``)."""
    C = len(reviews.contestants)
    w = np.ones(len(reviews)) if weights is None else weights[reviews.reviewer]
    won_a, won_b, tied = w * (reviews.score == -1), w * (reviews.score == 1), w * (reviews.score == 0)
    wins = _per_question(reviews, reviews.a * C + reviews.b, won_a, C * C)
    wins += _per_question(reviews, reviews.b * C + reviews.a, won_b, C * C)
    ties = _per_question(reviews, reviews.a * C + reviews.b, tied, C * C)
    ties += _per_question(reviews, reviews.b * C + reviews.a, tied, C * C)
    wins, ties = (counts @ wins).reshape(-1, C, C), (counts @ ties).reshape(-1, C, C)
    split = np.array([separation(w_, t_) is not None for w_, t_ in zip(wins, ties)], dtype=bool)
    ties[split] = with_prior(ties[split])
    theta = fit_half_wins(wins, ties)
    return 1000 + ELO_SCALE * theta, int(split.sum())


SAMPLES_AT_ONCE = 64  # compiled: samples replayed together, their orders a few MB for 10,000 reviews


def elo_samples(reviews: Reviews, counts: np.ndarray, rng: np.random.Generator, start: np.ndarray,
                as_contestant: np.ndarray, passes: int = 1, k: float = 32, initial: float = 1000,
                scale: float = 400, compiled: bool | None = None) -> np.ndarray:
    """Elo [B, C] on each bootstrap sample, fed its reviews in one random order and replayed
    ``passes`` times as ``elo_loop.replay`` does (``compiled``: which loop, as there). Compiled,
    ``SAMPLES_AT_ONCE`` samples are held at a time, so memory stays near that many copies of the
    reviews' indices whatever the number of samples; in numpy (samples too small to be worth
    loading the compiled loop), all the samples go side by side."""
    index = np.int32 if len(reviews) < 2 ** 31 else np.int64  # a sample's indices are most of the memory
    by_question = np.argsort(reviews.question, kind="stable").astype(index)
    per_question = np.bincount(reviews.question, minlength=len(reviews.questions))
    starts = np.concatenate([[0], np.cumsum(per_question)[:-1]])
    whole = counts.astype(np.int64)
    sizes = whole @ per_question
    out = np.empty((counts.shape[0], len(reviews.contestants)))
    compiled = takes_compiled(numpy_cost(int(sizes.max(initial=0)) * passes, len(sizes)), compiled)
    packed = pack(reviews.a, reviews.b, reviews.score, reviews.reviewer) if compiled else None

    def picked(row: np.ndarray) -> np.ndarray:
        """The indices of the reviews a sample's question counts pick, question by question."""
        chosen = np.repeat(np.arange(row.size), row)
        lengths = per_question[chosen]
        # the position of each picked review in by_question: its question's start plus its rank within it
        at = np.repeat((starts[chosen] - np.concatenate([[0], np.cumsum(lengths)[:-1]])).astype(index), lengths)
        at += np.arange(at.size, dtype=index)
        return by_question[at]

    def elo_of(order: np.ndarray) -> np.ndarray:
        return replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start, as_contestant,
                      len(reviews.contestants), passes, k, initial, scale, compiled=compiled, packed=packed)[0]

    if compiled:
        # A few dozen samples at a time, each in its own random order, padded with -1 (which the replay
        # skips): replayed side by side, their update chains overlap, where one sample alone waits on
        # each exponential in turn (a third of the speed).
        for first in range(0, len(whole), SAMPLES_AT_ONCE):
            rows = whole[first:first + SAMPLES_AT_ONCE]
            order = np.full((len(rows), int(sizes[first:first + len(rows)].max(initial=0))), -1, dtype=index)
            for s, row in enumerate(rows):
                chosen = picked(row)
                order[s, :chosen.size] = shuffled(chosen, rng.random((1, chosen.size)), compiled=True)[0]
            out[first:first + len(rows)] = elo_of(order)
        return out
    # numpy takes only samples x reviews of at most a few million cells (the budget): they fit side by side
    order = np.full((len(sizes), int(sizes.max(initial=0))), -1, dtype=index)
    draws = np.zeros(order.shape)
    for s, row in enumerate(whole):  # the same draws, in the same order, as one sample at a time
        chosen = picked(row)
        order[s, :chosen.size] = chosen
        draws[s, :chosen.size] = rng.random(chosen.size)
    out[:] = elo_of(shuffled_rows(order, sizes, draws))
    return out


def interval(samples: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    low, high = np.nanpercentile(samples, [2.5, 97.5], axis=0)
    return low, high
