"""A person judges (FairEval's human in the loop, as a referee): at the end of a match of any judged
game, the person at the terminal reads what the game gives a judge (the question, the answers, the
brief) and scores each seat.

The person is a scenario agent of backend ``human``, asked through the match's desk like any judge:
what they read passes the anonymity filter, a verdict that cannot be read is asked again with the
reason, and their answer is recorded with the match. They type the scores in seat order, in one line,
with their reasons after them if they like: ``7 5 the second misses the point``.
"""

from __future__ import annotations

import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, InvalidReply, Judged, Referee, Scores, Task, Transcript

_NUMBER = re.compile(r"[+-]?\d+(?:\.\d+)?")


class HumanJudgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str = Field("human", description="The scenario agent that judges (backend: human); it takes no seat.")
    metric: str = Field("human", description="Name its scores are reported under.")
    low: int = Field(1, description="Lowest score on the scale.")
    high: int = Field(10, description="Highest score on the scale.")


def answer_format(seats: tuple[str, ...], low: int, high: int) -> str:
    if len(seats) == 1:
        return (f"Score {seats[0]} with a whole number from {low} to {high}; your reasons may follow the score "
                f"on the same line (for example: {high - 1} clear and correct).")
    example = " ".join(str(max(low, high - 1 - i)) for i in range(len(seats)))
    return (f"Score {', '.join(seats)}, in that order, each with a whole number from {low} to {high}, separated "
            f"by spaces; your reasons may follow the scores on the same line (for example: {example} because ...).")


def parse_scores(reply: str, seats: tuple[str, ...], low: int, high: int) -> tuple[dict[str, int], str]:
    """Each seat's score, and the reasons typed after them; InvalidReply says what is wrong."""
    words = reply.split()
    scores: dict[str, int] = {}
    for seat, word in zip(seats, words):
        if not _NUMBER.fullmatch(word):
            raise InvalidReply(f"The score for {seat} must come before any reasons; {word!r} is no score. "
                               + answer_format(seats, low, high))
        value = float(word)
        if value != int(value) or not low <= value <= high:
            raise InvalidReply(f"The score for {seat} must be a whole number from {low} to {high}; it was {word}. "
                               + answer_format(seats, low, high))
        scores[seat] = int(value)
    if len(scores) < len(seats):
        raise InvalidReply(f"Your verdict did not score {seats[len(scores)]}. " + answer_format(seats, low, high))
    return scores, " ".join(words[len(seats):])


class HumanJudge(Referee):
    Params = HumanJudgeParams
    description = "A person at the terminal scores each seat of a judged game (an agent of backend human)."
    needs = (Judged,)

    @classmethod
    def agents_needed(cls, params: HumanJudgeParams) -> list[str]:
        return [params.agent]

    def example_reply(self, game: Game, agent: str) -> str | None:
        p: HumanJudgeParams = self.params
        request = game.judge_request()
        if agent != p.agent or request is None:
            return None
        return " ".join(str((p.low + p.high + 1) // 2) for _ in request.seats) + " both are sound"

    async def score(self, game: Game, pool: Transcript) -> Scores:
        p: HumanJudgeParams = self.params
        if not isinstance(game, Judged):  # `arena validate` says so first; a spec built by hand may still try
            raise ValueError(f"the human referee needs a game that has something to judge; {type(game).__name__} has not")
        request = game.judge_request()
        if request is None:
            raise ValueError(f"{type(game).__name__} left nothing for the human referee to judge in this match")
        prompt = f"{request.text}\n\n{answer_format(request.seats, p.low, p.high)}"
        data: dict[str, Any] = {**(request.data or {}), "task": Task.JUDGE, "seats": list(request.seats),
                                "scale": [p.low, p.high]}
        verdict = await self.desk.ask(p.agent, prompt, lambda reply: parse_scores(reply, request.seats, p.low, p.high), data)
        if verdict is None:
            self.desk.post_verdict(f"{p.agent} gave no valid verdict; {p.metric} scores are missing for this match.",
                                   {"referee": "human", "metric": p.metric, "agent": p.agent, "scores": None})
            return {p.metric: {}}
        scores, reasons = verdict
        lines = [f"{seat}: {score}/{p.high}" for seat, score in scores.items()]
        self.desk.post_verdict(f"{p.agent} judged:\n" + "\n".join(lines) + (f"\nReasons: {reasons}" if reasons else ""), {
            "referee": "human", "metric": p.metric, "agent": p.agent, "scores": scores, "reasons": reasons,
        })
        return {p.metric: {seat: float(score) for seat, score in scores.items()}}
