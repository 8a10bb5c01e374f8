"""Scripted strategies that fit any game, mostly useful for tests and demos."""

from __future__ import annotations

import random
import string
from typing import Literal

import trio
from pydantic import Field

from arena.contract import Strategy, StrategyParams, Turn


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
        index = turn.turn if self.params.cycle == "turn" else turn.round - 1
        return self.params.replies[index % len(self.params.replies)]


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
