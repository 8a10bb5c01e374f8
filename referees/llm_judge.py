"""An LLM judge (DeepEval's referee): a scenario agent reads the finished match and scores
each seat 1-10 with its reasons, answering in JSON."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, Judged, Referee, Scores, Task, Transcript
from arena.contract.game import example_prose
from arena.contract.judging import answer_format, parse_verdict


class JudgeParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The scenario agent that judges; it takes no seat.")
    metric: str = Field("judge", description="Name its scores are reported under.")
    low: int = Field(1, description="Lowest score on the scale.")
    high: int = Field(10, description="Highest score on the scale.")


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
