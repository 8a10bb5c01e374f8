"""The message pool: an append-only log whose messages are released round by round."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arena.contract.messages import Message, MessageKind


class MessagePool:
    """Holds a match's messages and enforces synchronicity.

    Whatever is posted during round ``r`` is staged; it is delivered, to its
    recipients only, when round ``r`` closes. A seat answering round ``r`` can
    therefore only ever see messages of rounds before ``r``.
    """

    def __init__(self, seats: Iterable[str]):
        self.seats = tuple(seats)
        self.round = 0
        self._delivered: list[Message] = []
        self._staged: list[Message] = []
        self._inbox: dict[str, list[Message]] = {seat: [] for seat in self.seats}  # what each seat can see

    def post(
        self,
        sender: str,
        content: str,
        recipients: Iterable[str],
        kind: MessageKind,
        data: dict[str, Any] | None = None,
    ) -> Message:
        recipients = tuple(recipients)
        unknown = set(recipients) - set(self.seats)
        if unknown:
            raise ValueError(f"message addressed to unknown seats {sorted(unknown)}")
        message = Message(
            index=len(self._delivered) + len(self._staged),
            round=self.round,
            sender=sender,
            recipients=recipients,
            content=content,
            kind=kind,
            data=data,
        )
        self._staged.append(message)
        return message

    def close_round(self) -> tuple[Message, ...]:
        """Deliver what was posted this round and move on to the next one."""
        released = tuple(self._staged)
        self._delivered.extend(released)
        for message in released:
            for seat in self.seats:
                if message.visible_to(seat):
                    self._inbox[seat].append(message)
        self._staged.clear()
        self.round += 1
        return released

    def visible_to(self, seat: str) -> tuple[Message, ...]:
        return tuple(self._inbox[seat])

    @property
    def log(self) -> tuple[Message, ...]:
        """Every message, delivered or staged, in posting order."""
        return tuple(self._delivered) + tuple(self._staged)
