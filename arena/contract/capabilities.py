"""What a game can offer besides its rules, as small protocols.

A referee says which of these it needs (``Referee.needs``); ``arena validate`` checks the game
has them before anything is played, and the engine knows none of them. A game gains one by
defining its method; inheriting the protocol as well says so to a reader and gives it the
default docstring. The checks are structural, so a third-party game that only defines the
method counts too.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict


class Review(NamedTuple):
    """One pairwise verdict as it was given: PRD's battle (the first five fields) and where it
    sits among the verdicts it is calibrated with.

    ``a`` is the answer shown first, ``b`` the one shown second; ``score`` is -1 when ``a`` is
    better, 0 for a tie, +1 when ``b`` is. A verdict with a ``sample`` index is one of the k
    samples (FairEval's MEC) of a comparison that may also have been shown the other way round
    (``order`` 1: the pair's own order swapped, BPC); peer rank averages the samples and both
    orders of one reviewer, question, pair and match into one calibrated verdict. Without a
    ``sample`` it is a battle of its own, as in PRD's released data. ``difference`` is the raw
    verdict the score is the sign of, in the score's direction (the second-shown answer's score
    minus the first's, or the choice as -1/0/+1), so the calibration averages what the judge
    said rather than its sign. ``repeat`` and ``match`` say which match gave it; the engine sets
    them, and puts agent names in place of seat labels."""

    question: str
    a: str
    b: str
    reviewer: str
    score: int
    sample: int | None = None
    order: int = 0
    repeat: int = 1
    difference: float | None = None
    match: str = ""

    @property
    def battle(self) -> tuple[str, str, str, str, int]:
        """(question, a, b, reviewer, score): the verdict without its structure."""
        return self.question, self.a, self.b, self.reviewer, self.score

    def given_in(self, match: str, repeat: int, agent: Mapping[str, str]) -> "Review":
        """This verdict as a run keeps it: in ``match`` (its ``repeat``), seat labels replaced by
        the agents in ``agent`` (a name that is no seat, an outside judge's, stays)."""
        return self._replace(a=agent.get(self.a, self.a), b=agent.get(self.b, self.b),
                             reviewer=agent.get(self.reviewer, self.reviewer), score=int(self.score),
                             match=match, repeat=repeat)


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
        """Pairwise verdicts the match produced (``Review``; a plain (question, A, B, reviewer,
        score) tuple is read as a battle of its own). A, B and the reviewer are seat labels (the
        engine puts agent names in their place, and sets the repeat and match); a reviewer that is
        not a seat (an outside judge) keeps its own name. Give each comparison's ``sample`` and
        ``order`` when verdicts are sampled or shown both ways, so that peer rank calibrates them
        as the game does.

        A game whose reviews compare answers it keeps may also set the class attribute
        ``answers_field``: the top-level field of its last notice's data that holds those answers,
        {seat label (or source name): text}; ``arena rank --style-control`` measures their style."""
        ...


@runtime_checkable
class PlaysComparisons(Protocol):
    """can play one chosen comparison in a match: one pair of answers shown both ways to one judge (compared, comparison)"""

    @classmethod
    def compared(cls, params: BaseModel) -> list[str] | None:
        """The names of what is compared under these params (the sources of fixed answers), in a fixed
        order: an adaptive schedule chooses pairs of them. None: these params compare what seated
        players write; a schedule plays them only if the game also ``AnswersOnce`` (each player asked
        once, in a match of its own), and is refused otherwise."""
        ...

    @classmethod
    def comparison(cls, params: BaseModel, first: str, second: str) -> dict[str, Any]:
        """The params that make a match play only the comparison of ``first`` with ``second`` (two of
        ``compared``), shown in both orders so that position bias cancels, each to every seat (the match
        seats one judge). Merged over the entry's params; the case is set as for any match."""
        ...


@runtime_checkable
class AnswersOnce(Protocol):
    """can play an adaptive schedule with live contestants: asks each one a case in a match of its own, then compares the stored answers (answering, answer_only, comparing)"""

    @classmethod
    def answering(cls, params: BaseModel, agents: list[str]) -> tuple[list[str], list[str]] | None:
        """Of an entry's agents, in their listed order: those that answer (the contestants) and those
        that judge. None: these params have no live contestants (``compared`` names what is compared)."""
        ...

    @classmethod
    def answer_only(cls, params: BaseModel) -> dict[str, Any]:
        """The params that make a match seat one contestant, ask it the case and keep its answer in the
        last notice's ``answers_field`` ({seat label: text}; nothing for an empty answer), with no review
        and no payoff. Merged over the entry's params; the case is set as for any match."""
        ...

    @classmethod
    def comparing(cls, params: BaseModel, first: str, second: str, texts: Mapping[str, str]) -> dict[str, Any]:
        """As ``comparison``, for two contestants whose answers (``texts``, by name) were kept by answer-only
        matches: a match of one judge shown these texts in both orders, its reviews naming the contestants."""
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
