"""A scripted player for take away (docs/examples/take_away.py): it leaves the next player a
multiple of most + 1 stones whenever it can, which wins for whoever moves first on any other pile.
It can be told to slip, taking one stone instead, to stand in for a player that is not perfect."""

from __future__ import annotations

import json
import random

from pydantic import Field

from arena.contract import Strategy, StrategyParams, Turn


class LeaveAMultipleParams(StrategyParams):
    slip: float = Field(0.0, ge=0, le=1, description="Chance, each turn, of taking one stone instead of the best move.")


class LeaveAMultiple(Strategy):
    """Takes left % (most + 1) stones, or one when the pile is already a multiple (a lost position)."""

    Params = LeaveAMultipleParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        # The prompt says how many stones are left and how many may be taken; prompt_data holds
        # those two numbers, so reading it tells this player nothing a model is not told.
        left, most = turn.prompt_data["left"], turn.prompt_data["most"]
        best = left % (most + 1) or 1
        take = 1 if rng.random() < self.params.slip else best
        return json.dumps({"take": take})
