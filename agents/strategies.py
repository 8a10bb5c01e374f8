"""Scripted strategies that fit any game, mostly useful for tests and demos."""

from __future__ import annotations

import random
import string
from typing import Literal

import trio
from pydantic import Field

from arena.contract import REFEREE, Strategy, StrategyParams, Turn


class FixedParams(StrategyParams):
    replies: list[str] = Field(min_length=1, description="Replies said in order, cycling.")
    cycle: Literal["turn", "round"] = Field(
        "turn", description="turn: one reply per turn of the seat's own (its first turn gets the first reply, "
        "whichever round that is); round: reply i in round i + 1, to script what a seat says by position.")


class Fixed(Strategy):
    """Says the given replies in order. An attempt asked again after an invalid reply is the same
    turn, so it gets the same reply again."""

    Params = FixedParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        index = own_turns(turn) if self.params.cycle == "turn" else turn.round - 1
        return self.params.replies[index % len(self.params.replies)]


def own_turns(turn: Turn) -> int:
    """How many turns the seat took before this one, counted from its conversation, which holds every
    prompt it was given. A game whose turns stand alone (a judge's samples) shows it none of them:
    each of its turns is then a first."""
    return sum(1 for m in turn.history if m.kind == "prompt" and m.sender == REFEREE)


class Garbage(Strategy):
    """Replies with random characters: a stand-in for a model that ignores the format."""

    def reply(self, turn: Turn, rng: random.Random) -> str:
        alphabet = string.ascii_letters + string.punctuation + " "
        return "".join(rng.choice(alphabet) for _ in range(rng.randint(5, 40)))


class Hang(Strategy):
    """Never replies: a stand-in for a dead or stuck backend."""

    async def reply(self, turn: Turn, rng: random.Random) -> str:
        await trio.sleep_forever()
        raise AssertionError("unreachable")
