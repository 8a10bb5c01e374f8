"""ChatEval's second setting: debaters score one response to a dialogue on named dimensions.

One match is one response of a responses file (JSONL lines ``{"id", "context": [turns],
"response"}``, optional ``"fact"`` the response may draw on, ``"source"`` naming who wrote it and
``"human": {dimension: score}``, as Topical-Chat's annotations give naturalness, coherence,
engagingness and groundedness). The debate runs as in ``chateval_debate``: the same personas,
the same three ways of talking, a summarizer as the last seat under
``simultaneous_talk_with_summarizer``. Every message of a debater ends with one line per
dimension, ``<dimension>: <score>``, on ``scale``: the scores are read from the message's closing
lines only (the last lines that each score one dimension), so a score quoted earlier in the text
is not one. A message that does not end so is asked again with the reason, then the turn is
recorded as defaulted: no scores, the debater's previous ones standing (none if it never gave
any, and then it counts in no mean).

What the debate scores is each dimension's mean over the debaters' last scores, ChatEval's rule
for scores. A single response has no right answer, so no seat gets a payoff; each debater's last
score per dimension is a metric of its own (``arena rank`` shows who scores high), and the last
notice's data (case, dimensions, scale, scores by seat, mean, human) lets
``dimension_scores`` (its summary) correlate the means with the human scores over a run (Spearman and
Kendall, per dimension, as ChatEval reports on Topical-Chat).
"""

from __future__ import annotations

import functools
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from arena.contract import FinalNotice, InvalidReply, Summary, Task, path_field
from arena.contract.game import example_prose

from . import dimension_scores
from .chateval_debate import ChatEvalDebate, Talk
from .closing import plain
from .questions import case_of, load_responses
from .verdicts import object_schema, score_field, text_field

TOPICAL_CHAT = ("naturalness", "coherence", "engagingness", "groundedness")  # the four ChatEval scores
# one closing line: "naturalness: 4", "- Coherence: 3/5", "engagingness: 2 (flat)"
_SCORE_LINE = re.compile(r"[-\u2022\s]*([A-Za-z][\w -]*?)\s*:\s*(\d+(?:\.\d+)?)(?:\s*/\s*\d+)?(?:\s*[-\u2013\u2014(,;.].*)?")


@functools.lru_cache(maxsize=8)
def scoring_schema(dimensions: tuple[str, ...], low: int, high: int) -> dict[str, Any]:
    """A debater's message as JSON: its arguments, then a score per dimension."""
    fields = [(d, score_field(f"Your score for {d}, from {low} to {high}.", low, high)) for d in dimensions]
    return object_schema("Scores", [("argument", text_field("Your arguments this turn, before your scores.")), *fields])


class ScoringParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    responses: str = path_field(description="A JSONL file of dialogue contexts and responses, with optional human scores.")
    case: str | None = Field(None, description="The response of this match; the tournament sets it.")
    dimensions: list[str] = Field(list(TOPICAL_CHAT), min_length=1, description="What to score each response on.")
    scale: tuple[int, int] = Field((1, 5), description="The lowest and highest score of every dimension.")
    strategy: Talk = "one_by_one"
    turns: int = Field(2, ge=1, description="Turns of debate.")
    personas: dict[str, str] | str | None = path_field(
        None, description="Name -> description, or a YAML file of them (read from the scenario's folder); default: "
        "chateval_debate's five, Arena's own.")

    @field_validator("dimensions")
    @classmethod
    def _dimensions(cls, value: list[str]) -> list[str]:
        names = [v.strip() for v in value]
        if any(not re.fullmatch(r"[A-Za-z][\w -]*", n) for n in names):
            raise ValueError("a dimension is named by letters, digits, spaces, '-' or '_', starting with a letter")
        if len({n.lower() for n in names}) != len(names):
            raise ValueError("a dimension is named twice")
        if "payoff" in {n.lower() for n in names}:
            raise ValueError("'payoff' names the payoff: call the dimension something else")
        return names

    @model_validator(mode="after")
    def _scale(self):
        if self.scale[0] >= self.scale[1]:
            raise ValueError(f"scale {list(self.scale)}: give the lowest score first, then a higher one")
        return self


class ChatEvalScoring(ChatEvalDebate):
    description = "Debaters with personas score one dialogue response on named dimensions (ChatEval, Topical-Chat)."
    Params = ScoringParams
    summary_fields = ("dimensions",)  # the debaters' scores and the human ones, which dimension_scores correlates
    answers_field = None  # one response scored, no pair of answers compared: nothing for style control

    @classmethod
    def summaries(cls, notices: list[FinalNotice]) -> list[Summary]:
        return dimension_scores.summarize(notices)

    subject = "how good the response is on each dimension"

    @classmethod
    def cases(cls, params: ScoringParams) -> list[str]:
        return list(load_responses(params.responses))

    @staticmethod
    def load_case(params: ScoringParams):
        return case_of(load_responses(params.responses), params.case)

    def material(self) -> str:
        c = self.case
        text = "[Dialogue]\n" + "\n".join(c.context) + "\n[End of Dialogue]"
        if c.fact:
            text += f"\n\n[Fact the next speaker could use]\n{c.fact}\n[End of Fact]"
        return text + f"\n\n[Response]\n{c.response}\n[End of Response]"

    def verdict_format(self) -> str:
        low, high = self.params.scale
        lines = ", ".join(f"'{d}: N'" for d in self.params.dimensions)
        return f"your scores as its last lines, one line per dimension, each a whole number from {low} to {high}: {lines}"

    def material_data(self) -> dict[str, Any]:
        c = self.case
        return {"context": list(c.context), "response": c.response, **({"fact": c.fact} if c.fact else {})}

    def prompt(self, seat: str, round: int) -> str:
        if seat == self.summarizer:
            return "Summarize this turn of the debate."
        return "Your turn in the debate: give your arguments, then your scores."

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        data = super().prompt_data(seat, round)
        return data if seat == self.summarizer else {**data, "task": Task.SCORE}

    def verdict_data(self) -> dict[str, Any]:
        return {"dimensions": list(self.params.dimensions), "scale": list(self.params.scale)}

    def verdict_schema(self) -> dict[str, Any]:
        low, high = self.params.scale
        return scoring_schema(tuple(self.params.dimensions), low, high)

    def verdict_lines(self, value: dict[str, Any]) -> str:
        return "\n".join(f"{d}: {value[d]}" for d in self.params.dimensions)

    def parse_verdict(self, reply: str) -> dict[str, float]:
        low, high = self.params.scale
        names = {d.lower(): d for d in self.params.dimensions}
        closing: dict[str, float] = {}  # the closing lines, read from the end up to the first that scores nothing
        for line in reversed([line for line in reply.splitlines() if line.strip()]):
            found = _SCORE_LINE.fullmatch(plain(line))
            name = found and names.get(found.group(1).strip().lower())
            if not name:
                break
            closing.setdefault(name, float(found.group(2)))  # the line nearest the end
        scores, wrong = {}, []
        for dimension in self.params.dimensions:
            if dimension in closing and low <= closing[dimension] <= high:
                scores[dimension] = closing[dimension]
            else:
                wrong.append(dimension)
        if wrong:
            raise InvalidReply(f"Give {', '.join(wrong)} a score from {low} to {high}: end your message with "
                               + self.verdict_format() + ".")
        return scores

    def example_reply(self, seat: str, round: int) -> str:
        if seat == self.summarizer:
            return example_prose(100, "this turn of the debate")
        low, high = self.params.scale
        score = high if self.debaters.index(seat) % 2 == 0 else low
        return example_prose(150, "the response") + "\n\n" + "\n".join(f"{d}: {score}" for d in self.params.dimensions)

    def verdict_text(self) -> str:
        mean = self.verdict()
        return "Debate scores: " + ("none" if mean is None else ", ".join(f"{d} {v:g}" for d, v in mean.items())) + "."

    def verdict(self) -> dict[str, float] | None:
        """Each dimension's mean over the debaters' last scores."""
        finals = list(self.finals().values())
        if not finals:
            return None
        return {d: sum(f[d] for f in finals) / len(finals) for d in self.params.dimensions}

    def summary(self) -> dict[str, Any]:
        c = self.case
        return {"case": c.id, "source": c.source, "strategy": self.params.strategy,
                "dimensions": list(self.params.dimensions), "scale": list(self.params.scale),
                "scores": self.finals(), "mean": self.verdict(),
                "human": {d: c.human[d] for d in self.params.dimensions if d in c.human},
                "personas": {s: p[0] for s, p in self.persona.items()}}

    def payoffs(self) -> dict[str, float]:
        return {}

    def metrics(self) -> dict[str, dict[str, float]]:
        return {d: {s: f[d] for s, f in self.finals().items()} for d in self.params.dimensions}

    def reviews(self) -> list[tuple[str, str, str, str, int]]:
        return []
