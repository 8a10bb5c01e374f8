"""What a game can offer besides its rules, as small protocols.

A referee says which of these it needs (``Referee.needs``); ``arena validate`` checks the game
has them before anything is played, and the engine knows none of them. A game gains one by
defining its method; inheriting the protocol as well says so to a reader and gives it the
default docstring. The checks are structural, so a third-party game that only defines the
method counts too.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict

Review = tuple[str, str, str, str, int]  # (question, A, B, reviewer, score), score -1: A better, 0 tie, +1 B


class JudgeRequest(BaseModel):
    """What a judging referee (an LLM judge) is shown once a match is over.

    ``text`` holds the task, what the seats said and the criteria, in the game's words;
    the referee adds how to answer. ``seats`` are the seats to be scored. ``data`` holds
    the same material in structured form, for scripted and synthetic judges."""

    model_config = ConfigDict(frozen=True)

    text: str
    seats: tuple[str, ...]
    data: dict[str, Any] | None = None


class Program(BaseModel):
    """Code a match produced, to be run against tests by an executing referee.

    ``tests`` is HumanEval-style: it defines ``check(candidate)``, which is called with the
    function named ``entry_point``. The outcome is credited to ``seats``."""

    model_config = ConfigDict(frozen=True)

    code: str
    tests: str
    entry_point: str
    seats: tuple[str, ...]


@runtime_checkable
class Judged(Protocol):
    """has something for a judge to score at the end (judge_request)"""

    def judge_request(self) -> JudgeRequest | None:
        """What a judge scores once the match is over; None when this match left nothing to judge."""
        ...


@runtime_checkable
class WritesCode(Protocol):
    """writes code to run against tests (programs)"""

    def programs(self) -> list[Program]:
        """The code a finished match produced, with its tests."""
        ...


@runtime_checkable
class ReportsReviews(Protocol):
    """reports pairwise verdicts for peer rank (reviews)"""

    def reviews(self) -> list[Review]:
        """Pairwise verdicts the match produced: (question, A, B, reviewer, score), score -1 when A
        (shown first) is better, 0 for a tie, +1 when B is. A, B and the reviewer are seat labels
        (the engine puts agent names in their place); a reviewer that is not a seat (an outside
        judge) keeps its own name."""
        ...


@runtime_checkable
class HasCases(Protocol):
    """is played on cases: questions, problems, texts (cases)"""

    @classmethod
    def cases(cls, params: BaseModel) -> list[str] | None:
        """The cases the game is played on, one match each; the tournament sets ``params.case``
        for each. None: these params name no cases."""
        ...


def has(game: type | object, capability: type) -> bool:
    """Whether a game (its class or one match's instance) offers ``capability``."""
    cls = game if isinstance(game, type) else type(game)
    return issubclass(cls, capability)


def describe(capability: type) -> str:
    """What a capability means, for a message: the first line of its docstring."""
    return (capability.__doc__ or capability.__name__).strip().splitlines()[0]
