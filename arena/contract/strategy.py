"""The strategy contract: a scripted player, written as a small class the `scripted` backend runs."""

from __future__ import annotations

import random
from typing import Any, ClassVar

from pydantic import BaseModel, ConfigDict

from arena.contract.messages import Turn


class StrategyParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Strategy:
    """A deterministic player: ``reply`` sees the turn and an RNG seeded from it."""

    Params: ClassVar[type[StrategyParams]] = StrategyParams

    def __init__(self, params: StrategyParams):
        self.params = params

    def reply(self, turn: Turn, rng: random.Random) -> Any:
        """Return the reply text, or an awaitable of it."""
        raise NotImplementedError
