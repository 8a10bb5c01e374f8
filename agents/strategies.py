"""Scripted strategies that fit any game, mostly useful for tests and demos."""

from __future__ import annotations

import random
import string

import trio
from pydantic import Field

from arena.contract import Strategy, StrategyParams, Turn


class FixedParams(StrategyParams):
    replies: list[str] = Field(min_length=1, description="Replies used in turn, one per round, cycling.")


class Fixed(Strategy):
    """Says the given replies, one per round."""

    Params = FixedParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        return self.params.replies[(turn.round - 1) % len(self.params.replies)]


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
