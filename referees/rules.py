"""The rule referee: the game's own rules decide the end and the payoffs."""

from __future__ import annotations

from arena.game import Game
from arena.pool import MessagePool
from arena.referee import Referee


class RuleReferee(Referee):
    async def is_over(self, game: Game, pool: MessagePool, round: int) -> bool:
        return game.is_over(round)

    async def score(self, game: Game, pool: MessagePool) -> dict[str, float]:
        return {seat: float(value) for seat, value in game.payoffs().items()}
