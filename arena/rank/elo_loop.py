"""The per-review Elo loop (PRD, Alg. 1) and the shuffles that feed it, compiled with numba.

Elo is sequential: each review moves the ratings the next one starts from, so it
cannot be vectorised over reviews. Compiled, one review costs a few nanoseconds.
The numpy loop runs every ordering side by side, one numpy step per review: fast
enough for many orderings of a few thousand reviews, slow for a million. Both draw
their random numbers from the same numpy generator and apply them the same way, so
they give the same orders and the same ratings (to about 1e-12 of a rating: the two
call different exponentials).

Which loop a call takes (``compiled=None``) is ``takes_compiled``'s choice, by the
call's size. Loading the compiled loop costs most of a second in every process
(numba builds its typing registries and compiles its runtime): that
was most of `arena rank` on a small run, whose numpy loops take a fraction of it.
Once they are loaded, shuffles take them whatever their size: both ways make the same
swaps. A large compiled replay is split by runs over the cores the process may use
(``_spread``): runs are independent, so the rows are those of one replay, to the bit.
"""

from __future__ import annotations

import importlib.util
import math
import os
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# numba is imported on the first large Elo, not with arena: it costs a third of a second and 70 MB
COMPILED = importlib.util.find_spec("numba") is not None

# The numpy loop's cost in µs on the 2-core VM in its slow phase, where loading the compiled kernels
# took 0.75 s: per step of its Python loop, and per (run, step) cell it touches.
STEP_US, CELL_US = 25.0, 0.1
NUMPY_BUDGET_US = 250_000  # a third of the load: a few such calls cost less than the load they avoid


def numpy_cost(steps: int, runs: int) -> float:
    """Estimated µs of a numpy loop of ``steps`` steps over ``runs`` runs side by side."""
    return steps * (STEP_US + runs * CELL_US)


def takes_compiled(cost: float, compiled: bool | None = None) -> bool:
    """Whether a call whose numpy loop would cost ``cost`` µs takes the compiled loop. ``compiled``
    True or False chooses; None takes numpy under the budget. The call alone decides, not what ran
    before it in the process, so the same reviews give the same numbers to the bit from every
    command (`arena rank` on a run, on its reviews file, `arena report`)."""
    if compiled is not None:
        return compiled and COMPILED
    return COMPILED and cost > NUMPY_BUDGET_US


def _kernels(compiled: bool | None, cost: float):
    """The compiled (shuffle, replay, checkpoint_sums), or None for the numpy loop."""
    if not takes_compiled(cost, compiled):
        return None
    from .elo_compiled import checkpoint_sums, replay, shuffle

    return shuffle, replay, checkpoint_sums


_LOADED = __name__.rpartition(".")[0] + ".elo_compiled"


# -- shuffles ---------------------------------------------------------------------------------------
# Fisher–Yates driven by uniform draws in [0, 1): position i swaps with floor(u_i * (i + 1)).

def _shuffle_numpy(base: np.ndarray, draws: np.ndarray) -> np.ndarray:
    runs, n = draws.shape
    order = np.broadcast_to(base, (runs, n)).copy()
    row = np.arange(runs)
    for i in range(n - 1, 0, -1):
        j = (draws[:, i] * (i + 1)).astype(np.int64)
        order[row, i], order[row, j] = order[row, j], order[row, i].copy()
    return order


def _indices(values: np.ndarray) -> np.ndarray:
    """int32 indices stay int32 (half the memory of a million-review order), others become int64."""
    return np.ascontiguousarray(values, np.int32 if np.asarray(values).dtype == np.int32 else np.int64)


def shuffled(base: np.ndarray, draws: np.ndarray, compiled: bool | None = None) -> np.ndarray:
    """One random order of ``base`` per row of ``draws`` [runs, len(base)] (uniform in [0, 1)),
    of ``base``'s integer type."""
    base = _indices(base)
    draws = np.ascontiguousarray(draws, np.float64)
    if compiled is None and _LOADED in sys.modules:
        # Both loops make the same swaps from the same draws, to the bit: once a call in this process has
        # paid for the compiled kernels, a small shuffle takes them too without changing any number.
        compiled = True
    kernels = _kernels(compiled, numpy_cost(draws.shape[1], draws.shape[0]) / 2)  # a swap is half a replay's step
    return kernels[0](base, draws) if kernels else _shuffle_numpy(base, draws)


def shuffled_rows(order: np.ndarray, lengths: np.ndarray, draws: np.ndarray) -> np.ndarray:
    """Each row's first ``lengths[r]`` entries of ``order`` [runs, n] in the random order ``shuffled``
    gives a row of that length with the same draws (``draws[r, :lengths[r]]``); the rest stays.
    In numpy, side by side: for the bootstrap's samples, whose lengths differ."""
    n = order.shape[1]
    longest_first = np.argsort(-lengths, kind="stable")
    order, draws = order[longest_first], draws[longest_first]
    # rows with more than i entries are the first longer[i]: only they take part in step i
    longer = np.searchsorted(-lengths[longest_first], -np.arange(n), side="left")
    for i in range(n - 1, 0, -1):
        k = int(longer[i])
        if k:
            row = np.arange(k)
            j = (draws[:k, i] * (i + 1)).astype(np.int64)
            order[row, i], order[row, j] = order[row, j], order[:k, i].copy()
    out = np.empty_like(order)
    out[longest_first] = order
    return out


# -- the Elo loop -----------------------------------------------------------------------------------

def reviewer_weights(ratings: np.ndarray, start: np.ndarray, as_contestant: np.ndarray) -> np.ndarray:
    """Alg. 1's weights from one replay's ratings: a reviewer that is also a contestant gets its
    rating min-max scaled over those reviewers, then scaled so that their mean is 1 (line 3 of
    the listing: W <- W / mean(W)); the other reviewers keep their starting weight.
    Vectorised over the leading axes of ``ratings`` [..., contestants]."""
    weights = np.broadcast_to(start, ratings.shape[:-1] + start.shape).copy()
    scorers = as_contestant >= 0
    if scorers.any():
        own = ratings[..., as_contestant[scorers]]
        low = own.min(axis=-1, keepdims=True)
        span = own.max(axis=-1, keepdims=True) - low
        scaled = np.divide(own - low, span, out=np.ones_like(own), where=span > 0)
        weights[..., scorers] = scaled / scaled.mean(axis=-1, keepdims=True)
    return weights


def _replay_numpy(a, b, score, reviewer, order, start, as_contestant, passes, k, initial, slope, contestants, known):
    runs = order.shape[0]
    row = np.arange(runs)
    weights = np.broadcast_to(start, (runs, start.size)).copy()
    change = np.zeros(runs)
    ratings = np.full((runs, contestants), float(initial))
    for done in range(passes):
        if done:
            new = reviewer_weights(ratings, start, as_contestant)
            change = np.abs(new - weights).max(axis=1)
            weights = new
        ratings = np.full((runs, contestants), float(initial))
        if done == 0 and known.shape[0] == runs:
            ratings = known.copy()
            continue
        for step in range(order.shape[1]):
            i = order[:, step]
            live = i >= 0
            i = np.where(live, i, 0)
            ca, cb = a[i], b[i]
            ra, rb = ratings[row, ca], ratings[row, cb]
            expected_a = 1.0 / (1.0 + np.exp((rb - ra) * slope))
            delta = np.where(live, weights[row, reviewer[i]] * k * ((1.0 - score[i]) * 0.5 - expected_a), 0.0)
            ratings[row, ca] += delta  # B's change mirrors A's: sB - eB = -(sA - eA)
            ratings[row, cb] -= delta
    return ratings, weights, change


def pack(a: np.ndarray, b: np.ndarray, score: np.ndarray, reviewer: np.ndarray) -> tuple[np.ndarray, int]:
    """Each review in one int64, for the compiled loop: A, B and the reviewer in ``bits`` bits each,
    the outcome (score + 1) in 2. One load per review instead of four; fields come out by shifts."""
    bits = max(1, int(max(a.max(initial=0), b.max(initial=0), reviewer.max(initial=0))).bit_length())
    if 3 * bits + 2 > 63:
        raise ValueError("too many contestants or reviewers to pack")
    code = (a.astype(np.int64) << (2 + 2 * bits)) | (b.astype(np.int64) << (2 + bits))
    code |= (reviewer.astype(np.int64) << 2) | (score.astype(np.int64) + 1)
    return code, bits


def replay(a: np.ndarray, b: np.ndarray, score: np.ndarray, reviewer: np.ndarray, order: np.ndarray,
           start: np.ndarray, as_contestant: np.ndarray, contestants: int, passes: int = 1,
           k: float = 32, initial: float = 1000, scale: float = 400,
           compiled: bool | None = None, packed: tuple[np.ndarray, int] | None = None,
           first_pass: np.ndarray | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Feed each run its reviews in ``order[run]`` (a -1 is skipped), ``passes`` times.

    Pass 1 weighs reviewer r's reviews by ``start[r]``; each later pass replays the same
    order with the weights ``reviewer_weights`` takes from the ratings the pass before ended
    with. Returns the ratings [runs, contestants] after the last pass, the weights
    [runs, reviewers] that pass used, and per run the largest change of a weight going into
    it (0 with one pass). ``packed``: ``pack``'s output for these reviews, when a caller replays
    them many times. ``first_pass``: the ratings [runs, contestants] pass 1 ends with, when they
    are known already (weighted Elo starting from equal weights begins with unweighted Elo)."""
    order = _indices(order)
    start = np.ascontiguousarray(start, np.float64)
    as_contestant = np.ascontiguousarray(as_contestant, np.int64)
    if order.ndim != 2:
        raise ValueError("order must be [runs, steps]")
    if order.shape[0] == 0:
        return np.zeros((0, contestants)), np.zeros((0, start.size)), np.zeros(0)
    slope = math.log(10.0) / scale  # 10 ** (x / scale) == exp(x * slope), and exp is the cheaper
    known = np.zeros((0, contestants)) if first_pass is None else np.ascontiguousarray(first_pass, np.float64)
    if known.shape[0] not in (0, order.shape[0]):
        raise ValueError("first_pass must hold one row of ratings per run")
    played = passes - (1 if known.shape[0] else 0)
    kernels = _kernels(compiled, numpy_cost(order.shape[1] * played, order.shape[0]))
    if kernels is None:
        return _replay_numpy(np.asarray(a, np.int64), np.asarray(b, np.int64), np.asarray(score, np.float64),
                             np.asarray(reviewer, np.int64), order, start, as_contestant, int(passes), float(k),
                             float(initial), slope, int(contestants), known)
    code, bits = pack(a, b, score, reviewer) if packed is None else packed
    args = (start, as_contestant, int(passes), float(k), float(initial), slope, int(contestants))
    parts = _spread(order.shape[0], numpy_cost(order.shape[1] * played, order.shape[0]))
    if len(parts) == 1:
        return kernels[1](code, bits, order, *args, known)
    # Runs are independent: each part of them gives, on a core of its own, the rows the whole would give
    # (the compiled loop lets go of the interpreter). A report's weighted Elo is most of its numbers' time.
    with ThreadPoolExecutor(len(parts)) as pool:
        found = list(pool.map(lambda rows: kernels[1](code, bits, order[rows], *args, known[rows] if known.shape[0] else known),
                              parts))
    return tuple(np.concatenate(part) for part in zip(*found))


PARALLEL_US = 200_000  # a numpy-loop estimate above which the compiled replay is worth a thread per core


def _spread(runs: int, cost: float) -> list[slice]:
    """The runs split into one part per core the process may use, for a replay worth it."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    parts = min(cores, runs // 16) if cost > PARALLEL_US else 1  # no part smaller than a block of the kernel
    if parts <= 1:
        return [slice(0, runs)]
    bounds = [runs * i // parts for i in range(parts + 1)]
    return [slice(lo, hi) for lo, hi in zip(bounds, bounds[1:])]


# -- Elo along the way ------------------------------------------------------------------------------

def _checkpoint_sums_numpy(a, b, score, order, slot_of_step, slots, contestants, k, initial, slope):
    runs = order.shape[0]
    total, squares = np.zeros((slots, contestants)), np.zeros((slots, contestants))
    ratings = np.full((runs, contestants), float(initial))
    row = np.arange(runs)
    total[0] += ratings.sum(axis=0)
    squares[0] += (ratings ** 2).sum(axis=0)
    for step in range(order.shape[1]):
        i = order[:, step]
        ca, cb = a[i], b[i]
        ra, rb = ratings[row, ca], ratings[row, cb]
        expected_a = 1.0 / (1.0 + np.exp((rb - ra) * slope))
        delta = 1.0 * k * ((1.0 - score[i]) * 0.5 - expected_a)  # A gains what B loses
        ratings[row, ca] += delta
        ratings[row, cb] -= delta
        slot = slot_of_step[step + 1]
        if slot >= 0:
            total[slot] += ratings.sum(axis=0)
            squares[slot] += (ratings ** 2).sum(axis=0)
    return total, squares, ratings


def checkpoint_sums(a: np.ndarray, b: np.ndarray, score: np.ndarray, order: np.ndarray, slot_of_step: np.ndarray,
                    slots: int, contestants: int, k: float = 32, initial: float = 1000, scale: float = 400,
                    compiled: bool | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Unweighted Elo of each run fed its reviews in ``order[run]``, watched along the way:
    ``slot_of_step[n]`` is the checkpoint reached after n reviews (-1: none; slot 0 is before
    any). Returns, per checkpoint, the sum over runs of the ratings [slots, contestants] and of
    their squares, and the final ratings [runs, contestants]. Both ways compute the same
    expressions and sum the runs in the same order; they can differ in the last bit of a power,
    where numpy and the compiled code call different routines (about 1e-13 of a rating)."""
    args = (np.ascontiguousarray(a, np.int64), np.ascontiguousarray(b, np.int64),
            np.ascontiguousarray(score, np.float64), _indices(order), np.ascontiguousarray(slot_of_step, np.int64),
            int(slots), int(contestants), float(k), float(initial), math.log(10.0) / scale)
    kernels = _kernels(compiled, numpy_cost(order.shape[1], order.shape[0]))
    return kernels[2](*args) if kernels else _checkpoint_sums_numpy(*args)
