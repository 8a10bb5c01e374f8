"""One line of a reviews JSONL file: what it must hold, and how a bad one is reported (file, line
and field). ``ReviewLine`` is the rule; the file reader (``review_file``) checks whole columns
against it and asks it about any line it cannot settle."""

from __future__ import annotations

from pathlib import Path

from arena.contract.capabilities import Review
from arena.contract.errors import ArenaError
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

TIE = 1e-12  # a mean this close to zero is a tie, as the games take it


class ReviewError(ArenaError, ValueError):
    """Bad review input; the message names the file and line where there is one."""


class ReviewLine(BaseModel):
    """One line of a reviews JSONL file: a review, its structure optional."""

    model_config = ConfigDict(extra="allow")

    question: str
    a: str
    b: str
    reviewer: str
    score: int
    sample: int | None = Field(None, ge=0)
    order: int = Field(0, ge=0, le=1)
    repeat: int = 1
    difference: float | None = Field(None, allow_inf_nan=False)
    match: str = ""

    @field_validator("question", "a", "b", "reviewer", "match", mode="before")
    @classmethod
    def _text(cls, value):
        return str(value) if isinstance(value, int) else value

    @field_validator("score")
    @classmethod
    def _score(cls, value):
        if value not in (-1, 0, 1):
            raise ValueError("score must be -1 (A better), 0 (tie) or 1 (B better)")
        return value

    @model_validator(mode="after")
    def _agrees(self):
        if self.difference is not None and _sign(self.difference) != self.score:
            raise ValueError(f"score {self.score} is not the sign of difference {self.difference:g}")
        return self

    def review(self) -> Review:
        return Review(self.question, self.a, self.b, self.reviewer, self.score, self.sample, self.order, self.repeat,
                      self.difference, self.match)


def _sign(value: float) -> int:
    return 0 if abs(value) < TIE else (1 if value > 0 else -1)


def check_line(path: Path, number: int, line: str | bytes) -> Review:
    """One line as ``ReviewLine`` takes it, or the error naming its file, line and field."""
    try:
        review = ReviewLine.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = "".join(f"{p}: " for p in first["loc"][:1])  # none for a disagreement between fields
        message = first["msg"].removeprefix("Value error, ")
        raise ReviewError(f"{path}, line {number}: {where}{message}") from None
    if review.a == review.b:
        raise ReviewError(f"{path}, line {number}: a contestant cannot battle itself ({review.a!r})")
    return review.review()
