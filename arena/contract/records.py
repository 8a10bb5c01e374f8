"""What a match is and what it left behind: the specification the run plans and the record the store keeps."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, GetCoreSchemaHandler
from pydantic_core import core_schema

from arena.contract.capabilities import Review
from arena.contract.events import Event, MessagePosted, SeatInfo
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
    scrub_allow: tuple[str, ...] = Field((), description="Phrases the anonymity filter keeps (\"Google Sheets\").")
    scrub_material: bool = Field(False, description="Scrub the referee's own text too, not only what agents wrote.")


class EventLog(Sequence[Event]):
    """A match's events in order, each posted message held once.

    Where a `MessagePosted` event was, the log keeps the message itself (the very object the
    record's ``messages`` holds) and makes the event again when it is read: a match of a few
    hundred messages does not carry a second copy of its transcript. Read, compared and
    serialised, it is the list of events it was given."""

    __slots__ = ("match", "_items")

    def __init__(self, events: Iterable[Event] = (), match: str = ""):
        self.match = match
        self._items: list[Any] = []
        for event in events:
            self.append(event)

    def append(self, event: Event) -> None:
        if event.type == "message":  # cheaper than isinstance, and this runs for every event
            self.match = self.match or event.match
            self._items.append(event.message)
        else:
            self._items.append(event)

    def append_message(self, message: Message) -> None:
        """The `MessagePosted` event of ``message``, without making the event (the log keeps the message)."""
        self._items.append(message)

    def _event(self, item: Any) -> Event:
        return MessagePosted.model_construct(match=self.match, message=item) if isinstance(item, Message) else item

    def __len__(self) -> int:
        return len(self._items)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self._event(item) for item in self._items[i]]
        return self._event(self._items[i])

    def __iter__(self) -> Iterator[Event]:
        for item in self._items:
            yield self._event(item)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or len(self) != len(other):
            return False
        return all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"EventLog({len(self)} events)"

    @classmethod
    def __get_pydantic_core_schema__(cls, source: Any, handler: GetCoreSchemaHandler) -> core_schema.CoreSchema:
        as_list = handler.generate_schema(list[Event])
        from_list = core_schema.no_info_after_validator_function(cls, as_list)
        return core_schema.json_or_python_schema(
            json_schema=from_list,
            python_schema=core_schema.union_schema([core_schema.is_instance_schema(cls), from_list]),
            serialization=core_schema.plain_serializer_function_ser_schema(list, return_schema=as_list),
        )


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
    events: EventLog  # every event, MessagePosted included: each message is held once, in `messages`
    error: str | None = None
    reviews: list[Review] = Field(default_factory=list)  # agent names, not seats; with their match and repeat
    metrics: dict[str, dict[str, float]] = Field(default_factory=dict)  # every referee's figures: metric -> seat -> value

    def agent_of(self, seat: str) -> str:
        return next(s.agent for s in self.seats if s.label == seat)

    def role_of(self, seat: str) -> str:
        return next(s.role for s in self.seats if s.label == seat)
