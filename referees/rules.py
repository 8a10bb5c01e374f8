"""The rule referee: the game's own rules decide the end and the payoffs."""

from __future__ import annotations

from arena.game import Game
from arena.pool import MessagePool
from arena.referee import Referee, Scores


class RuleReferee(Referee):
    description = "The game's own rules decide when it ends and what each seat scored."

    async def score(self, game: Game, pool: MessagePool) -> Scores:
        scores = {"payoff": {seat: float(value) for seat, value in game.payoffs().items()}}
        for metric, values in game.metrics().items():
            scores[metric] = {seat: float(value) for seat, value in values.items()}
        return scores
