"""What a match is and what it left behind: the specification the run plans and the record the store keeps."""

from __future__ import annotations

import re
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


KeyScheme = Literal["seats", "agents"]
"""How a run's match keys name the seating. seats: each role's places in the entry's agent list
(``pg#1:player=0+1+2``), so a key does not change when an agent is renamed or another one takes
a seat. agents: the agents' names in seat order (``pg#1:a+b+c``), as stores written before
format 6 have them; such a run keeps its keys, and the seeds made from them, when it is resumed."""

KEY_SCHEME: KeyScheme = "seats"
"""The scheme of a new run's keys."""

_KEY = re.compile(r"(?P<where>.*)#(?P<repeat>\d+):(?P<seating>[^:]*)", re.S)
_RESERVED = ",=+:;"
_COMPARED = ";compared="  # what follows the seating in the key of a match playing one chosen comparison  # what separates the parts of a key's seating: no role may hold one


class MatchIdentity(BaseModel):
    """Which match of a run this is, whoever plays in it: the scenario entry, the case (a question,
    a problem) when the game has cases, the repeat, and the seating: for each role, in the order the
    roles first take a seat, the places (0-based, in the entry's agent list) of the agents seated in
    it, in seat order. Who those agents are is data beside the key (the match's seats), so a rescore
    or a replay finds "these contestants' answers to this case" under any judge. (With ``seating:
    random`` the places are the table's in list order; the match draws the seats from its seed.)

    The one place a match key is made (``key``) and read (``parse``); the text is
    ``ENTRY[/CASE]#REPEAT:ROLE=P+P,ROLE=P``, followed by ``;compared=P+P`` for a match that plays one
    chosen comparison (the two answers' places in the game's ``compared`` list, so that the same
    judge's matches on other pairs of the same case have keys, and seeds, of their own). Keys of the older scheme (``names``: agents' names in
    seat order, see ``KeyScheme``) are read and made here too."""

    model_config = ConfigDict(frozen=True)

    entry: str
    case: str | None = None
    repeat: int = Field(1, ge=1)
    seating: tuple[tuple[str, tuple[int, ...]], ...] = ()
    names: tuple[str, ...] = Field((), description="Only in keys of the older scheme: the agents in seat order.")
    compared: tuple[int, ...] = Field((), description="A match that plays one chosen comparison (an adaptive "
                                      "schedule's): the places of its two answers in what the game compares.")

    @classmethod
    def seated(cls, entry: str, case: str | None, repeat: int, roles: Sequence[str], places: Sequence[int]) -> "MatchIdentity":
        """The identity of a match whose seats, in order, have ``roles`` and hold the agents at ``places``."""
        if len(roles) != len(places):
            raise ValueError(f"{len(places)} places given for {len(roles)} seats")
        grouped: dict[str, list[int]] = {}
        for role, place in zip(roles, places):
            if not role or any(c in role for c in _RESERVED):
                raise ValueError(f"the role {role!r} cannot be named in a match key: a role is a non-empty name "
                                 f"without any of {' '.join(_RESERVED)}")
            grouped.setdefault(role, []).append(place)
        return cls(entry=entry, case=case, repeat=repeat, seating=tuple((r, tuple(p)) for r, p in grouped.items()))

    @property
    def where(self) -> str:
        """The entry and the case: ``ENTRY`` or ``ENTRY/CASE``."""
        return self.entry if self.case is None else f"{self.entry}/{self.case}"

    @property
    def key(self) -> str:
        if self.names:
            return f"{self.where}#{self.repeat}:{'+'.join(self.names)}"
        seating = ",".join(f"{role}={'+'.join(map(str, places))}" for role, places in self.seating)
        compared = f"{_COMPARED}{'+'.join(map(str, self.compared))}" if self.compared else ""
        return f"{self.where}#{self.repeat}:{seating}{compared}"

    @property
    def table(self) -> str:
        """The text the seed of a role swap's orders is made from: the places (or, in the older scheme,
        the names) of the table, in order, whatever seat each took; the same for every order."""
        if self.names:
            return f"{self.where}#{self.repeat}:{'+'.join(sorted(self.names))}"
        return f"{self.where}#{self.repeat}:{'+'.join(map(str, sorted(self.places)))}"

    @property
    def places(self) -> tuple[int, ...]:
        """Every place seated, role by role (not in seat order: ``places_in`` gives that)."""
        return tuple(p for _, places in self.seating for p in places)

    def places_in(self, roles: Sequence[str]) -> tuple[int, ...]:
        """The places in seat order, for seats with ``roles`` (the game's ``seat_roles``)."""
        left = {role: list(places) for role, places in self.seating}
        try:
            return tuple(left[role].pop(0) for role in roles)
        except (KeyError, IndexError):
            raise ValueError(f"the match {self.key} seats no one as {roles!r} in that order") from None

    def role_places(self, role: str) -> tuple[int, ...]:
        return dict(self.seating).get(role, ())

    @classmethod
    def parse(cls, key: str) -> "MatchIdentity":
        """The identity a key names; a ValueError, worded for a person, for text that is no match key.

        The entry is what comes before the first ``/`` (an entry's name holds none), the case what
        follows it up to the last ``#``."""
        found = _KEY.fullmatch(key)
        if not found:
            raise ValueError(f"{key!r} is not a match key (ENTRY[/CASE]#REPEAT:ROLE=PLACES,...)")
        entry, slash, case = found["where"].partition("/")
        repeat, seating = int(found["repeat"]), found["seating"]
        if not entry or repeat < 1 or not seating:
            raise ValueError(f"{key!r} is not a match key (ENTRY[/CASE]#REPEAT:ROLE=PLACES,...)")
        common = {"entry": entry, "case": case if slash else None, "repeat": repeat}
        seating, mark, compared = seating.partition(_COMPARED)
        if mark:
            if not all(p.isdigit() for p in compared.split("+")):
                raise ValueError(f"{key!r} is not a match key: {compared!r} should be PLACE+PLACE")
            common["compared"] = tuple(int(p) for p in compared.split("+"))
        if "=" not in seating:  # the older scheme: agents' names
            return cls(**common, names=tuple(seating.split("+")))
        groups = []
        for part in seating.split(","):
            role, eq, places = part.partition("=")
            if not eq or not role or not all(p.isdigit() for p in places.split("+")):
                raise ValueError(f"{key!r} is not a match key: {part!r} should be ROLE=PLACE+PLACE")
            groups.append((role, tuple(int(p) for p in places.split("+"))))
        return cls(**common, seating=tuple(groups))


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

    @property
    def identity(self) -> MatchIdentity:
        """What the key names (a ValueError for a key no plan made, such as a test's "m1")."""
        return MatchIdentity.parse(self.key)


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

    @property
    def identity(self) -> MatchIdentity:
        """What the key names (a ValueError for a key no plan made, such as a test's "m1")."""
        return MatchIdentity.parse(self.key)

    def agent_of(self, seat: str) -> str:
        return next(s.agent for s in self.seats if s.label == seat)

    def role_of(self, seat: str) -> str:
        return next(s.role for s in self.seats if s.label == seat)
