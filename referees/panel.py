"""A panel of judges: several scenario agents score the finished match, each on its own, and the
panel's verdict is the metric.

Every member gets the game's judging brief and answers as to the llm_judge referee (each seat
scored with reasons, in JSON); they are asked at the same time, each through the match's desk, so
each has a seat's timeout and re-asks, and the run's limits on its backend. The rules:

- ``vote``: each member votes for the seat it scored highest (a tie when it scored several top);
  the seat with the most votes scores 1 and the others 0; a tie in votes, or a tie voted most,
  shares the point among all seats.
- ``mean``: each seat's mean score over the members who gave a verdict.
- ``weighted``: the same mean, each member weighted: by ``weights``, or by a peer-rank run's
  reviewer weights (``weights_from``: an ``arena rank --json`` file).

Fewer valid verdicts than the quorum leave the match unscored, never scored on a minority. The
verdict message holds every member's scores and reasons and the panel's record (``panel``:
``arena.contract.panels``), from which ``arena rank`` and the report compute the members' agreement.
"""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import Any

import trio
from pydantic import BaseModel, ConfigDict, Field, model_validator

from arena.contract import Game, Judged, Referee, Scores, Task, Transcript, path_field
from arena.contract.game import example_prose
from arena.contract.judging import answer_format, parse_verdict
from arena.contract.panels import PANEL, TIE, PanelItem, PanelRecord, Rule, choice, vote


class PanelParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    members: list[str] = Field(min_length=2, description="The scenario agents that judge, two or more; none takes a seat.")
    rule: Rule = Field("vote", description="vote: the seat most members scored best; mean: the seats' mean scores; "
                                           "weighted: their weighted mean (weights or weights_from).")
    weights: dict[str, float] | None = Field(None, description="rule weighted: each member's weight (0 or more).")
    weights_from: str | None = path_field(None, description="rule weighted: an `arena rank --json` file of a peer-rank "
                                                            "run whose reviewer weights weigh the members, by agent name.")
    quorum: int | None = Field(None, ge=1, description="Valid verdicts needed to score the match; default: more than "
                                                       "half the members.")
    metric: str = Field("panel", description="Name the panel's scores are reported under.")
    low: int = Field(1, description="Lowest score on the scale.")
    high: int = Field(10, description="Highest score on the scale.")

    @model_validator(mode="after")
    def _consistent(self) -> PanelParams:
        twice = sorted({m for m in self.members if self.members.count(m) > 1})
        if twice:
            raise ValueError(f"members names {', '.join(twice)} twice; each member sits on the panel once")
        if self.low >= self.high:
            raise ValueError(f"low ({self.low}) must be below high ({self.high})")
        if self.quorum is not None and self.quorum > len(self.members):
            raise ValueError(f"quorum {self.quorum} is more than the panel's {len(self.members)} members")
        given = [name for name in ("weights", "weights_from") if getattr(self, name) is not None]
        if self.rule != "weighted":
            if given:
                raise ValueError(f"{given[0]} is only read with rule: weighted (the rule is {self.rule})")
            return self
        if len(given) != 1:
            raise ValueError("rule weighted needs the members' weights: give weights or weights_from (one of them)")
        weights = self.weights if self.weights is not None else peer_weights(self.weights_from)
        missing = [m for m in self.members if m not in weights]
        if missing:
            where = "weights" if self.weights is not None else f"the reviewer weights in {self.weights_from}"
            raise ValueError(f"{where} give no weight for {', '.join(missing)}")
        if any(w < 0 for w in weights.values()) or not any(weights[m] > 0 for m in self.members):
            raise ValueError("weights must be 0 or more, and at least one member's above 0")
        return self

    def member_weights(self) -> dict[str, float] | None:
        if self.rule != "weighted":
            return None
        weights = self.weights if self.weights is not None else peer_weights(self.weights_from)
        return {m: float(weights[m]) for m in self.members}

    def needed(self) -> int:
        return self.quorum if self.quorum is not None else len(self.members) // 2 + 1


@lru_cache(maxsize=8)
def peer_weights(path: str) -> dict[str, float]:
    """The reviewer weights of a peer-rank leaderboard saved by ``arena rank --json``: those of the
    first method that has any (a weighted win rate, Elo), else the weighted pairwise matrix's."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"weights_from: no file at {file}")
    try:
        ranked = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        raise ValueError(f"weights_from: {file} is not JSON; save it with `arena rank RUN_DIR --weighted --json`") from None
    board = ranked.get("peer_rank") if isinstance(ranked, dict) else None
    if not isinstance(board, dict):
        raise ValueError(f"weights_from: {file} holds no peer rank (its run gave no reviews)")
    found = [m.get("weights") for m in board.get("methods") or [] if isinstance(m, dict)] + [board.get("pairwise_weights")]
    weights = next((w for w in found if isinstance(w, dict) and w), None)
    if weights is None or not all(isinstance(v, (int, float)) for v in weights.values()):
        raise ValueError(f"weights_from: {file} holds no reviewer weights; rank its run with --weighted")
    return {str(k): float(v) for k, v in weights.items()}


class Panel(Referee):
    Params = PanelParams
    description = "Several judge agents score each seat (JSON), asked at once; their vote, mean or weighted mean is the metric."
    needs = (Judged,)

    @classmethod
    def agents_needed(cls, params: PanelParams) -> list[str]:
        return list(params.members)

    def example_reply(self, game: Game, agent: str) -> str | None:
        p: PanelParams = self.params
        request = game.judge_request()
        if agent not in p.members or request is None:
            return None
        middle = (p.low + p.high + 1) // 2
        return json.dumps({seat: {"evaluation": example_prose(40, f"the work of {seat}"), "score": middle}
                           for seat in request.seats})

    async def score(self, game: Game, pool: Transcript) -> Scores:
        p: PanelParams = self.params
        if not isinstance(game, Judged):  # `arena validate` says so first; a spec built by hand may still try
            raise ValueError(f"the panel referee needs a game that has something to judge; {type(game).__name__} has not")
        request = game.judge_request()
        if request is None:
            raise ValueError(f"{type(game).__name__} left nothing for the panel referee to judge in this match")
        seats = tuple(request.seats)
        prompt = f"{request.text}\n\n{answer_format(seats, p.low, p.high)}"
        data: dict[str, Any] = {**(request.data or {}), "task": Task.JUDGE, "seats": list(seats), "scale": [p.low, p.high]}
        given: dict[str, dict[str, tuple[int, str]] | None] = {}

        async def ask(member: str) -> None:
            given[member] = await self.desk.ask(member, prompt, lambda reply: parse_verdict(reply, seats, p.low, p.high), data)

        async with trio.open_nursery() as nursery:  # all at once: each member's backend keeps its own limits
            for member in p.members:
                nursery.start_soon(ask, member)
        verdicts = {m: given[m] for m in p.members}  # the members' order, not the order they answered in
        valid = {m: {seat: score for seat, (score, _) in v.items()} for m, v in verdicts.items() if v is not None}
        weights = p.member_weights()
        choices = {m: (None if v is None else choice(valid[m])) for m, v in verdicts.items()}
        scores = self._combine(valid, choices, weights, seats) if len(valid) >= p.needed() else None
        record = PanelRecord(name=p.metric, rule=p.rule, weights=weights, items=[PanelItem(
            item="best", options=list(seats), verdict=None if scores is None else choice(scores), members=choices)])
        self.desk.post_verdict(self._text(verdicts, scores, len(valid)), {
            "referee": "panel", "metric": p.metric, "rule": p.rule, "members": list(p.members),
            "verdicts": {m: None if v is None else {seat: {"score": s, "evaluation": why} for seat, (s, why) in v.items()}
                         for m, v in verdicts.items()},
            "scores": scores, PANEL: record.model_dump(mode="json")})
        return {p.metric: scores or {}}

    def _combine(self, valid: dict[str, dict[str, int]], choices: dict[str, str | None],
                 weights: dict[str, float] | None, seats: tuple[str, ...]) -> dict[str, float] | None:
        p: PanelParams = self.params
        if p.rule == "vote":
            winner = vote(choices)
            return {seat: (1.0 / len(seats) if winner == TIE else float(seat == winner)) for seat in seats}
        counted = {m: (1.0 if weights is None else weights[m]) for m in valid}
        total = sum(counted.values())
        if total <= 0:  # only members of weight 0 answered: no weighted verdict to give
            return None
        return {seat: sum(counted[m] * valid[m][seat] for m in valid) / total for seat in seats}

    def _text(self, verdicts: dict[str, dict[str, tuple[int, str]] | None], scores: dict[str, float] | None,
              valid: int) -> str:
        p: PanelParams = self.params
        lines = []
        for member, verdict in verdicts.items():
            if verdict is None:
                lines.append(f"{member}: no valid verdict")
            else:
                lines.append(f"{member}: " + "; ".join(f"{seat} {score}/{p.high}" for seat, (score, _) in verdict.items()))
        if scores is None:
            why = (f"{valid} of {len(p.members)} members gave one, {p.needed()} needed" if valid < p.needed()
                   else "the members who gave one all weigh 0")
            head = f"The panel ({p.rule}) reached no verdict: {why}; {p.metric} scores are missing for this match."
        else:
            shown = ", ".join(f"{seat} {value:g}" for seat, value in scores.items())
            head = f"The panel ({p.rule}, {valid} of {len(p.members)} members) scored: {shown}."
        return head + "\n" + "\n".join(lines)
