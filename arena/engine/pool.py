"""The message pool: an append-only log whose messages are released round by round."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from arena.contract.messages import Message, MessageKind

_KINDS = frozenset(MessageKind.__args__)


class InboxView(Sequence[Message]):
    """What a seat could see when it was asked: a read-only window on its inbox.

    Taking one costs nothing whatever the length of the history, and it never grows:
    messages delivered later are past its end."""

    __slots__ = ("_items", "_end")

    def __init__(self, items: list[Message], end: int):
        self._items, self._end = items, end

    def __len__(self) -> int:
        return self._end

    def __getitem__(self, i):
        if isinstance(i, slice):
            return tuple(self._items[: self._end][i])
        if i < 0:
            i += self._end
        if not 0 <= i < self._end:
            raise IndexError(i)
        return self._items[i]

    def __iter__(self) -> Iterator[Message]:
        items = self._items
        for i in range(self._end):
            yield items[i]

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Sequence) and len(self) == len(other) and all(a == b for a, b in zip(self, other))

    def __repr__(self) -> str:
        return f"InboxView({len(self)} messages)"


class MessagePool:
    """Holds a match's messages and enforces synchronicity.

    Whatever is posted during round ``r`` is staged; it is delivered, to its
    recipients only, when round ``r`` closes. A seat answering round ``r`` can
    therefore only ever see messages of rounds before ``r``, and in its inbox its own
    words of round ``r`` come before the other seats' words of that round.

    A message may come with the version the other seats are shown (``Message.shown``,
    made by the anonymity filter when it was posted): its sender gets its own words
    back, every other recipient that version, made once.
    """

    def __init__(self, seats: Iterable[str]):
        self.seats = tuple(seats)
        self._known = frozenset(self.seats)
        self.round = 0
        self._log: list[Message] = []
        self._staged_from = 0  # messages from here on are staged
        self._inbox: dict[str, list[Message]] = {seat: [] for seat in self.seats}  # what each seat can see
        self._for_others: dict[int, Message] = {}  # staged messages whose data the filter changed

    def post(
        self,
        sender: str,
        content: str,
        recipients: Iterable[str],
        kind: MessageKind,
        data: dict[str, Any] | None = None,
        shown: str | None = None,
        shown_data: dict[str, Any] | None = None,
    ) -> Message:
        """``shown`` and ``shown_data``: what the seats other than the sender get instead of the
        content and the data (the anonymity filter's version); only ``shown`` is kept in the record."""
        recipients = tuple(recipients)
        if not self._known.issuperset(recipients):
            raise ValueError(f"message addressed to unknown seats {sorted(set(recipients) - self._known)}")
        shown = None if shown == content else shown
        if type(content) is str and (data is None or type(data) is dict) and kind in _KINDS:
            message = Message.made(len(self._log), self.round, sender, recipients, content, kind, data, shown)
        else:  # not what the fields hold (a game's bug): pydantic converts it or says what is wrong
            message = Message(index=len(self._log), round=self.round, sender=sender, recipients=recipients,
                              content=content, kind=kind, data=data, shown=shown)
        self._log.append(message)
        if shown_data is not None and shown_data != data:
            self._for_others[message.index] = message.as_shown().model_copy(update={"data": shown_data})
        return message

    def close_round(self) -> tuple[Message, ...]:
        """Deliver what was posted this round and move on to the next one.

        The seats' words of one round were written at the same time: none of them had read another's.
        So each seat gets the round as it lived it, its own words before any other seat's words of the
        round (a seat posted later only because of its place in the seat order); everything else keeps
        its posting order. The log keeps the posting order."""
        released = tuple(self._log[self._staged_from:])
        inbox = self._inbox
        others_from: dict[str, int] = {}  # seat -> where the first other seat's words of this round sit in its inbox
        for message in released:
            others = self._for_others.pop(message.index, None) or message.as_shown()
            sender = message.sender
            from_a_seat = sender in inbox  # not the referee
            if from_a_seat:
                own = inbox[sender]
                at = others_from.get(sender)
                if at is None:
                    own.append(message)
                else:  # it wrote this without having read them: it goes before them
                    own.insert(at, message)
                    others_from[sender] = at + 1
            for seat in message.recipients:
                if seat != sender:
                    box = inbox[seat]
                    if from_a_seat and seat not in others_from:
                        others_from[seat] = len(box)
                    box.append(others)
        self._staged_from = len(self._log)
        self.round += 1
        return released

    def visible_to(self, seat: str) -> InboxView:
        inbox = self._inbox[seat]
        return InboxView(inbox, len(inbox))

    @property
    def log(self) -> tuple[Message, ...]:
        """Every message, delivered or staged, in posting order, as its sender wrote it."""
        return tuple(self._log)

    @property
    def last(self) -> Message | None:
        return self._log[-1] if self._log else None
