"""What travels through a match: messages in the pool and the turn an agent is asked to take."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Any, Literal, Protocol

from pydantic import BaseModel, ConfigDict, Field, PlainValidator, field_serializer

REFEREE = "Referee"

# What a seat reads before the other seats' replies of a round it was asked in: they were written at the
# same time as its own, which it is shown first.
SIMULTANEOUS = ("The other replies of that round follow. They were written at the same time as your turn: "
                "no one saw another's reply before giving their own.")

# prompt: what a seat was asked at a turn; verdict: a referee's judgment at the end
MessageKind = Literal["rules", "prompt", "reply", "notice", "verdict"]


class Message(BaseModel):
    """One entry of a match's append-only log.

    ``round`` is the round in which the message was posted; it becomes visible to
    ``recipients`` (and always to its sender) only once that round has closed.
    ``data`` carries the same facts as ``content`` in structured form, for scripted
    agents and for analysis; language models only ever see ``content``. ``shown`` is
    what the seats other than the sender were shown instead, when the anonymity filter
    took names out of it.
    """

    model_config = ConfigDict(frozen=True)

    index: int
    round: int
    sender: str
    recipients: tuple[str, ...]
    content: str
    kind: MessageKind
    data: dict[str, Any] | None = None
    shown: str | None = None

    @classmethod
    def made(cls, index: int, round: int, sender: str, recipients: tuple[str, ...], content: str, kind: MessageKind,
             data: dict[str, Any] | None = None, shown: str | None = None) -> Message:
        """A message from values already of the fields' types (the engine's own, or a stored row's),
        made without pydantic's validation: that took 3 µs, a twelfth of what a whole message costs.
        It is set up as pydantic sets up a model it validated, so it compares, copies and serialises
        like any other. The caller vouches for the types; ``MessagePool.post`` checks what a game gave."""
        message = object.__new__(cls)
        _set(message, "__dict__", {"index": index, "round": round, "sender": sender, "recipients": recipients,
                                   "content": content, "kind": kind, "data": data, "shown": shown})
        _set(message, "__pydantic_fields_set__", set(_FIELDS))
        _set(message, "__pydantic_extra__", None)
        _set(message, "__pydantic_private__", None)
        return message

    def visible_to(self, seat: str) -> bool:
        return seat == self.sender or seat in self.recipients

    def as_shown(self) -> "Message":
        """The message as the seats other than its sender see it."""
        if self.shown is None:
            return self
        return Message.made(self.index, self.round, self.sender, self.recipients, self.shown, self.kind, self.data)


_set = object.__setattr__  # a frozen model refuses the usual way
_FIELDS = frozenset(Message.model_fields)


class Transcript(Protocol):
    """A match's messages as a referee reads them (the engine's message pool is one)."""

    round: int

    @property
    def log(self) -> tuple[Message, ...]: ...

    def visible_to(self, seat: str) -> tuple[Message, ...]: ...


class Retry(BaseModel):
    """A failed attempt at the current turn, shown back to the seat when it is asked again."""

    model_config = ConfigDict(frozen=True)

    reply: str | None
    reason: str


def _a_sequence(value: Any) -> Sequence[Message]:
    """A turn's history is taken as it is given: the engine hands a read-only view of the seat's
    inbox, whose messages it made itself, and checking each of them again at every turn would
    make a turn cost as much as the whole conversation."""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise ValueError("history must be a sequence of messages")
    return value


class Turn(BaseModel):
    """Everything an agent is given when asked to act.

    This is the whole of what reaches a model: it holds seat labels only, never the
    names of the agents behind other seats.
    """

    model_config = ConfigDict(frozen=True)

    match: str
    seat: str
    role: str
    round: int
    turn: int = Field(0, description="How many turns this seat was asked for earlier in the match (0: its first), "
                      "counted by the engine whatever rounds it sat out and whatever its history shows.")
    history: Annotated[Sequence[Message], PlainValidator(_a_sequence)] = Field(description="What the seat may see, oldest first: the rules, every prompt it "
                                       "was given, its own replies and what it heard.")
    prompt: str
    retries: tuple[Retry, ...] = ()
    seed: int = Field(description="Derived from the match seed, seat, round and attempt; for agents that sample.")
    action_schema: dict[str, Any] | None = Field(None, description="JSON schema of a valid action, when the game declares one.")
    prompt_data: dict[str, Any] | None = Field(None, description="The prompt's facts in structured form, for scripted agents.")

    @field_serializer("history")
    def _history_as_tuple(self, history: Sequence[Message]) -> tuple[Message, ...]:
        return tuple(history)  # the engine hands a read-only view of the inbox, not a copy

    @property
    def attempt(self) -> int:
        return len(self.retries)

    def as_chat(self) -> list[dict[str, str]]:
        """The turn as chat messages: the seat's own words are assistant turns, the rest user turns.

        The referee's voice is the user role itself: its text goes out as written, with no speaker
        tag at the start for a model to copy into its own replies. Another seat's words are
        introduced by its label alone (``heard``), so the model knows who spoke without learning
        which agent that is. Other seats' replies of a round this seat was asked in were written at
        the same time as its own (the pool shows them after it): a line says so before the first of
        them, so the model does not read its reply as an answer to words it had not seen."""
        chat: list[dict[str, str]] = []
        seat = self.seat
        asked = introduced = None  # the last round this seat was asked in; the last one said to be simultaneous
        for message in self.history:
            if message.sender == seat:
                chat.append({"role": "assistant", "content": message.content})
                asked = message.round
                continue
            if message.kind == "prompt":  # its own: a prompt reaches only the seat it asks
                asked = message.round
            elif message.kind == "reply" and message.round == asked and introduced != asked:
                chat.append({"role": "user", "content": SIMULTANEOUS})
                introduced = asked
            chat.append({"role": "user", "content": heard(message.sender, message.content)})
        chat.append({"role": "user", "content": self.prompt})
        for retry in self.retries:
            if retry.reply is not None:
                chat.append({"role": "assistant", "content": retry.reply})
            chat.append({"role": "user", "content": f"{retry.reason} {self.prompt}"})
        return chat


def heard(sender: str, content: str) -> str:
    """A message as another seat's model reads it: the referee's text as written; a seat's words
    after a line naming its seat label ("Player 2 said:"), never the agent behind it."""
    return content if sender == REFEREE else f"{sender} said:\n{content}"
