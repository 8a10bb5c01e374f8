"""Scripted players for the public goods game.

They read the structured side of the referee's messages (the rules' numbers and
each round's report), so they work in both modes.
"""

from __future__ import annotations

import json
import random
from typing import Any

from pydantic import Field

from arena.contract import Strategy, StrategyParams, Turn



def _answer(coins: int, reason: str) -> str:
    return json.dumps({"reason": reason, "coins": int(coins)})


def _rules(turn: Turn) -> dict[str, Any]:
    for message in turn.history:
        if message.kind == "rules" and message.data:
            return message.data
    raise ValueError("no rules with data in this seat's history; is this the public goods game?")


def _last_report(turn: Turn) -> dict[str, Any] | None:
    for message in reversed(turn.history):
        if message.kind == "notice" and message.data and "round" in message.data:
            return message.data
    return None


def _own_last(turn: Turn) -> int | None:
    for message in reversed(turn.history):
        if message.sender == turn.seat and message.kind == "reply":
            try:
                return int(json.loads(message.content)["coins"])
            except (ValueError, KeyError, TypeError):
                return None
    return None


def _last_total(rules: dict[str, Any], report: dict[str, Any]) -> float:
    """Everyone's contributions last round, whichever mode reported them."""
    if "contributions" in report:
        return float(sum(report["contributions"]))
    return report["income"] * rules["players"] / rules["alpha"]  # income = alpha * total / players


def _clamp(value: float, endowment: int) -> int:
    return max(0, min(endowment, round(value)))


class AlwaysAll(Strategy):
    """Puts the whole endowment in every round."""

    def reply(self, turn: Turn, rng: random.Random) -> str:
        e = _rules(turn)["endowment"]
        return _answer(e, "Full cooperation makes the pool largest for everyone.")


class FreeRider(Strategy):
    """Never puts anything in."""

    def reply(self, turn: Turn, rng: random.Random) -> str:
        return _answer(0, "I keep my coins and still get my share of the pool.")


class RandomContributor(Strategy):
    """Puts a uniformly random amount in."""

    def reply(self, turn: Turn, rng: random.Random) -> str:
        return _answer(rng.randint(0, _rules(turn)["endowment"]), "Chosen at random.")


class TitForTatParams(StrategyParams):
    initial: float | None = Field(None, ge=0, description="First-round contribution; default the whole endowment.")


class TitForTat(Strategy):
    """Starts generous, then puts in last round's mean contribution."""

    Params = TitForTatParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        rules, report = _rules(turn), _last_report(turn)
        e = rules["endowment"]
        if report is None:
            start = e if self.params.initial is None else self.params.initial
            return _answer(_clamp(start, e), "Opening with trust.")
        mean = _last_total(rules, report) / rules["players"]
        return _answer(_clamp(mean, e), f"Matching last round's mean contribution of {mean:.2f}.")


class ConditionalCooperatorParams(StrategyParams):
    initial: float | None = Field(None, ge=0, description="First-round contribution; default half the endowment.")
    ratio: float = Field(0.8, ge=0, description="Share of the others' mean contribution to put in.")


class ConditionalCooperator(Strategy):
    """Puts in a fixed share of what the others put in on average last round."""

    Params = ConditionalCooperatorParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        rules, report = _rules(turn), _last_report(turn)
        e, n = rules["endowment"], rules["players"]
        if report is None:
            start = e / 2 if self.params.initial is None else self.params.initial
            return _answer(_clamp(start, e), "Opening halfway.")
        own = _own_last(turn) or 0
        others = (_last_total(rules, report) - own) / (n - 1)
        return _answer(_clamp(self.params.ratio * others, e), f"The others put in {others:.2f} on average.")
