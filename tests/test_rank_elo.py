"""The Elo loop: the compiled loop and the numpy fallback agree, the shuffles are uniform, and a
replay with weights does what PRD's Alg. 1 says, checked by hand."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest

from arena.rank import bootstrap as bs
from arena.rank import elo_loop
from arena.rank.elo import elo, starting_weights
from arena.rank.reviews import Reviews

needs_numba = pytest.mark.skipif(not elo_loop.COMPILED, reason="numba is not installed: only the fallback can run")


def random_reviews(n: int, seed: int = 0) -> Reviews:
    rng = np.random.default_rng(seed)
    names = ["A", "B", "C", "D", "judge"]
    rows = []
    for i in range(n):
        a, b = rng.choice(4, 2, replace=False)
        rows.append((f"q{i % 17}", names[a], names[b], names[rng.integers(5)], int(rng.choice([-1, 0, 1], p=[.5, .2, .3]))))
    return Reviews.from_rows(rows)


@needs_numba
def test_compiled_and_numpy_loops_agree():
    reviews = random_reviews(600)
    rng = np.random.default_rng(1)
    draws = rng.random((7, len(reviews)))
    compiled = elo_loop.shuffled(np.arange(len(reviews)), draws, compiled=True)
    fallback = elo_loop.shuffled(np.arange(len(reviews)), draws, compiled=False)
    assert (compiled == fallback).all() and (np.sort(compiled, axis=1) == np.arange(len(reviews))).all()
    start, as_contestant = starting_weights(reviews, {"judge": 0.5})
    for passes in (1, 4):
        found = [elo_loop.replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, compiled, start, as_contestant,
                                 len(reviews.contestants), passes, compiled=flag) for flag in (True, False)]
        for x, y in zip(*found):
            assert x == pytest.approx(y, abs=1e-9)
    assert found[0][1][:, reviews.reviewers.index("judge")] == pytest.approx(0.5)  # a fixed weight stays fixed


@needs_numba
def test_elo_gives_the_same_numbers_without_numba(monkeypatch):
    reviews = random_reviews(300, seed=2)
    with_numba = [elo(reviews, weighted=w, orderings=30, seed=4, scheme=s) for w, s in ((False, "ordering"),
                                                                                      (True, "ordering"), (True, "mean"))]
    monkeypatch.setattr(elo_loop, "COMPILED", False)
    without = [elo(reviews, weighted=w, orderings=30, seed=4, scheme=s) for w, s in ((False, "ordering"),
                                                                                  (True, "ordering"), (True, "mean"))]
    for x, y in zip(with_numba, without):
        assert x.scores == pytest.approx(y.scores, abs=1e-9) and x.weights == pytest.approx(y.weights, abs=1e-9)


@pytest.mark.parametrize("compiled", [True, False])
def test_the_shuffle_is_uniform(compiled):
    if compiled and not elo_loop.COMPILED:
        pytest.skip("numba is not installed")
    draws = np.random.default_rng(3).random((12_000, 3))
    counts = Counter(map(tuple, elo_loop.shuffled(np.array([0, 1, 2]), draws, compiled=compiled)))
    assert len(counts) == 6
    assert all(abs(c - 2000) < 5 * math.sqrt(2000 * 5 / 6) for c in counts.values())  # within 5 sigma


def test_a_weighted_replay_by_hand():
    # two contestants who also review: X reviews "X beats Y" twice, Y reviews "Y beats X" once
    reviews = Reviews.from_rows([("q1", "X", "Y", "X", -1), ("q2", "Y", "X", "Y", -1), ("q3", "X", "Y", "X", -1)])
    start, as_contestant = starting_weights(reviews, None)
    order = np.array([[0, 1, 2]])

    def expected_a(ra, rb):
        return 1 / (1 + 10 ** ((rb - ra) / 400))

    # pass 1, every weight 1
    x = y = 1000.0
    for winner, w in (("X", 1), ("Y", 1), ("X", 1)):
        gain = w * 32 * ((1 if winner == "X" else 0) - expected_a(x, y))
        x, y = x + gain, y - gain
    ratings, weights, change = elo_loop.replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start,
                                               as_contestant, 2, passes=1)
    assert ratings[0] == pytest.approx([x, y]) and weights[0] == pytest.approx([1, 1])
    # pass 2: X rated above Y -> min-max 1 and 0, mean 1 -> X 2, Y 0: only X's reviews count, at 2K
    x2 = y2 = 1000.0
    for winner, w in (("X", 2), ("Y", 0), ("X", 2)):
        gain = w * 32 * ((1 if winner == "X" else 0) - expected_a(x2, y2))
        x2, y2 = x2 + gain, y2 - gain
    ratings, weights, change = elo_loop.replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start,
                                               as_contestant, 2, passes=2)
    assert ratings[0] == pytest.approx([x2, y2]) and weights[0] == pytest.approx([2, 0]) and change[0] == pytest.approx(1)


def test_the_bootstrap_replays_resampled_questions():
    reviews = random_reviews(400, seed=5)
    start, as_contestant = starting_weights(reviews, None)
    everyone_once = np.ones((3, len(reviews.questions)))  # the original sample, three times, in three orders
    samples = bs.elo_samples(reviews, everyone_once, np.random.default_rng(0), start, np.full_like(as_contestant, -1))
    assert samples.shape == (3, 4) and samples.sum(axis=1) == pytest.approx(4000)  # Elo only moves points around
    assert len({tuple(np.round(s, 6)) for s in samples}) == 3  # each sample in its own order
    only_q0 = np.zeros((1, len(reviews.questions)))
    only_q0[0, 0] = 2  # question q0 twice, nothing else
    picked = bs.elo_samples(reviews, only_q0, np.random.default_rng(0), start, np.full_like(as_contestant, -1))
    in_q0 = reviews.question == 0
    moved = set(reviews.a[in_q0]) | set(reviews.b[in_q0])
    assert all((picked[0, c] != 1000) == (c in moved) for c in range(4))
