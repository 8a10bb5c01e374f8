"""What a match is and what it left behind: the specification the run plans and the record the store keeps."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.contract.capabilities import Review
from arena.contract.events import Event, SeatInfo
from arena.contract.messages import Message
from arena.contract.referee import RefereeSpec


Status = Literal["finished", "truncated", "failed", "interrupted"]
"""How a match ended. finished: the game said it was over, and it was scored. truncated: it was
stopped at ``max_rounds`` before the game said so; its referee scored the position it reached, the
store and exports keep that, but results and rankings leave it out, since a game stopped part way
is not the game its payoffs are meant to measure. failed: an error (a bug, a refused request)
ended it. interrupted: a backend was down, or the run stopped; never scored, played again on resume."""

KEPT: tuple[str, ...] = ("finished", "truncated")
"""What a resume keeps: the match is over, and playing it again would only end the same way."""


class MatchSettings(BaseModel):
    model_config = ConfigDict(extra="forbid")

    turn_timeout: float = Field(
        60.0, gt=0,
        description="Seconds an agent has to answer one attempt at a turn, its backend's retries included; "
        "a reply that has not come by then gets the game's default.",
    )
    max_retries: int = Field(2, ge=0, description="Times a seat is asked again, with the reason, after an invalid reply.")
    max_rounds: int = Field(
        1000, ge=1, description="Safety stop for games that would not end by themselves; a match stopped by it "
        "is recorded as truncated and left out of the results.",
    )
    # How long the run waits, not how a match plays: left out of the spec and of the scenario's
    # fingerprint, so that changing it never stops a run from resuming.
    outage_wait: float = Field(
        300.0, ge=0, exclude=True,
        description="Seconds a run waits for a backend that cannot be reached to come back (its matches wait, "
        "others go on) before leaving its matches for the next `arena run`.",
    )


class MatchSpec(BaseModel):
    """What a match is. Two equal specs always play the same match."""

    model_config = ConfigDict(frozen=True)

    key: str
    group: str = Field("", description="The scenario entry this match belongs to; results are grouped by it.")
    repeat: int = 1
    game: str
    params: dict[str, Any] = Field(default_factory=dict)
    agents: tuple[str, ...]
    seed: int
    shuffle_seats: bool = True
    referees: tuple[RefereeSpec, ...] = Field((), description="Empty: the game's default referee(s).")
    settings: MatchSettings = Field(default_factory=MatchSettings)
    scrub: tuple[str, ...] = Field((), description="Strings removed from a seat's words before other seats see them.")
    scrub_replacement: str = "[name withheld]"


class MatchRecord(BaseModel):
    key: str
    group: str
    repeat: int = 1
    game: str
    params: dict[str, Any]
    seed: int
    seats: tuple[SeatInfo, ...]
    status: Status
    rounds: int
    payoffs: dict[str, float]  # the first referee's first metric; a seat it could not score is missing
    messages: tuple[Message, ...]
    events: list[Event]
    error: str | None = None
    reviews: list[Review] = Field(default_factory=list)  # agent names, not seats; with their match and repeat
    metrics: dict[str, dict[str, float]] = Field(default_factory=dict)  # every referee's figures: metric -> seat -> value

    def agent_of(self, seat: str) -> str:
        return next(s.agent for s in self.seats if s.label == seat)

    def role_of(self, seat: str) -> str:
        return next(s.role for s in self.seats if s.label == seat)
