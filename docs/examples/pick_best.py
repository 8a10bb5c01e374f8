"""A referee that asks a judge agent which seat did the best work in a finished match of any judged
game: the chosen seat scores 1, the others 0. The judge reads the game's own brief (judge_request),
asked through the match's desk, so its turn has a time limit, a re-ask with the reason when its
answer cannot be read, and a place in the run's record."""

from __future__ import annotations

import re

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, InvalidReply, Judged, Referee, Scores, Transcript

BEST = re.compile(r"^\s*Best:\s*(.+?)\s*$", re.IGNORECASE)


class PickBestParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    agent: str = Field(description="The scenario agent that judges; it takes no seat.")
    metric: str = Field("best", description="Name the scores are reported under.")


def question(seats: tuple[str, ...]) -> str:
    return (f"Which of {', '.join(seats)} did the best work? Explain briefly, then end with a line of its own: "
            f"'Best: <one of {', '.join(seats)}>'.")


def parse_best(reply: str, seats: tuple[str, ...]) -> str:
    lines = [line for line in reply.strip().splitlines() if line.strip()]
    found = BEST.match(lines[-1]) if lines else None  # the last line only: an echo of the format is no choice
    chosen = {seat.lower(): seat for seat in seats}.get(found.group(1).strip(" .*'\"").lower()) if found else None
    if chosen is None:
        raise InvalidReply(f"End your reply with a line 'Best: <seat>' naming one of {', '.join(seats)}.")
    return chosen


class PickBest(Referee):
    Params = PickBestParams
    description = "A judge agent names the seat that did the best work: it scores 1, the others 0."
    needs = (Judged,)  # `arena validate` refuses a game without judge_request, before anything is played

    @classmethod
    def agents_needed(cls, params: PickBestParams) -> list[str]:
        return [params.agent]

    def example_reply(self, game: Game, agent: str) -> str | None:
        request = game.judge_request()
        if agent != self.params.agent or request is None:
            return None
        return f"Both did careful work; the first was a little closer to the brief.\nBest: {request.seats[0]}"

    async def score(self, game: Game, pool: Transcript) -> Scores:
        p: PickBestParams = self.params
        request = game.judge_request()
        if request is None or len(request.seats) < 2:  # nothing to compare: no scores, never invented ones
            return {p.metric: {}}
        prompt = f"{request.text}\n\n{question(request.seats)}"
        best = await self.desk.ask(p.agent, prompt, lambda reply: parse_best(reply, request.seats), request.data)
        if best is None:  # no readable answer within the re-asks: the seats go unscored
            self.desk.post_verdict(f"{p.agent} named no seat.", {"referee": "pick_best", "agent": p.agent, "best": None})
            return {p.metric: {}}
        self.desk.post_verdict(f"{p.agent} judged {best} best.", {"referee": "pick_best", "agent": p.agent, "best": best})
        return {p.metric: {seat: float(seat == best) for seat in request.seats}}
