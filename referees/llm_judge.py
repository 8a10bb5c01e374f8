"""An LLM judge (DeepEval's referee): a scenario agent reads the finished match and scores
each seat 1-10 with its reasons, answering in JSON."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, InvalidReply, Judged, Referee, Scores, Task, Transcript
from arena.contract.game import example_prose

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)


class JudgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The scenario agent that judges; it takes no seat.")
    metric: str = Field("judge", description="Name its scores are reported under.")
    low: int = Field(1, description="Lowest score on the scale.")
    high: int = Field(10, description="Highest score on the scale.")


def answer_format(seats: tuple[str, ...], low: int, high: int) -> str:
    example = ", ".join(f'"{seat}": {{"evaluation": "<why>", "score": <{low}-{high}>}}' for seat in seats)
    return (f"Score each of {', '.join(seats)} on a scale of {low} to {high} (whole numbers), and give the specific "
            f"reasons for each score. Reply with only a JSON object of this form: {{{example}}}")


def parse_verdict(reply: str, seats: tuple[str, ...], low: int, high: int) -> dict[str, tuple[int, str]]:
    """Each seat's (score, evaluation) from a judge's reply; InvalidReply says what is wrong."""
    fenced = _FENCE.search(reply)
    text = fenced.group(1) if fenced else reply
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise InvalidReply("Your reply held no JSON object. " + answer_format(seats, low, high))
    try:
        verdict = json.loads(text[start:end + 1])
    except json.JSONDecodeError as exc:
        raise InvalidReply(f"Your reply was not valid JSON ({exc.msg}). " + answer_format(seats, low, high)) from None
    if not isinstance(verdict, dict):
        raise InvalidReply("Your reply must be one JSON object. " + answer_format(seats, low, high))
    by_name = {str(k).strip().lower(): v for k, v in verdict.items()}
    result = {}
    for seat in seats:
        entry = by_name.get(seat.lower())
        if entry is None:
            raise InvalidReply(f"Your verdict did not score {seat}. " + answer_format(seats, low, high))
        score = entry.get("score") if isinstance(entry, dict) else entry
        if isinstance(score, str) and score.strip().lstrip("-").isdigit():
            score = int(score.strip())
        if isinstance(score, bool) or not isinstance(score, (int, float)) or score != int(score) or not low <= score <= high:
            raise InvalidReply(f"The score for {seat} must be a whole number from {low} to {high}; it was {score!r}.")
        why = entry.get("evaluation", "") if isinstance(entry, dict) else ""
        result[seat] = (int(score), str(why))
    return result


class LLMJudge(Referee):
    Params = JudgeParams
    description = "A scenario agent scores each seat 1-10 with reasons (JSON), from the game's judging brief."
    needs = (Judged,)

    @classmethod
    def agents_needed(cls, params: JudgeParams) -> list[str]:
        return [params.agent]

    def example_reply(self, game: Game, agent: str) -> str | None:
        p: JudgeParams = self.params
        request = game.judge_request()
        if agent != p.agent or request is None:
            return None
        middle = (p.low + p.high + 1) // 2
        return json.dumps({seat: {"evaluation": example_prose(40, f"the work of {seat}"), "score": middle}
                           for seat in request.seats})

    async def score(self, game: Game, pool: Transcript) -> Scores:
        p: JudgeParams = self.params
        if not isinstance(game, Judged):  # `arena validate` says so first; a spec built by hand may still try
            raise ValueError(f"the llm_judge referee needs a game that has something to judge; {type(game).__name__} has not")
        request = game.judge_request()
        if request is None:
            raise ValueError(f"{type(game).__name__} left nothing for the llm_judge referee to judge in this match")
        prompt = f"{request.text}\n\n{answer_format(request.seats, p.low, p.high)}"
        data: dict[str, Any] = {**(request.data or {}), "task": Task.JUDGE, "seats": list(request.seats),
                                "scale": [p.low, p.high]}
        verdict = await self.desk.ask(p.agent, prompt, lambda reply: parse_verdict(reply, request.seats, p.low, p.high), data)
        if verdict is None:
            self.desk.post_verdict(f"{p.agent} gave no valid verdict; {p.metric} scores are missing for this match.",
                                   {"referee": "llm_judge", "metric": p.metric, "agent": p.agent, "scores": None})
            return {p.metric: {}}
        lines = [f"{seat}: {score}/{p.high} — {why}" for seat, (score, why) in verdict.items()]
        self.desk.post_verdict(f"{p.agent} judged:\n" + "\n".join(lines), {
            "referee": "llm_judge", "metric": p.metric, "agent": p.agent,
            "scores": {seat: score for seat, (score, _) in verdict.items()},
            "evaluations": {seat: why for seat, (_, why) in verdict.items()},
        })
        return {p.metric: {seat: float(score) for seat, (score, _) in verdict.items()}}
