"""Take away: the players, in seat order, take one to `most` stones from a pile, one player a round;
whoever takes the last stone wins. The piles come from a file, one match per pile. Payoff: 1 for
the winner, 0 for the others; the stones each player took are reported beside it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from arena.contract import Game, HasCases, InvalidReply, Notice, path_field


class TakeAwayParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    piles: str = path_field(description='A JSONL file of piles, one a line: {"id": "p21", "stones": 21}.')
    case: str | None = Field(None, description="The pile this match plays (the tournament sets it, pile by pile).")
    most: int = Field(3, ge=1, description="The most stones a player may take in one turn.")


class Take(BaseModel):
    """The shape of a reply: backends with structured output are held to it, and parse reads it."""

    model_config = ConfigDict(extra="forbid")

    take: int = Field(ge=1, description="How many stones to take.")


def read_piles(path: str) -> dict[str, int]:
    """Pile id -> stones; a line that is not a pile is an error naming the line."""
    piles = {}
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        try:
            pile = json.loads(line)
            piles[str(pile["id"])] = int(pile["stones"])
        except (ValueError, TypeError, KeyError):
            raise ValueError(f'{path}, line {number}: not a pile such as {{"id": "p21", "stones": 21}}') from None
    return piles


class TakeAway(Game, HasCases):
    description = "Take 1 to `most` stones in turn; whoever takes the last stone wins."
    Params = TakeAwayParams
    Action = Take

    @classmethod
    def cases(cls, params: TakeAwayParams) -> list[str]:
        return list(read_piles(params.piles))

    @classmethod
    def seat_problem(cls, params: TakeAwayParams, n_seats: int) -> str | None:
        small = [pile for pile, stones in read_piles(params.piles).items() if stones < n_seats]
        if small:  # the rules promise every player a turn
            return f"every player moves at least once, so a pile needs {n_seats} stones; {', '.join(small)} has fewer"
        return None

    @classmethod
    def rounds_needed(cls, params: TakeAwayParams, n_seats: int) -> int:
        piles = read_piles(params.piles)
        return piles[params.case] if params.case else max(piles.values())  # one stone a turn, at the slowest

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        piles = read_piles(params.piles)
        self.left = piles[params.case or next(iter(piles))]
        self.taken = {seat: 0 for seat in self.seats}
        self.winner: str | None = None

    def rules(self, seat: str) -> str:
        return (f"You are {seat}, one of {len(self.seats)} players taking stones from one pile, one player a turn in "
                f"the order {', '.join(self.seats)}. On your turn take 1 to {self.params.most} stones, never more than "
                "are left. Whoever takes the last stone wins; everyone hears every move.")

    def rules_data(self, seat: str) -> dict[str, Any]:
        return {"order": list(self.seats), "most": self.params.most}

    def speakers(self, round: int) -> list[str]:
        return [self.seats[(round - 1) % len(self.seats)]]  # one player a round, in seat order

    def _most(self) -> int:
        return min(self.params.most, self.left)

    def prompt(self, seat: str, round: int) -> str:
        return f'{self.left} stones are left. Take 1 to {self._most()}: reply with JSON only, {{"take": <stones>}}.'

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        return {"left": self.left, "most": self._most()}  # the prompt's two numbers, nothing more

    def parse(self, seat: str, reply: str, round: int) -> int:
        try:
            take = Take.model_validate_json(reply).take
        except ValidationError:
            raise InvalidReply('Reply with a JSON object such as {"take": 2} and nothing else.') from None
        if take > self._most():
            raise InvalidReply(f"You may take 1 to {self._most()} stones now; you asked for {take}.")
        return take

    def default_action(self, seat: str, round: int) -> int:
        return 1  # the smallest move, legal while a stone is left: no silent seat is handed the win

    def example_reply(self, seat: str, round: int) -> str:
        return '{"take": 1}'  # one stone a turn: the longest match, so a dry run errs towards cost

    def apply(self, round: int, actions: dict[str, int]) -> list[Notice]:
        [(seat, take)] = actions.items()
        self.left -= take
        self.taken[seat] += take
        if self.left == 0:
            self.winner = seat
        end = f" {seat} took the last stone and wins." if self.winner else ""
        text = f"{seat} took {take}; {self.left} left.{end}"
        return [Notice(to=self.seats, text=text, data={"seat": seat, "took": take, "left": self.left})]

    def is_over(self, round: int) -> bool:
        return self.winner is not None

    def payoffs(self) -> dict[str, float]:
        return {seat: float(seat == self.winner) for seat in self.seats}

    def metrics(self) -> dict[str, dict[str, float]]:
        return {"stones": {seat: float(n) for seat, n in self.taken.items()}}
