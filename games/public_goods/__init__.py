"""Public goods game (DeepEval 3.7.1): how much to put into a pool that everyone shares.

Each round every player receives an endowment and chooses how many of those
coins to put into a public pool. The pool is multiplied by ``alpha`` and shared
equally among all players, contributors or not. A player's payoff is the coins
it holds at the end. Replies are private; what a player learns after each round
depends on the mode: its own income from the pool (mode 1) or the list of all
contributions, sorted from largest to smallest (mode 2).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from fractions import Fraction
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, InvalidReply, Notice, nobody_hears_anyone

if TYPE_CHECKING:
    import networkx as nx


class PublicGoodsParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rounds: int = Field(5, ge=1, description="Number of rounds.")
    endowment: int = Field(10, ge=1, description="Coins each player receives at the start of every round.")
    alpha: float = Field(1.5, gt=0, description="The pool is multiplied by this factor before it is shared.")
    mode: Literal[1, 2] = Field(1, description="1: each player learns its own income; 2: the sorted contributions.")


# A reply's shape. Its docstring and descriptions go into the schema a model is sent. The schema a match
# sends narrows ``coins`` to its endowment (``contribution_schema``); the parser checks the range either
# way. The bound on ``reason`` keeps a model held to the schema from spending its whole reply on the
# reason before it names a number.
class Contribution(BaseModel):
    """Your move this round."""

    reason: str = Field(max_length=300, description="Why this amount, briefly.")
    coins: int = Field(ge=0, description="Coins put into the pool this round.")


@functools.lru_cache(maxsize=32)
def contribution_schema(endowment: int) -> dict[str, Any]:
    """The reply's JSON schema for one endowment (shared: do not modify it). ``coins`` is bounded and, up to
    100 coins, also listed: llama.cpp's schema-to-grammar converter ignores minimum and maximum but keeps enum."""
    schema = Contribution.model_json_schema()
    coins = schema["properties"]["coins"]
    coins["maximum"] = endowment
    if endowment <= 100:
        coins["enum"] = list(range(endowment + 1))
    return schema


_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)


class PublicGoods(Game):
    description = "N players choose each round how much to put into a shared, multiplied pool."
    Params = PublicGoodsParams
    Action = Contribution
    min_seats = 2

    @classmethod
    def rounds_needed(cls, params, n_seats):
        return params.rounds

    def action_schema(self) -> dict[str, Any]:
        return contribution_schema(self.params.endowment)

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.alpha = Fraction(str(params.alpha))
        self.holdings: dict[str, Fraction] = {seat: Fraction(0) for seat in self.seats}
        self.contributions: list[dict[str, int]] = []

    # -- what players are told -----------------------------------------------------
    def rules(self, seat: str) -> str:
        p, n = self.params, len(self.seats)
        text = (
            f"You are {seat}, one of {n} players in a game of {p.rounds} rounds. "
            f"At the start of every round each player receives {p.endowment} coins and decides how many of them "
            f"(a whole number from 0 to {p.endowment}) to put into a public pool; the rest it keeps. "
            f"When the round ends, the pool is multiplied by {p.alpha:g} and shared equally among all {n} players, "
            "whether they put anything in or not. Your aim is to hold as many coins as possible when the game ends."
        )
        if p.mode == 1:
            text += " After each round you are told how many coins the pool paid you."
        else:
            text += (
                " After each round you are told what every player put into the pool, as a list sorted from "
                "largest to smallest, without saying who put in what."
            )
        return text

    def rules_data(self, seat: str) -> dict[str, Any]:
        p = self.params
        return {"players": len(self.seats), "rounds": p.rounds, "endowment": p.endowment, "alpha": p.alpha, "mode": p.mode}

    def prompt(self, seat: str, round: int) -> str:
        e = self.params.endowment
        return (
            f"Round {round} of {self.params.rounds}: you receive {e} coins. How many do you put into the pool? "
            f'Answer with one JSON object and nothing else: {{"reason": "<why>", "coins": <0 to {e}>}}'
        )

    def hears(self, round: int) -> nx.DiGraph:
        return nobody_hears_anyone(self.seats)  # contributions are private; the referee reports on them

    # -- actions -------------------------------------------------------------------
    def parse(self, seat: str, reply: str, round: int) -> int:
        text = reply.strip()
        fenced = _FENCE.match(text)
        if fenced:
            text = fenced.group(1)
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            raise InvalidReply('Your reply is not a JSON object. Reply with {"reason": "...", "coins": N} only.') from None
        if not isinstance(value, dict):
            raise InvalidReply('Your reply must be a JSON object like {"reason": "...", "coins": N}.')
        if not isinstance(value.get("reason"), str):
            raise InvalidReply('Your reply needs a "reason" field holding a string.')
        coins = value.get("coins")
        if isinstance(coins, float) and coins.is_integer():
            coins = int(coins)
        e = self.params.endowment
        if isinstance(coins, bool) or not isinstance(coins, int) or not 0 <= coins <= e:
            raise InvalidReply(f'"coins" must be a whole number from 0 to {e}; you gave {coins!r}.')
        return coins

    def default_action(self, seat: str, round: int) -> int:
        return 0  # a player that does not answer puts nothing in

    def example_reply(self, seat: str, round: int) -> str:
        reason = ("Half in: the pool pays back more than it takes if others do the same, "
                  "and what I keep protects me if they do not.")
        return json.dumps({"reason": reason, "coins": self.params.endowment // 2})

    def apply(self, round: int, actions: Mapping[str, int]) -> list[Notice]:
        n, e = len(self.seats), self.params.endowment
        contributed = {seat: int(actions[seat]) for seat in self.seats}
        total = sum(contributed.values())
        share = self.alpha * total / n
        for seat in self.seats:
            self.holdings[seat] += e - contributed[seat] + share
        self.contributions.append(contributed)
        if self.params.mode == 1:
            return [
                Notice(
                    to=(seat,),
                    text=f"Round {round} is over: the pool paid you {_coins(share)} coins.",
                    data={"round": round, "income": float(share)},
                )
                for seat in self.seats
            ]
        ordered = sorted(contributed.values(), reverse=True)
        return [
            Notice(
                to=tuple(self.seats),
                text=f"Round {round} is over: the players put in {ordered} coins (largest first).",
                data={"round": round, "contributions": ordered},
            )
        ]

    def is_over(self, round: int) -> bool:
        return round >= self.params.rounds

    def payoffs(self) -> dict[str, float]:
        return {seat: float(value) for seat, value in self.holdings.items()}


def _coins(value: Fraction) -> str:
    return f"{float(value):.2f}".rstrip("0").rstrip(".")
