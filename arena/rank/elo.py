"""Weighted Elo (PRD, Alg. 1), averaged over random orderings of the reviews.

Elo depends on the order in which battles are fed to it, so the result is the
mean (and spread) over many seeded orderings. The loop over reviews is compiled
(``elo_loop``); orderings are drawn in batches so memory stays bounded.

Two ways to weigh reviewers (``scheme``), both starting from equal weights:

- ``"ordering"`` (the default; PRD's Alg. 1 and the authors' code): every ordering
  is replayed ``passes`` times, each replay weighted by the ratings its own previous
  replay ended with, min-max scaled over the reviewers and then scaled to mean 1.
- ``"mean"``: each pass plays fresh orderings with one set of weights, taken from
  the mean rating over the previous pass's orderings, min-max scaled to [0, 1] (the
  best reviewer moves ratings by the full K, the worst not at all).

On PRD's 8,000 reviews of Vicuna80, with 4,000 orderings, the first gives the paper's
row (GPT-4 1213, Claude 1125, ...) and the second GPT-4 1214 (docs/peer-rank.md has
both rows). Reviewers that are not contestants keep their ``fixed`` weight (default 1)
in both.
"""

from __future__ import annotations

import hashlib
from concurrent.futures import ThreadPoolExecutor
from typing import Literal, NamedTuple

import numpy as np
from pydantic import BaseModel

from .elo_loop import checkpoint_sums, pack, replay, shuffled
from .reviews import Reviews
from .winrate import reviewer_roles

Scheme = Literal["ordering", "mean"]
SCHEMES: tuple[Scheme, ...] = ("ordering", "mean")
PASSES = 5  # weighted replays; the authors' code runs five, and the weights have settled by then


class EloResult(BaseModel):
    scores: dict[str, float]  # mean over orderings
    spread: dict[str, float]  # standard deviation over orderings
    weights: dict[str, float]  # reviewer weights of the last pass (mean over orderings for "ordering")
    passes: int
    last_change: float  # largest change of a weight going into the last pass
    scheme: Scheme | None = None  # None when unweighted


MAX_ORDER_CELLS = 4_000_000  # orderings x reviews held at once: 32 MB of indices and as many of draws


def random_orders(n_reviews: int, orderings: int, rng: np.random.Generator) -> np.ndarray:
    """[orderings, n_reviews] uniformly random orders, from ``rng``'s stream of uniform draws."""
    return shuffled(np.arange(n_reviews), rng.random((orderings, n_reviews)))


def batch_sizes(n_reviews: int, orderings: int):
    """How many orderings to draw at a time (the report's trajectory draws the same batches)."""
    batch = max(1, MAX_ORDER_CELLS // max(1, n_reviews))
    for start in range(0, orderings, batch):
        yield min(batch, orderings - start)


def play(reviews: Reviews, orderings: int, rng: np.random.Generator, start: np.ndarray, as_contestant: np.ndarray,
         passes: int = 1, k: float = 32, initial: float = 1000, scale: float = 400,
         first_pass: np.ndarray | None = None):
    """Ratings [orderings, C], weights [orderings, R] and weight changes [orderings] of ``replay``
    over ``orderings`` random orders of all the reviews; ``first_pass``: the ratings [orderings, C]
    the first pass ends with, when known."""
    packed = pack(reviews.a, reviews.b, reviews.score, reviews.reviewer)  # once, for every batch

    def replayed(order: np.ndarray, done: int):
        known = None if first_pass is None else first_pass[done:done + len(order)]
        return replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start, as_contestant,
                      len(reviews.contestants), passes, k, initial, scale, packed=packed, first_pass=known)

    parts = list(played_in_batches(len(reviews), orderings, rng, replayed))
    return tuple(np.concatenate(found) for found in zip(*parts))


def played_in_batches(n_reviews: int, orderings: int, rng: np.random.Generator, work):
    """``work(order, done)`` of each batch of ``random_orders`` (``done``: the orderings before it), in
    the batches' order. The compiled loops let go of the interpreter, so the next batch is drawn while
    one is played, and at most two batches' orders are held at once. A batch's result depends on its
    orders alone: what a caller adds up in this order is what one batch after the other gives, to the bit."""
    with ThreadPoolExecutor(1) as beside:
        waiting, done = None, 0
        for size in batch_sizes(n_reviews, orderings):
            order = random_orders(n_reviews, size, rng)
            if waiting is not None:
                yield waiting.result()
            waiting = beside.submit(work, order, done)
            done += size
        if waiting is not None:
            yield waiting.result()


POINTS = 200  # checkpoints along an Elo path: enough for a smooth line, small in a page


def checkpoints(n: int, points: int = POINTS) -> np.ndarray:
    """Numbers of battles fed so far at which the path is looked at, 0 and n included."""
    return np.unique(np.round(np.linspace(0, n, min(n, points) + 1)).astype(int))


class EloPath(NamedTuple):
    """Unweighted Elo over ``orderings`` random orders of the reviews, watched along the way."""

    marks: np.ndarray  # battles fed at each checkpoint
    total: np.ndarray  # [checkpoints, C] sum over orderings of the ratings
    squares: np.ndarray  # [checkpoints, C] sum of their squares
    finals: np.ndarray  # [orderings, C] the ratings each ordering ends with


def elo_path(reviews: Reviews, orderings: int = 1000, seed: int = 0, k: float = 32, initial: float = 1000,
             scale: float = 400) -> EloPath:
    """The orders ``elo`` draws (same seed, same batches) and its update, so ``finals`` are the
    ratings of unweighted ``elo``. A report asks for it three times (the leaderboard, the figure
    of Elo over battles, the first pass of the weighted Elo): after the first it is read back."""
    a, b = np.ascontiguousarray(reviews.a, np.int64), np.ascontiguousarray(reviews.b, np.int64)
    score = np.ascontiguousarray(reviews.score, np.float64)
    hashed = hashlib.blake2b(digest_size=16)
    for column in (a, b, score):  # the arrays' own memory, fed in turn: the digest of their bytes end to end
        hashed.update(column)
    digest = hashed.digest()
    key = (digest, len(reviews.contestants), orderings, seed, float(k), float(initial), float(scale))
    found = _PATHS.get(key)
    if found is None:
        found = _PATHS[key] = _play_path(a, b, score, len(reviews.contestants), orderings, seed, k, initial, scale)
        while len(_PATHS) > 4:  # a few sets of reviews at a time; the reviews themselves are not kept
            del _PATHS[next(iter(_PATHS))]
    return found


_PATHS: dict[tuple, EloPath] = {}


def _play_path(a: np.ndarray, b: np.ndarray, score: np.ndarray, contestants: int, orderings: int, seed: int,
               k: float, initial: float, scale: float) -> EloPath:
    n = len(a)
    rng = np.random.default_rng(seed)
    marks = checkpoints(n)
    slot_of_step = np.full(n + 1, -1)
    slot_of_step[marks] = np.arange(len(marks))
    total, squares = np.zeros((len(marks), contestants)), np.zeros((len(marks), contestants))
    finals = []

    def sums(order: np.ndarray, done: int):
        return checkpoint_sums(a, b, score, order, slot_of_step, len(marks), contestants, k, initial, scale)

    for summed, squared, ratings in played_in_batches(n, orderings, rng, sums):
        total += summed
        squares += squared
        finals.append(ratings)
    path = EloPath(marks, total, squares, np.concatenate(finals))
    for part in path:
        part.flags.writeable = False  # shared by every caller
    return path


def starting_weights(reviews: Reviews, fixed: dict[str, float] | None) -> tuple[np.ndarray, np.ndarray]:
    """Each reviewer's first weight (1, or its fixed weight) and its index among the contestants
    whose rating sets its weight (-1: it keeps its first weight)."""
    as_contestant, _ = reviewer_roles(reviews, fixed)
    fixed = fixed or {}
    start = np.array([fixed.get(r, 1.0) for r in reviews.reviewers], dtype=float)
    start[as_contestant >= 0] = 1.0
    return start, as_contestant


def min_max(values: np.ndarray) -> np.ndarray:
    span = values.max() - values.min()
    return (values - values.min()) / span if span > 0 else np.ones_like(values)


def elo(reviews: Reviews, weighted: bool = False, fixed: dict[str, float] | None = None, orderings: int = 1000,
        passes: int = PASSES, seed: int = 0, k: float = 32, initial: float = 1000, scale: float = 400,
        scheme: Scheme = "ordering") -> EloResult:
    """Unweighted: every review moves ratings by the full K, one pass. ``weighted``: reviewers
    are weighed by their own rating as contestants, ``passes`` times, the way ``scheme`` says."""
    if scheme not in SCHEMES:
        raise ValueError(f"unknown Elo weighting scheme {scheme!r}; one of {', '.join(SCHEMES)}")
    rng = np.random.default_rng(seed)
    start, as_contestant = starting_weights(reviews, fixed)
    scorers = as_contestant >= 0
    nobody = np.full_like(as_contestant, -1)
    if (not weighted or not scorers.any()) and (start == 1).all():
        ratings = elo_path(reviews, orderings, seed, k, initial, scale).finals
        used, change, total = start, 0.0, 1
    elif not weighted or not scorers.any():
        ratings, _, _ = play(reviews, orderings, rng, start, nobody, 1, k, initial, scale)
        used, change, total = start, 0.0, 1
    elif scheme == "ordering":
        # from equal weights the first pass is unweighted Elo over the same orders: read back when it was played
        first = elo_path(reviews, orderings, seed, k, initial, scale).finals if (start == 1).all() else None
        ratings, weights, changes = play(reviews, orderings, rng, start, as_contestant, passes, k, initial, scale,
                                         first_pass=first)
        used, change, total = weights.mean(axis=0), float(changes.max(initial=0.0)), passes
    else:
        weights, change, total = start.copy(), 0.0, passes
        for _ in range(passes):
            ratings, _, _ = play(reviews, orderings, rng, weights, nobody, 1, k, initial, scale)
            used = weights.copy()
            new = weights.copy()
            new[scorers] = min_max(ratings.mean(axis=0)[as_contestant[scorers]])
            change = float(np.max(np.abs(new - weights)))
            weights = new
    names = reviews.contestants
    return EloResult(scores=dict(zip(names, ratings.mean(axis=0).tolist())),
                     spread=dict(zip(names, ratings.std(axis=0).tolist())),
                     weights=dict(zip(reviews.reviewers, np.asarray(used, float).tolist())), passes=total,
                     last_change=change, scheme=scheme if weighted and scorers.any() else None)
