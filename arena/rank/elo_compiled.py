"""The compiled halves of ``elo_loop``: the same shuffle and the same Elo replay, in numba.

Imported by ``elo_loop`` on first use only. ``cache=True`` keeps the machine code on disk, so
later processes load it instead of compiling again (about 12 s on a 2-core machine): beside this
file, or in the user's cache folder when the install is read-only (``_cache`` says where).
"""

from __future__ import annotations

import math
import os
import tempfile
from pathlib import Path

import numpy as np
from numba import njit


def _load_numba_without_blas() -> None:
    """Load numba's array functions without looking for BLAS. numba loads them on its first compile
    or cache load, and they import scipy.linalg only to learn whether np.correlate and np.convolve may
    call BLAS: 0.1 to 0.2 s of CPU and 12 MB in every process, for kernels that call no BLAS. The check is
    answered "no" while they load (those two then loop in compiled code); numba's own check is put
    back at once, so np.dot and np.linalg in any other compiled code find BLAS as before."""
    import sys

    import numba.np.linalg as linalg

    check = getattr(linalg, "ensure_blas", None)
    if check is None or "numba.np.arraymath" in sys.modules:  # another numba, or loaded already
        return

    def no_blas() -> None:
        raise ImportError("not looked for: arena's Elo kernels call no BLAS")

    linalg.ensure_blas = no_blas
    try:
        import numba.np.arraymath  # noqa: F401
    finally:
        linalg.ensure_blas = check


_load_numba_without_blas()


def _writable(folder: Path) -> bool:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        tempfile.TemporaryFile(dir=folder).close()
        return True
    except OSError:
        return False


def _cache() -> bool:
    """Whether the kernels can be kept on disk. numba looks in turn at NUMBA_CACHE_DIR, the
    ``__pycache__`` beside this file and the user's cache folder, and takes the first it can
    write; when it can write none of them (a read-only install and home) it would fail at import,
    so a folder in the system's temporary one is named instead, and with nowhere at all to write
    the kernels are compiled in every process rather than not at all."""
    from numba.core import config
    from numba.misc.appdirs import AppDirs

    places = [Path(config.CACHE_DIR)] if config.CACHE_DIR else []
    places += [Path(__file__).parent / "__pycache__", Path(AppDirs(appname="numba", appauthor=False).user_cache_dir)]
    if any(_writable(place) for place in places):
        return True
    fallback = Path(tempfile.gettempdir()) / f"arena-numba-{getattr(os, 'getuid', lambda: 'user')()}"
    if _writable(fallback):
        config.CACHE_DIR = str(fallback)
        return True
    return False


CACHE = _cache()

BLOCK = 16  # runs played side by side: their update chains are independent, so the CPU overlaps them
CHUNK = 2048  # steps gathered at a time per run: BLOCK x CHUNK indices stay in the cache


@njit(cache=CACHE, nogil=True)
def shuffle(base, draws):
    """elo_loop._shuffle_numpy: Fisher–Yates of ``base`` once per row of ``draws``."""
    runs, n = draws.shape
    order = np.empty((runs, n), dtype=base.dtype)
    for run in range(runs):
        for i in range(n):
            order[run, i] = base[i]
        for i in range(n - 1, 0, -1):
            j = int(draws[run, i] * (i + 1))
            order[run, i], order[run, j] = order[run, j], order[run, i]
    return order


@njit(cache=CACHE, nogil=True)
def next_weights(ratings, w, start, as_contestant):
    """elo_loop.reviewer_weights for one run, into ``w``; returns the largest change of a weight."""
    low, high, scorers, total = math.inf, -math.inf, 0, 0.0
    for r in range(start.size):
        c = as_contestant[r]
        if c >= 0:
            low = min(low, ratings[c])
            high = max(high, ratings[c])
    span = high - low
    for r in range(start.size):
        c = as_contestant[r]
        if c >= 0:
            total += (ratings[c] - low) / span if span > 0 else 1.0
            scorers += 1
    biggest = 0.0
    for r in range(start.size):
        c = as_contestant[r]
        if c >= 0:
            new = ((ratings[c] - low) / span if span > 0 else 1.0) / (total / scorers)
            biggest = max(biggest, abs(new - w[r]))
            w[r] = new
    return biggest


@njit(cache=CACHE, nogil=True)
def replay(code, bits, order, start, as_contestant, passes, k, initial, slope, contestants, known):
    """elo_loop._replay_numpy on reviews packed by elo_loop.pack, a block of runs at a time.
    ``known``: the ratings of the first pass when they were computed already (no rows: play it).

    Each stretch of CHUNK steps is first gathered from ``code`` into a small buffer: those loads
    do not wait on each other, so their cache misses overlap, while the Elo updates that follow,
    which must wait on each other, then read memory in order."""
    runs, steps = order.shape
    R = start.size
    ratings = np.empty((runs, contestants))
    weights = np.empty((runs, R))
    change = np.zeros(runs)
    buffer = np.empty((BLOCK, CHUNK), dtype=np.int64)
    b_shift, r_shift = 2, 2 + bits
    a_shift = r_shift + bits
    mask = (1 << bits) - 1
    for first in range(0, runs, BLOCK):
        block = min(BLOCK, runs - first)
        for y in range(block):
            weights[first + y, :] = start
        for done in range(passes):
            for y in range(block):
                if done:
                    change[first + y] = next_weights(ratings[first + y], weights[first + y], start, as_contestant)
                ratings[first + y, :] = initial
            if done == 0 and known.shape[0] == runs:
                for y in range(block):
                    ratings[first + y, :] = known[first + y]
                continue
            for begin in range(0, steps, CHUNK):
                end = min(steps, begin + CHUNK)
                for y in range(block):
                    for step in range(begin, end):
                        i = order[first + y, step]
                        buffer[y, step - begin] = code[i] if i >= 0 else -1
                for step in range(end - begin):
                    for y in range(block):
                        packed = buffer[y, step]
                        if packed < 0:
                            continue
                        run = first + y
                        ca, cb = packed >> a_shift, (packed >> r_shift) & mask
                        reviewer, outcome = (packed >> b_shift) & mask, packed & 3
                        ra, rb = ratings[run, ca], ratings[run, cb]
                        expected_a = 1.0 / (1.0 + math.exp((rb - ra) * slope))
                        delta = weights[run, reviewer] * k * ((2 - outcome) * 0.5 - expected_a)
                        ratings[run, ca] = ra + delta
                        ratings[run, cb] = rb - delta
    return ratings, weights, change


@njit(cache=CACHE, nogil=True)
def checkpoint_sums(a, b, score, order, slot_of_step, slots, contestants, k, initial, slope):
    """elo_loop._checkpoint_sums_numpy: unweighted Elo of every run of ``order``, with the sums
    (and sums of squares) over runs of the ratings after each checkpoint. Runs are added in
    order, one after the other, as numpy adds the rows of an array; a block of them is played
    side by side, as in ``replay``. The update is ``replay``'s, to the bit, so the last
    checkpoint holds the ratings ``replay`` ends with."""
    runs, steps = order.shape
    total = np.zeros((slots, contestants))
    squares = np.zeros((slots, contestants))
    ratings = np.empty((runs, contestants))
    for first in range(0, runs, BLOCK):
        block = min(BLOCK, runs - first)
        for run in range(first, first + block):
            for c in range(contestants):
                ratings[run, c] = initial
                total[0, c] += initial
                squares[0, c] += initial * initial
        for step in range(steps):
            for run in range(first, first + block):
                i = order[run, step]
                ca, cb = a[i], b[i]
                ra, rb = ratings[run, ca], ratings[run, cb]
                expected_a = 1.0 / (1.0 + math.exp((rb - ra) * slope))
                delta = 1.0 * k * ((1.0 - score[i]) * 0.5 - expected_a)
                ratings[run, ca] = ra + delta
                ratings[run, cb] = rb - delta
            slot = slot_of_step[step + 1]
            if slot >= 0:
                for run in range(first, first + block):
                    for c in range(contestants):
                        total[slot, c] += ratings[run, c]
                        squares[slot, c] += ratings[run, c] * ratings[run, c]
    return total, squares, ratings
