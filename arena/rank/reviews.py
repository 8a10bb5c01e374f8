"""Review tuples, PRD's battle format: (question, contestant A, contestant B, reviewer, score),
score -1 when A (shown first) is better, 0 for a tie, +1 when B is better, and their structure:
which of k samples a review is (FairEval's MEC), in which order its pair was shown (BPC), the raw
score difference, and the match and repeat that gave it.

``Reviews.battles`` turns reviews into the battles peer rank counts (docs/peer-rank.md, "From
reviews to battles"): the samples of one reviewer, question, pair and match become one calibrated
verdict, as the game that asked for them computes it; a review without a sample index is a battle
of its own, and a reviewer that gave the same one several times in one match is a pool of voters.

Held column-wise in numpy arrays, so a million reviews are a normal size.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from arena.contract.capabilities import Review

# A line's rules live with the file reader (review_line): re-exported here, where they always were
from .review_line import TIE, ReviewError, ReviewLine  # noqa: F401  (ReviewLine: for those who import it from here)

HUMAN = "human"  # the reviewer name human raters' labels are stored under (arena import, annotate)


def signs(values: np.ndarray) -> np.ndarray:
    return np.where(np.abs(values) < TIE, 0, np.sign(values)).astype(np.int8)


def group_ids(*columns: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Dense ids of the distinct rows of these integer columns, numbered in their lexicographic
    order, and the index of each group's first row. The columns are folded into one integer key
    (each a digit of its own span), renumbered densely whenever the next digit would overflow,
    so one pass ranks the rows: a million of them in tens of milliseconds, not seconds."""
    n = columns[0].size
    key, room = np.zeros(n, dtype=np.int64), 1
    for column in columns:
        column = np.asarray(column, dtype=np.int64)
        low = int(column.min()) if n else 0
        span = (int(column.max()) - low + 1) if n else 1
        if room * span >= 1 << 62:
            key, room = _dense(key, room)
        key *= span  # in place: a million rows make no temporaries of 8 MB each
        key += column
        key -= low
        room *= span
    ids, _ = _dense(key, room)
    first = np.zeros(int(ids.max()) + 1 if ids.size else 0, dtype=np.int64)
    for start in range(_stretches(ids.size)[-1], -1, -STRETCH):  # the last stretch first, each backwards:
        stop = min(start + STRETCH, ids.size)  # each group keeps the smallest index written to it
        first[ids[start:stop][::-1]] = np.arange(stop - 1, start - 1, -1)
    return ids, first


STRETCH = 1 << 16  # rows renumbered at a time: temporaries of a stretch, not of a million rows


def _stretches(n: int) -> range:
    return range(0, max(n, 1), STRETCH)


def _dense(key: np.ndarray, room: int) -> tuple[np.ndarray, int]:
    """Each key's rank among the distinct keys (all in [0, room)), and how many there are; ``key``,
    an array of the caller's own, is overwritten with the ranks."""
    if room <= max(4 * key.size, 1 << 16):  # a table of every possible key is cheaper than a sort
        present = np.zeros(room, dtype=bool)
        present[key] = True
        rank = np.cumsum(present, dtype=np.int32 if room < 1 << 31 else np.int64)
        del present
        rank -= 1
        for start in _stretches(key.size):
            key[start:start + STRETCH] = rank[key[start:start + STRETCH]]
        return key, int(rank[-1]) + 1 if room else 0
    ids = np.unique(key, return_inverse=True)[1].reshape(-1)
    return ids, int(ids.max()) + 1 if ids.size else 0


def _codes(values: list[str]) -> tuple[np.ndarray, list[str]]:
    names = sorted(set(values))
    index = {name: i for i, name in enumerate(names)}
    return np.fromiter((index[v] for v in values), dtype=np.int64, count=len(values)), names


@dataclass(frozen=True)
class Reviews:
    question: np.ndarray  # codes into questions
    a: np.ndarray  # codes into contestants
    b: np.ndarray
    reviewer: np.ndarray  # codes into reviewers
    score: np.ndarray  # int8: -1, 0, 1
    questions: list[str]
    contestants: list[str]
    reviewers: list[str]
    # the structure; left out, every review is a battle of its own from one unnamed match
    sample: np.ndarray | None = None  # int64: the MEC sample index; -1: not a sample, a battle of its own
    order: np.ndarray | None = None  # int8: 0 shown in the pair's own order, 1 swapped
    repeat: np.ndarray | None = None  # int64
    difference: np.ndarray | None = None  # float: the raw verdict, in the score's direction; nan: none given
    match: np.ndarray | None = None  # codes into matches
    matches: list[str] = field(default_factory=lambda: [""])

    def __post_init__(self):
        n = self.score.size
        for name, fill, dtype in (("sample", -1, np.int64), ("order", 0, np.int8), ("repeat", 1, np.int64),
                                  ("difference", np.nan, float), ("match", 0, np.int64)):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.full(n, fill, dtype=dtype))

    def __len__(self) -> int:
        return int(self.score.size)

    # -- building ---------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: Iterable[tuple], contestants: Iterable[str] = ()) -> "Reviews":
        """From ``Review``s, or plain (question, A, B, reviewer, score) tuples (battles of their own)."""
        rows = [r if isinstance(r, Review) else Review(*r) for r in rows]
        if not rows:
            raise ReviewError("no reviews")
        q, a, b, r, s, sample, order, repeat, difference, match = (list(col) for col in zip(*rows))
        question, questions = _codes([str(x) for x in q])
        everyone = sorted(set(a) | set(b) | set(contestants))
        index = {c: i for i, c in enumerate(everyone)}
        reviewer, reviewers = _codes(r)
        match_codes, matches = _codes([str(x) for x in match])
        n = len(rows)
        return cls(
            question=question,
            a=np.fromiter((index[x] for x in a), dtype=np.int64, count=n),
            b=np.fromiter((index[x] for x in b), dtype=np.int64, count=n),
            reviewer=reviewer, score=np.asarray(s, dtype=np.int8),
            questions=questions, contestants=everyone, reviewers=reviewers,
            sample=np.fromiter((-1 if x is None else x for x in sample), dtype=np.int64, count=n),
            order=np.asarray(order, dtype=np.int8), repeat=np.asarray(repeat, dtype=np.int64),
            difference=np.fromiter((np.nan if x is None else x for x in difference), dtype=float, count=n),
            match=match_codes, matches=matches,
        )

    @classmethod
    def read_jsonl(cls, path: str | Path) -> "Reviews":
        """A reviews file, checked as ``ReviewLine`` checks a line; a bad line is named by file, line
        and field. Read in bulk, a column at a time (``review_file``)."""
        from .review_file import read

        found = read(Path(path))
        return cls.from_rows(found) if isinstance(found, list) else cls(**found)

    def write_jsonl(self, path: str | Path) -> None:
        """One line per review; the structure's fields only where they differ from their defaults,
        so reviews without structure are written as PRD's battles are."""
        with Path(path).open("w", encoding="utf-8") as out:
            for review in self.rows():
                line = {"question": review.question, "a": review.a, "b": review.b, "reviewer": review.reviewer,
                        "score": review.score}
                line.update((name, value) for name, value in zip(Review._fields[5:], review[5:])
                            if value != Review._field_defaults[name])
                out.write(json.dumps(line) + "\n")

    def rows(self) -> Iterable[Review]:
        for i in range(len(self)):
            sample, difference = int(self.sample[i]), float(self.difference[i])
            yield Review(self.questions[self.question[i]], self.contestants[self.a[i]], self.contestants[self.b[i]],
                         self.reviewers[self.reviewer[i]], int(self.score[i]), None if sample < 0 else sample,
                         int(self.order[i]), int(self.repeat[i]), None if math.isnan(difference) else difference,
                         self.matches[self.match[i]])

    # -- selecting ---------------------------------------------------------------
    def by(self, reviewers: Iterable[str]) -> "Reviews":
        """Only these reviewers' reviews (the contestant list stays whole)."""
        wanted = list(reviewers)
        unknown = [r for r in wanted if r not in self.reviewers]
        if unknown:
            raise ReviewError(f"no reviews by {', '.join(map(repr, unknown))}; reviewers here: {', '.join(self.reviewers)}")
        if set(wanted) == set(self.reviewers):  # everyone: these very reviews, not a copy of a million of them
            return self
        keep = np.isin(self.reviewer, [self.reviewers.index(r) for r in wanted])
        used = sorted(set(self.reviewer[keep].tolist()))
        remap = np.full(len(self.reviewers), -1)
        remap[used] = np.arange(len(used))
        taken = self._take(keep)
        return Reviews(taken.question, taken.a, taken.b, remap[taken.reviewer], taken.score, self.questions,
                       self.contestants, [self.reviewers[i] for i in used], taken.sample, taken.order, taken.repeat,
                       taken.difference, taken.match, self.matches)

    def _take(self, index: np.ndarray) -> "Reviews":
        """These rows (a mask or indices), every name list kept."""
        return Reviews(self.question[index], self.a[index], self.b[index], self.reviewer[index], self.score[index],
                       self.questions, self.contestants, self.reviewers, self.sample[index], self.order[index],
                       self.repeat[index], self.difference[index], self.match[index], self.matches)

    def _then(self, other: "Reviews") -> "Reviews":
        """These rows, then ``other``'s (which shares every name list)."""
        join = lambda name: np.concatenate([getattr(self, name), getattr(other, name)])
        return Reviews(join("question"), join("a"), join("b"), join("reviewer"), join("score"), self.questions,
                       self.contestants, self.reviewers, join("sample"), join("order"), join("repeat"),
                       join("difference"), join("match"), self.matches)

    # -- from reviews to battles ---------------------------------------------------
    def battles(self) -> "Reviews":
        """The battles peer rank counts (docs/peer-rank.md). Samples (reviews with a sample index)
        of one reviewer, question, pair of contestants, match and repeat are calibrated into one
        verdict; reviews without one are battles of their own, pooled only where a reviewer gave
        the same (question, A, B) more than once in one match (a pool of voters). Each repeat and
        each match stays a battle of its own."""
        sampled = self.sample >= 0
        if not sampled.any():
            return self._pool_votes()
        if sampled.all():
            return self._calibrate()
        return self._take(~sampled)._pool_votes()._then(self._take(sampled)._calibrate())

    def _pool_votes(self) -> "Reviews":
        """A reviewer that reviewed the same (question, A, B) more than once in one match is a pool
        of voters (human raters, say): its votes on a question and pair of contestants, in either
        order, become one verdict, the sign of their mean (PRD's human majority)."""
        shown, _ = group_ids(self.reviewer, self.question, self.a, self.b, self.match, self.repeat)
        voters = np.unique(self.reviewer[np.bincount(shown)[shown] > 1])
        if voters.size == 0:
            return self
        pooled = np.isin(self.reviewer, voters)
        votes = self._take(pooled)
        lo, hi = np.minimum(votes.a, votes.b), np.maximum(votes.a, votes.b)
        oriented = np.where(votes.a == lo, votes.score, -votes.score).astype(float)  # +1: hi better
        group, first = group_ids(votes.reviewer, votes.question, lo, hi, votes.match, votes.repeat)
        total = np.bincount(group, weights=oriented)
        merged = Reviews(votes.question[first], lo[first], hi[first], votes.reviewer[first], np.sign(total).astype(np.int8),
                         self.questions, self.contestants, self.reviewers, repeat=votes.repeat[first],
                         match=votes.match[first], matches=self.matches)
        return self._take(~pooled)._then(merged)

    def _calibrate(self) -> "Reviews":
        """FairEval's MEC and BPC, per reviewer, question, pair, match and repeat: each order's mean
        over its samples, then the mean of the orders' means, of the score differences (of the
        scores where none is given); its sign is the verdict. The battle is written in the pair's
        own order (that of the group's first review), its difference the calibrated mean."""
        lo, hi = np.minimum(self.a, self.b), np.maximum(self.a, self.b)
        value = np.where(np.isnan(self.difference), self.score, self.difference)
        oriented = np.where(self.a == lo, value, -value)  # > 0: hi better
        group, first = group_ids(self.reviewer, self.question, lo, hi, self.match, self.repeat)
        mean = order_means(group, (self.a != lo).astype(np.int64), oriented, first.size)
        calibrated = np.nanmean(mean, axis=1)  # every group has at least one order
        keep = np.sort(first)  # the run's order: each verdict where its first sample was
        rank = np.argsort(first)
        own_first = np.where(self.order[keep] == 0, self.a[keep], self.b[keep])
        own_second = np.where(own_first == self.a[keep], self.b[keep], self.a[keep])
        toward = np.where(own_second == hi[keep], calibrated[rank], -calibrated[rank])  # > 0: the second better
        return Reviews(self.question[keep], own_first, own_second, self.reviewer[keep], signs(toward),
                       self.questions, self.contestants, self.reviewers, sample=np.zeros(keep.size, dtype=np.int64),
                       repeat=self.repeat[keep], difference=toward + 0.0, match=self.match[keep], matches=self.matches)


def order_means(group: np.ndarray, side: np.ndarray, values: np.ndarray, groups: int) -> np.ndarray:
    """[groups, 2]: the mean of ``values`` per group and presentation order; nan where an order is missing."""
    cell = group * 2
    cell += side  # in place: no second array of a million rows
    sums = np.bincount(cell, weights=values, minlength=2 * groups)
    counts = np.bincount(cell, minlength=2 * groups)
    del cell
    np.divide(sums, counts, out=sums, where=counts > 0)
    sums[counts == 0] = np.nan
    return sums.reshape(groups, 2)
