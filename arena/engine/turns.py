"""One turn under a match's rules: the deadline, the re-asks after an invalid reply, the default.

Seats and a referee's judges are asked the same way, by the match's ``Asker``. Only what an agent
said can become its move: an invalid reply is asked again with the reason and then defaulted, a
reply that does not come in time is defaulted at once. What the agent raises is not caught here:
it is not a move, and it ends the match (an unreachable backend interrupts it); a reply too long to
be read (``ReplyCut``) is the one exception, taken as an invalid reply with nothing of it kept.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import trio
from pydantic import BaseModel

from arena.contract import seeding
from arena.contract.agent import Agent, ReplyCut
from arena.contract.events import ActionTaken, Event, TurnFailed
from arena.contract.game import InvalidReply
from arena.contract.messages import Message, Retry, Turn
from arena.contract.records import MatchSettings

EventSink = Callable[[Event], None]
Failure = Literal["invalid", "timeout"]


@dataclass(frozen=True, slots=True)
class Outcome:
    """How a turn ended: the action it gave the game, the reply it came from (the last one given,
    for a defaulted turn; None when nothing came), the attempts it took, why it was defaulted
    (None: a valid reply was parsed), and who was asked."""

    action: Any
    reply: str | None
    attempts: int
    failure: Failure | None = None
    agent: str = ""  # the name of the agent asked

    @property
    def defaulted(self) -> bool:
        return self.failure is not None


_PLAIN = (str, int, float, bool, type(None))


def jsonable(action: Any) -> Any:
    """An action as an event can carry it: a model's fields, JSON as it is, anything else its repr."""
    if type(action) in _PLAIN:
        return action
    if isinstance(action, BaseModel):
        return action.model_dump(mode="json")
    try:
        json.dumps(action)
        return action
    except TypeError:
        return repr(action)


class Asker:
    """Asks agents for turns of one match, under its settings, and reports what became of them."""

    def __init__(self, key: str, seed: int, settings: MatchSettings, emit: EventSink):
        self.key, self.seed, self.settings, self._emit = key, seed, settings, emit
        self._asked: dict[str, int] = {}  # turns each seat was asked for so far (a re-ask is the same turn)
        self._prefixes: dict[str, str] = {}

    def turn(self, seat: str, role: str, round: int, history: Sequence[Message], prompt: str,
             action_schema: dict[str, Any] | None = None, prompt_data: dict[str, Any] | None = None) -> Turn:
        """The first attempt at a turn."""
        earlier = self._asked.get(seat, 0)
        self._asked[seat] = earlier + 1
        return Turn(match=self.key, seat=seat, role=role, round=round, turn=earlier, history=history, prompt=prompt,
                    seed=self._seed(seat, round, 0), action_schema=action_schema, prompt_data=prompt_data)

    def _seed(self, seat: str, round: int, attempt: int) -> int:
        """``seeding.derive(seed, "turn", seat, round, attempt)``, with the seat's part of the text made once."""
        prefix = self._prefixes.get(seat)
        if prefix is None:
            prefix = self._prefixes[seat] = seeding.joined(self.seed, "turn", seat, "")
        return seeding.hashed(f"{prefix}{round}\x1f{attempt}")

    async def ask(self, agent: Agent, turn: Turn, parse: Callable[[str], Any], default: Callable[[], Any],
                  first: str | None = None, name: str | None = None) -> Outcome:
        """The turn, asked again with the reason after an invalid reply up to ``max_retries`` times;
        a reply that has not come within the agent's turn timeout (``Agent.turn_timeout``) is defaulted at once: asking again would
        only wait again (the backend has already retried what it could in that time).

        ``first``: the reply to the first attempt, when the agent gave it at once
        (``Agent.reply_now``); None: it is awaited. A reply given at once needs no timer.
        ``name``: the agent's name in the scenario, which its events carry (default: its own name)."""
        settings = self.settings
        name = agent.name if name is None else name
        retries: list[Retry] = []
        last_reply: str | None = None
        for attempt in range(settings.max_retries + 1):
            reply: Any = first
            if attempt:
                turn = turn.model_copy(update={"retries": tuple(retries), "seed": self._seed(turn.seat, turn.round, attempt)})
                reply = agent.reply_now(turn)
            cut: ReplyCut | None = None
            if reply is None:
                timeout = agent.turn_timeout(settings.turn_timeout)  # a person's differs from a model's
                with trio.move_on_after(timeout) as timer:
                    try:
                        reply = await agent.reply(turn)
                    except ReplyCut as exc:  # too long to be read: no move, and asked again like any invalid reply
                        cut = exc
                if timer.cancelled_caught:
                    self._failed(turn, attempt, "timeout", None, f"No reply arrived within {timeout:g} seconds.", name)
                    return Outcome(default(), last_reply, attempt + 1, "timeout", name)
            if cut is not None:
                reason = cut.reason
            elif not isinstance(reply, str):
                reason = "The reply was not text."
                reply = None if reply is None else repr(reply)
            else:
                last_reply = reply
                try:
                    return Outcome(parse(reply), reply, attempt + 1, agent=name)
                except InvalidReply as exc:
                    reason = exc.reason
            self._failed(turn, attempt, "invalid", reply, reason, name)
            retries.append(Retry(reply=reply, reason=reason))
        return Outcome(default(), last_reply, settings.max_retries + 1, "invalid", name)

    def taken(self, round: int, seat: str, outcome: Outcome) -> None:
        """Report the action a turn came to."""
        self._emit(ActionTaken(match=self.key, round=round, seat=seat, action=jsonable(outcome.action),
                               reply=outcome.reply, attempts=outcome.attempts, defaulted=outcome.defaulted,
                               agent=outcome.agent))

    def _failed(self, turn: Turn, attempt: int, failure: Failure, reply: str | None, reason: str, agent: str) -> None:
        self._emit(TurnFailed(match=self.key, round=turn.round, seat=turn.seat, attempt=attempt + 1,
                              failure=failure, reply=reply, reason=reason, agent=agent))
