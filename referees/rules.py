"""The rule referee: the game's own rules decide the end and the payoffs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, Referee, Scores, Transcript


class RuleParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    metric: str = Field("payoff", description="Name the rules' payoff is reported under (chrf, say).")


class RuleReferee(Referee):
    Params = RuleParams
    description = "The game's own rules decide when it ends and what each seat scored."

    async def score(self, game: Game, pool: Transcript) -> Scores:
        scores = {self.params.metric: {seat: float(value) for seat, value in game.payoffs().items()}}
        for metric, values in game.metrics().items():
            scores[metric] = {seat: float(value) for seat, value in values.items()}
        return scores
