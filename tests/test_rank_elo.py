"""The Elo loop: the compiled loop and the numpy fallback agree, the shuffles are uniform, and a
replay with weights does what PRD's Alg. 1 says, checked by hand."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from collections import Counter
from pathlib import Path

import numpy as np
import pytest

from arena.rank import bootstrap as bs
from arena.rank import elo_loop
from arena.rank.board import leaderboard
from arena.rank.elo import elo, starting_weights
from arena.rank.reviews import Reviews

needs_numba = pytest.mark.skipif(not elo_loop.COMPILED, reason="numba is not installed: only the fallback can run")


def random_reviews(n: int, seed: int = 0, questions: int = 17) -> Reviews:
    rng = np.random.default_rng(seed)
    names = ["A", "B", "C", "D", "judge"]
    rows = []
    for i in range(n):
        a, b = rng.choice(4, 2, replace=False)
        rows.append((f"q{i % questions}", names[a], names[b], names[rng.integers(5)],
                     int(rng.choice([-1, 0, 1], p=[.5, .2, .3]))))
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


def test_rows_of_different_lengths_are_shuffled_as_each_alone():
    rng = np.random.default_rng(6)
    lengths = np.array([5, 9, 1, 9, 0, 7])
    draws = rng.random((len(lengths), 9))
    order = np.full((len(lengths), 9), -1)
    for r, n in enumerate(lengths):
        order[r, :n] = rng.permutation(40)[:n]  # each row its own entries
    together = elo_loop.shuffled_rows(order.copy(), lengths, draws)
    for r, n in enumerate(lengths):
        alone = elo_loop.shuffled(order[r, :n], draws[r:r + 1, :n], compiled=False)[0] if n else np.zeros(0, int)
        assert together[r, :n].tolist() == alone.tolist() and (together[r, n:] == -1).all()


@needs_numba
@pytest.mark.parametrize("passes", [1, 5])
def test_bootstrap_samples_side_by_side_in_numpy_match_the_compiled_ones(passes):
    reviews = random_reviews(300, seed=3)
    start, as_contestant = starting_weights(reviews, {"judge": 0.5})
    found = []
    for compiled in (True, False):
        rng = np.random.default_rng(5)
        counts = bs.question_counts(reviews, 40, rng)
        found.append(bs.elo_samples(reviews, counts, rng, start, as_contestant, passes, compiled=compiled))
    assert found[0] == pytest.approx(found[1], abs=1e-9)
    assert len({tuple(np.round(row, 6)) for row in found[1]}) == 40  # every sample its own


@needs_numba
def test_a_replay_split_over_cores_gives_the_rows_of_one_replay_to_the_bit(monkeypatch):
    reviews = random_reviews(500, seed=8)
    order = elo_loop.shuffled(np.arange(len(reviews)), np.random.default_rng(3).random((70, len(reviews))))
    start, as_contestant = starting_weights(reviews, {"judge": 0.5})
    args = (reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start, as_contestant, len(reviews.contestants), 3)
    alone = elo_loop.replay(*args, compiled=True)
    monkeypatch.setattr(elo_loop, "PARALLEL_US", 0)
    monkeypatch.setattr(elo_loop.os, "sched_getaffinity", lambda pid: {0, 1, 2}, raising=False)
    assert [(part.start, part.stop) for part in elo_loop._spread(70, 1.0)] == [(0, 23), (23, 46), (46, 70)]
    split = elo_loop.replay(*args, compiled=True)
    for whole, parts in zip(alone, split):
        assert whole.shape == parts.shape and (whole == parts).all()


@needs_numba
@pytest.mark.parametrize("passes", [1, 5])
def test_bootstrap_samples_replayed_together_are_each_replayed_alone(monkeypatch, passes):
    reviews = random_reviews(400, seed=4)
    start, as_contestant = starting_weights(reviews, {"judge": 0.5})
    found = []
    for at_once in (bs.SAMPLES_AT_ONCE, 1):  # 1: one sample at a time, as before they went side by side
        monkeypatch.setattr(bs, "SAMPLES_AT_ONCE", at_once)
        rng = np.random.default_rng(2)
        counts = bs.question_counts(reviews, 150, rng)  # more than one batch, the last one short
        found.append(bs.elo_samples(reviews, counts, rng, start, as_contestant, passes, compiled=True))
    assert (found[0] == found[1]).all()


@pytest.mark.parametrize("compiled", [True, False])
def test_elo_batches_played_beside_the_next_draw_add_up_as_one_after_the_other(monkeypatch, compiled):
    if compiled and not elo_loop.COMPILED:
        pytest.skip("numba is not installed: only the fallback can run")
    from arena.rank import elo as elo_module

    reviews = random_reviews(400, seed=11)
    monkeypatch.setattr(elo_module, "MAX_ORDER_CELLS", 400 * 7)  # batches of 7 orderings: 30 = 7 + 7 + 7 + 7 + 2
    monkeypatch.setattr(elo_module, "checkpoint_sums", lambda *args: elo_loop.checkpoint_sums(*args, compiled=compiled))
    elo_module._PATHS.clear()
    path = elo_module.elo_path(reviews, orderings=30, seed=3)
    rng = np.random.default_rng(3)
    slot_of_step = np.full(len(reviews) + 1, -1)
    slot_of_step[path.marks] = np.arange(len(path.marks))
    total, squares, finals = np.zeros_like(path.total), np.zeros_like(path.squares), []
    for size in (7, 7, 7, 7, 2):  # by hand: each batch drawn, played and added in turn
        summed, squared, ratings = elo_loop.checkpoint_sums(
            reviews.a, reviews.b, reviews.score, elo_module.random_orders(len(reviews), size, rng), slot_of_step,
            len(path.marks), len(reviews.contestants), compiled=compiled)
        total += summed
        squares += squared
        finals.append(ratings)
    assert (path.total == total).all() and (path.squares == squares).all() and (path.finals == np.concatenate(finals)).all()
    start, as_contestant = starting_weights(reviews, None)
    weighted = elo_module.play(reviews, 30, np.random.default_rng(3), start, as_contestant, passes=3, first_pass=path.finals)
    rng, parts = np.random.default_rng(3), []
    for first, size in ((0, 7), (7, 7), (14, 7), (21, 7), (28, 2)):
        parts.append(elo_loop.replay(reviews.a, reviews.b, reviews.score, reviews.reviewer,
                                     elo_module.random_orders(len(reviews), size, rng), start, as_contestant,
                                     len(reviews.contestants), 3, first_pass=path.finals[first:first + size]))
    for found, by_hand in zip(weighted, (np.concatenate(p) for p in zip(*parts))):
        assert (found == by_hand).all()


RANK_IN_A_FRESH_PROCESS = """
import json, sys
sys.path.insert(0, sys.argv[1])
from test_rank_elo import random_reviews
from arena.rank.board import leaderboard
board = leaderboard(random_reviews(int(sys.argv[2]), seed=9, questions=int(sys.argv[2])), weighted=True)
print(json.dumps({"numba": "numba" in sys.modules,
                  "scores": {m.method: m.scores for m in board.methods},
                  "low": {m.method: m.low for m in board.methods}}))
"""


@needs_numba
def test_a_small_leaderboard_does_not_load_numba_and_gives_the_same_numbers_in_any_process(tmp_path):
    # loading the compiled loop costs most of a second in each process: ranking a small run skips it
    here = str(Path(__file__).parent)
    small = json.loads(subprocess.run([sys.executable, "-c", RANK_IN_A_FRESH_PROCESS, here, "300"], check=True,
                                      capture_output=True, text=True).stdout)
    assert small["numba"] is False
    import arena.rank.elo_compiled  # noqa: F401  (loaded here, in a process that ranks more)
    from arena.rank import elo as elo_module

    elo_module._PATHS.clear()
    here_too = leaderboard(random_reviews(300, seed=9, questions=300), weighted=True)
    for method in here_too.methods:  # each step takes the loop its size says, whatever is loaded: to the bit
        assert small["scores"][method.method] == method.scores and small["low"][method.method] == method.low
    large = json.loads(subprocess.run([sys.executable, "-c", RANK_IN_A_FRESH_PROCESS, here, "10000"], check=True,
                                      capture_output=True, text=True).stdout)
    assert large["numba"] is True  # 10,000 battles, 1,000 orderings: numpy would take seconds
