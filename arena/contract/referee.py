"""The referee API: who decides that a match is over and what it scored.

A match has one or more referees. Each returns figures per seat under metric names
(``{"payoff": {...}}``, ``{"judge": {...}}``, ``{"tests": {...}}``); the first metric of
the first referee is the match's payoff, the rest are reported beside it, and the first
referee also gives the match's reviews. Referees that need a model (an LLM judge) ask it
through the match's ``Desk``, which applies the same timeout and invalid-reply rules as a
seat's turn and records everything. What a referee needs of a game beyond its rules it
names in ``needs``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, ClassVar, Protocol, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from arena.contract.capabilities import Review, ReportsReviews, has
from arena.contract.game import NoParams
from arena.contract.messages import Transcript

if TYPE_CHECKING:
    from arena.contract.game import Game

T = TypeVar("T")
Scores = dict[str, dict[str, float]]  # metric -> seat -> value


class RefereeSpec(BaseModel):
    """A referee as a scenario names it: the plugin and its parameters."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    use: str = Field(description="A registered referee: rules, llm_judge, panel, execution, human, or a plugin's.")
    params: dict[str, Any] = Field(default_factory=dict)


class Desk(Protocol):
    """What the match lends its referees."""

    async def ask(self, agent: str, prompt: str, parse: Callable[[str], T], data: dict[str, Any] | None = None) -> T | None:
        """Ask a scenario agent (not seated in the match) for a verdict. ``parse`` raises
        ``InvalidReply`` to have it asked again with the reason; None when no valid reply came."""
        ...

    def post_verdict(self, text: str, data: dict[str, Any]) -> None:
        """Record a verdict in the match's transcript (visible to no seat)."""
        ...


class Referee(ABC):
    """Asked by the match loop after every round, and once at the end.

    Async because some referees (an LLM judge, code execution) take time to decide.
    """

    Params: ClassVar[type[BaseModel]] = NoParams
    description: ClassVar[str] = ""
    # Capabilities (arena.contract.capabilities) a game must have for this referee to score it;
    # `arena validate` refuses a game that lacks one, before anything is played.
    needs: ClassVar[tuple[type, ...]] = ()

    def __init__(self, params: BaseModel, desk: Desk):
        self.params = params
        self.desk = desk

    @classmethod
    def agents_needed(cls, params: BaseModel) -> list[str]:
        """Scenario agents this referee asks (checked by ``arena validate``)."""
        return []

    def example_reply(self, game: Game, agent: str) -> str | None:
        """A valid reply of typical length that ``agent`` might give when this referee asks it
        about ``game`` (now over), for ``arena run --dry-run``; None when this referee does not
        ask ``agent`` or has no idea."""
        return None

    async def is_over(self, game: Game, pool: Transcript, round: int) -> bool:
        return game.is_over(round)

    @abstractmethod
    async def score(self, game: Game, pool: Transcript) -> Scores:
        """Figures per seat, by metric. A seat may be missing from a metric it could not be scored on."""

    def reviews(self, game: Game) -> list[Review]:
        """Pairwise verdicts for peer rank, once the match is scored (seat labels, as
        ``ReportsReviews.reviews`` gives them). A match's reviews are its first referee's, as its
        payoff is. Default: the game's own, when it reports any."""
        return game.reviews() if has(game, ReportsReviews) else []
