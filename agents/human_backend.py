"""The human backend: a person at the terminal plays a seat (or judges, when a referee asks).

A person is shown what a model is sent, as text: the rules, what the seat has seen since its last
reply (all of it at its first turn), the prompt and the time left; then they type the reply. A reply
the game rejects comes back with the game's reason, as it does for a model: the engine asks again.

The screen is borrowed through ``arena.contract.terminal``: the live dashboard steps aside while the
person reads and types, and seats played by people (in one match or in matches played at once) are
asked one after another, never two questions on the screen at a time.
"""

from __future__ import annotations

import hashlib
import math
import shutil
import textwrap
from typing import Literal

import trio
from pydantic import Field

from arena.contract import REFEREE, Agent, AgentConfig, FatalAgentError, Message, Turn
from arena.contract import terminal

RULE = "─" * 72
GO_ON = "\\"  # a line ending with it goes on to the next line


class HumanConfig(AgentConfig):
    backend: Literal["human"] = "human"
    timeout: float | None = Field(None, gt=0, description=(
        "Seconds the person has for each turn (each attempt, when a reply is asked again); none: no limit. "
        "The match's turn_timeout, meant for models, does not apply to a person."))


class HumanAgent(Agent):
    Config = HumanConfig
    uses_terminal = True

    async def prepare(self) -> None:
        if not terminal.has_terminal():
            raise FatalAgentError(f"agent {self.name!r} (backend human) is a person at the terminal, and this run "
                                  "has none: run `arena run` in a terminal, with standard input and error not "
                                  "redirected")

    def turn_timeout(self, match_timeout: float) -> float:
        return self.config.timeout or math.inf

    async def reply(self, turn: Turn) -> str:
        async with terminal.lend_screen():
            terminal.show(screen(turn, _seconds_left(), shutil.get_terminal_size((100, 24)).columns))
            while True:
                reply = await _read_reply()
                if reply.strip():
                    terminal.show("Sent.\n")
                    return reply
                terminal.show("Nothing was typed; type your reply and press Enter.\n> ")


def _seconds_left() -> float:
    return trio.current_effective_deadline() - trio.current_time()


async def _read_reply() -> str:
    """One reply: a line, or several when each but the last ends with a backslash."""
    lines: list[str] = []
    while True:
        line = await terminal.read_line()
        if not line.endswith(GO_ON):
            lines.append(line)
            return "\n".join(lines)
        lines.append(line[:-1])
        terminal.show("… ")


def screen(turn: Turn, seconds_left: float, width: int = 100) -> str:
    """What the person is shown for one attempt at a turn, its lines wrapped at words to ``width``."""
    # The match's key names its agents: the person is shown a short tag of it instead, enough to tell
    # matches played at once apart.
    tag = hashlib.blake2b(turn.match.encode(), digest_size=3).hexdigest()
    rule = RULE[:max(20, width - 1)]
    parts = [rule, f"Match {tag} · round {turn.round} · you are {turn.seat}" +
             (f" ({turn.role})" if turn.role.lower() not in turn.seat.lower() else ""), rule]
    if turn.retries:
        retry = turn.retries[-1]
        parts.append(f"Your reply was not accepted: {retry.reason}")
    else:
        parts += [_said(message, turn.seat) for message in _news(turn)]
    parts += ["", turn.prompt, "", _time_left(seconds_left),
              f"Type your reply and press Enter (end a line with {GO_ON} to go on to the next line)."]
    lines = [wrapped for part in parts for line in part.split("\n")
             for wrapped in (textwrap.wrap(line, max(20, width - 1), replace_whitespace=False) or [""])]
    return "\n".join(lines) + "\n> "


def _news(turn: Turn) -> list[Message]:
    """What the seat has not been shown yet: everything at its first turn, else what came after its
    last reply. Worked out from the turn alone, as an agent keeps no state of its own."""
    history = list(turn.history)
    if turn.turn == 0:
        return history
    last = max((i for i, message in enumerate(history) if message.sender == turn.seat), default=-1)
    return history[last + 1:]


def _said(message: Message, seat: str) -> str:
    if message.sender == REFEREE:
        return f"\n{message.content}"
    if message.sender == seat:
        return f"\nYou said:\n{message.content}"
    return f"\n{message.sender} said:\n{message.content}"


def _time_left(seconds: float) -> str:
    if math.isinf(seconds):
        return "No time limit."
    seconds = max(0, int(seconds))
    return f"Time left: {seconds // 60}:{seconds % 60:02d}."
