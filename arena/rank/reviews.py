"""Review tuples, PRD's battle format: (question, contestant A, contestant B, reviewer, score),
score -1 when A (shown first) is better, 0 for a tie, +1 when B is better.

Held column-wise in numpy arrays, so a million reviews are a normal size.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from arena.contract.errors import ArenaError
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


class ReviewError(ArenaError, ValueError):
    """Bad review input; the message names the file and line where there is one."""


class Review(BaseModel):
    """One line of a reviews JSONL file."""

    model_config = ConfigDict(extra="allow")

    question: str
    a: str
    b: str
    reviewer: str
    score: int

    @field_validator("question", "a", "b", "reviewer", mode="before")
    @classmethod
    def _text(cls, value):
        return str(value) if isinstance(value, int) else value

    @field_validator("score")
    @classmethod
    def _score(cls, value):
        if value not in (-1, 0, 1):
            raise ValueError("score must be -1 (A better), 0 (tie) or 1 (B better)")
        return value


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

    def __len__(self) -> int:
        return int(self.score.size)

    # -- building ---------------------------------------------------------------
    @classmethod
    def from_rows(cls, rows: Iterable[tuple[str, str, str, str, int]], contestants: Iterable[str] = ()) -> "Reviews":
        rows = list(rows)
        if not rows:
            raise ReviewError("no reviews")
        q, a, b, r, s = (list(col) for col in zip(*rows))
        question, questions = _codes([str(x) for x in q])
        everyone = sorted(set(a) | set(b) | set(contestants))
        index = {c: i for i, c in enumerate(everyone)}
        reviewer, reviewers = _codes(r)
        return cls(
            question=question,
            a=np.fromiter((index[x] for x in a), dtype=np.int64, count=len(a)),
            b=np.fromiter((index[x] for x in b), dtype=np.int64, count=len(b)),
            reviewer=reviewer, score=np.asarray(s, dtype=np.int8),
            questions=questions, contestants=everyone, reviewers=reviewers,
        )

    @classmethod
    def read_jsonl(cls, path: str | Path) -> "Reviews":
        path = Path(path)
        rows = []
        try:
            handle = path.open(encoding="utf-8")
        except FileNotFoundError:
            raise ReviewError(f"{path}: file not found") from None
        with handle:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    review = Review.model_validate_json(line)
                except ValidationError as exc:
                    first = exc.errors(include_url=False)[0]
                    where = ".".join(str(p) for p in first["loc"]) or "line"
                    message = first["msg"].removeprefix("Value error, ")
                    raise ReviewError(f"{path}, line {number}: {where}: {message}") from None
                if review.a == review.b:
                    raise ReviewError(f"{path}, line {number}: a contestant cannot battle itself ({review.a!r})")
                rows.append((review.question, review.a, review.b, review.reviewer, review.score))
        if not rows:
            raise ReviewError(f"{path}: no reviews in the file")
        return cls.from_rows(rows)

    def write_jsonl(self, path: str | Path) -> None:
        with Path(path).open("w", encoding="utf-8") as out:
            for q, a, b, r, s in self.rows():
                out.write(json.dumps({"question": q, "a": a, "b": b, "reviewer": r, "score": s}) + "\n")

    def rows(self) -> Iterable[tuple[str, str, str, str, int]]:
        for q, a, b, r, s in zip(self.question, self.a, self.b, self.reviewer, self.score):
            yield self.questions[q], self.contestants[a], self.contestants[b], self.reviewers[r], int(s)

    # -- selecting ---------------------------------------------------------------
    def by(self, reviewers: Iterable[str]) -> "Reviews":
        """Only these reviewers' reviews (the contestant list stays whole)."""
        wanted = list(reviewers)
        unknown = [r for r in wanted if r not in self.reviewers]
        if unknown:
            raise ReviewError(f"no reviews by {', '.join(map(repr, unknown))}; reviewers here: {', '.join(self.reviewers)}")
        keep = np.isin(self.reviewer, [self.reviewers.index(r) for r in wanted])
        return self._where(keep)

    def _where(self, keep: np.ndarray) -> "Reviews":
        used = sorted(set(self.reviewer[keep].tolist()))
        remap = np.full(len(self.reviewers), -1)
        remap[used] = np.arange(len(used))
        return Reviews(self.question[keep], self.a[keep], self.b[keep], remap[self.reviewer[keep]], self.score[keep],
                       self.questions, self.contestants, [self.reviewers[i] for i in used])

    def collapse_votes(self) -> "Reviews":
        """A reviewer that reviewed the same (question, A, B) more than once is a pool of voters
        (human raters, say): its votes on a question and pair of contestants, in either order,
        become one verdict, the sign of their mean (PRD's human majority)."""
        C = len(self.contestants)
        ordered = (self.reviewer * len(self.questions) + self.question) * C * C + self.a * C + self.b
        _, counts = np.unique(ordered, return_counts=True)
        voters = np.unique(self.reviewer[np.isin(ordered, _[counts > 1])])
        if voters.size == 0:
            return self
        pooled = np.isin(self.reviewer, voters)
        lo, hi = np.minimum(self.a, self.b), np.maximum(self.a, self.b)
        oriented = np.where(self.a == lo, self.score, -self.score).astype(float)  # +1: hi better
        key = ((self.reviewer * len(self.questions) + self.question) * C + lo) * C + hi
        keys, inverse = np.unique(key[pooled], return_inverse=True)
        total = np.bincount(inverse, weights=oriented[pooled])
        first = np.zeros(keys.size, dtype=np.int64)
        first[inverse[::-1]] = np.nonzero(pooled)[0][::-1]  # one representative review per group
        keep = ~pooled
        merged = Reviews(self.question[first], lo[first], hi[first], self.reviewer[first], np.sign(total).astype(np.int8),
                         self.questions, self.contestants, self.reviewers)
        return Reviews(
            np.concatenate([self.question[keep], merged.question]), np.concatenate([self.a[keep], merged.a]),
            np.concatenate([self.b[keep], merged.b]), np.concatenate([self.reviewer[keep], merged.reviewer]),
            np.concatenate([self.score[keep], merged.score]), self.questions, self.contestants, self.reviewers,
        )
