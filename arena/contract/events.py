"""Events a match emits as it goes, for the live view, the record and (later) the run store."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.contract.messages import Message


class SeatInfo(BaseModel):
    """Who sits where. Known to the match, the record and the watcher; never to a prompt."""

    model_config = ConfigDict(frozen=True)

    label: str
    role: str
    agent: str


class _Event(BaseModel):
    model_config = ConfigDict(frozen=True)
    match: str


class MatchStarted(_Event):
    type: Literal["match_started"] = "match_started"
    game: str
    seed: int
    seats: tuple[SeatInfo, ...]


class MessagePosted(_Event):
    type: Literal["message"] = "message"
    message: Message


class TurnFailed(_Event):
    """An attempt that did not yield a valid action; the seat is asked again or defaulted."""

    type: Literal["turn_failed"] = "turn_failed"
    round: int
    seat: str
    attempt: int
    failure: Literal["invalid", "timeout", "error"]  # "error": written by versions that re-asked after agent errors
    reply: str | None
    reason: str
    agent: str = ""  # who was asked: a seat's agent, or the judge a referee asked; "" in older records


class ActionTaken(_Event):
    type: Literal["action"] = "action"
    round: int
    seat: str
    action: Any
    reply: str | None
    attempts: int
    defaulted: bool
    agent: str = ""  # who was asked: a seat's agent, or the judge a referee asked; "" in older records


class Scrubbed(_Event):
    """The anonymity filter removed names from a reply before other seats saw it."""

    type: Literal["scrubbed"] = "scrubbed"
    round: int
    seat: str
    found: list[str]


class RoundClosed(_Event):
    type: Literal["round_closed"] = "round_closed"
    round: int


class MatchEnded(_Event):
    type: Literal["match_ended"] = "match_ended"
    rounds: int
    payoffs: dict[str, float]
    status: Literal["finished", "truncated"] = "finished"  # truncated: stopped at max_rounds, not by the game


class MatchFailed(_Event):
    type: Literal["match_failed"] = "match_failed"
    error: str


class MatchInterrupted(_Event):
    """A backend the match needs could not be reached: nothing is scored, and the match is played again."""

    type: Literal["match_interrupted"] = "match_interrupted"
    error: str


Event = Annotated[
    MatchStarted | MessagePosted | TurnFailed | ActionTaken | Scrubbed | RoundClosed | MatchEnded | MatchFailed
    | MatchInterrupted,
    Field(discriminator="type"),
]
