"""Guess two thirds of the average (the Keynesian beauty contest): each round every player
privately guesses 0-100, the guesses closest to 2/3 of the mean score a point each, and
everyone is told the mean, the target and the winning guess. Payoff: points won."""

from __future__ import annotations

import json
from fractions import Fraction

import networkx as nx
from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, InvalidReply, Notice, nobody_hears_anyone


class GuessParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(3, ge=1, description="Number of rounds.")
    numerator: int = Field(2, ge=0, description="The target is numerator/denominator times the mean guess.")
    denominator: int = Field(3, ge=1, description="See numerator.")


class GuessTwoThirds(Game):
    description = "Guess 0-100; the guesses closest to 2/3 of the mean score a point."
    Params = GuessParams
    min_seats = 2

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.factor = Fraction(params.numerator, params.denominator)  # exact, so ties are exact
        self.points = {seat: 0 for seat in self.seats}

    def rules(self, seat: str) -> str:
        p = self.params
        return (f"You are {seat}, one of {len(self.seats)} players in a game of {p.rounds} rounds. Each round every "
                f"player secretly guesses a whole number from 0 to 100; the target is {p.numerator}/{p.denominator} "
                "of the mean guess. Every player whose guess is closest to the target scores 1 point. After each "
                "round you learn the mean, the target and the winning guess. Score as many points as you can.")

    def prompt(self, seat: str, round: int) -> str:
        return f'Round {round} of {self.params.rounds}: reply with one JSON object only: {{"guess": <0 to 100>}}'

    def hears(self, round: int) -> nx.DiGraph:
        return nobody_hears_anyone(self.seats)  # no edges: guesses stay private

    def parse(self, seat: str, reply: str, round: int) -> int:
        try:
            guess = json.loads(reply)["guess"]
        except (ValueError, TypeError, KeyError):  # not JSON, not an object, or no "guess"
            raise InvalidReply('Reply with a JSON object such as {"guess": 33} and nothing else.') from None
        if isinstance(guess, bool) or not isinstance(guess, int) or not 0 <= guess <= 100:
            raise InvalidReply(f'"guess" must be a whole number from 0 to 100; you gave {guess!r}.')
        return guess

    def default_action(self, seat: str, round: int) -> int:
        # A seat without a valid guess counts as guessing 50, the middle of the range: the naive
        # guess, not one tuned to win, and the mean still covers every player, as the rules say.
        return 50

    def apply(self, round: int, actions: dict[str, int]) -> list[Notice]:
        mean = Fraction(sum(actions[s] for s in self.seats), len(self.seats))
        target = self.factor * mean
        best = min(abs(actions[s] - target) for s in self.seats)
        winners = [s for s in self.seats if abs(actions[s] - target) == best]
        for seat in winners:
            self.points[seat] += 1
        won = sorted({actions[s] for s in winners})
        text = (f"Round {round}: mean guess {float(mean):.2f}, target {float(target):.2f}, "
                f"winning guess {' and '.join(map(str, won))}.")
        data = {"round": round, "mean": float(mean), "target": float(target), "winning_guesses": won}
        return [Notice(to=self.seats, text=text, data=data)]

    def is_over(self, round: int) -> bool:
        return round >= self.params.rounds

    def payoffs(self) -> dict[str, float]:
        return {seat: float(points) for seat, points in self.points.items()}
