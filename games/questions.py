"""Cases for the judging games: question sets (JSONL, one {"id", "question"} a line, or Vicuna80's
{"question_id", "text"}, or MT-Bench's {"question_id", "turns"}, of which the first turn is asked), pairs of fixed answers to judge (see ``load_pairs``) and single responses
to score on named dimensions (see ``load_responses``)."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from typing import Literal, TypeVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError, field_validator

M = TypeVar("M", bound=BaseModel)


class Question(BaseModel):
    # Vicuna80's own file names them question_id and text, MT-Bench's question_id and turns (a question
    # and its follow-up): both files can be used as they are; of MT-Bench's turns (and reference answers) the first is taken.
    id: str = Field(validation_alias=AliasChoices("id", "question_id"))
    question: str = Field(validation_alias=AliasChoices("question", "text", "turns"))
    category: str | None = None
    reference: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value):
        return str(value) if isinstance(value, int) else value

    @field_validator("question", "reference", mode="before")
    @classmethod
    def _first_turn(cls, value):  # MT-Bench gives some questions a reference answer per turn
        if isinstance(value, list) and value and isinstance(value[0], str):
            return value[0]
        return value


def case_of(cases: dict, case: str | None):
    """The match's case; without one (a match played outside a tournament), the first."""
    if case is None:
        return next(iter(cases.values()))
    if case not in cases:
        raise ValueError(f"no case {case!r} in the file")
    return cases[case]


def load_jsonl(path: str, model: type[M], what: str, shape: str) -> dict[str, M]:
    """One ``model`` per line of a JSONL file, by id, in file order. Errors name the file and line;
    ``what`` names an item ("question"), ``shape`` says what a line holds."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"no {what} set at {file} (a JSONL file: {shape})")
    items: dict[str, M] = {}
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{file}, line {number}: not a {what}: not JSON ({exc})") from None
        if not isinstance(raw, dict):
            raise ValueError(f"{file}, line {number}: not a {what}: a line holds one JSON object ({shape})")
        try:
            item = model.model_validate(raw)
        except ValidationError as exc:
            raise ValueError(f"{file}, line {number}: not a {what}: {_field_problems(exc, model, raw)}") from None
        if item.id in items:
            raise ValueError(f"{file}, line {number}: {what} id {item.id!r} appears twice")
        items[item.id] = item
    if not items:
        raise ValueError(f"{file}: no {what}s in the file")
    return items


def _names(model: type[BaseModel], name: str) -> list[str]:
    """The keys a field is read from: its aliases, or its own name."""
    alias = model.model_fields[name].validation_alias
    return [str(c) for c in alias.choices] if isinstance(alias, AliasChoices) else [name]


def _field_problems(exc: ValidationError, model: type[BaseModel], raw: dict) -> str:
    """What is wrong with a line, by field, then the fields expected and the fields found: a file of
    another shape is told apart from a typo at a glance."""
    problems = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "the line"
        field = next((n for n in model.model_fields if field in _names(model, n)), field)
        problems.append(f"{' or '.join(_names(model, field)) if field in model.model_fields else field}: "
                        f"{error['msg'][0].lower()}{error['msg'][1:]}")
    expected = [" or ".join(_names(model, n)) + ("" if f.is_required() else " (optional)")
                for n, f in model.model_fields.items()]
    return (f"{'; '.join(problems)}. Expected fields: {', '.join(expected)}; "
            f"found: {', '.join(raw) if raw else 'none'}")


@lru_cache(maxsize=32)
def load_questions(path: str) -> dict[str, Question]:
    """The file's questions by id, in file order; read once per process."""
    return load_jsonl(path, Question, "question", 'one {"id", "question"} object a line')


class Case(BaseModel):
    id: str
    question: str
    answer_a: str
    answer_b: str
    source_a: str = "answer_a"
    source_b: str = "answer_b"
    label: int | None = None
    # how a split of expert judgments became the label ("tie" or "first", see ``expert_label``);
    # None when the file gave the label itself
    expert_ties: str | None = None


ExpertTies = Literal["tie", "first"]
EXPERT_TIES_HELP = ("How a split among the experts of PRD's LFQA file (as many for A as for B) becomes the label: "
                    "tie, or first: the first expert's vote, as PRD's code breaks it (the human win rates of the "
                    "paper's Tables 10 and 11 come from this rule).")


def expert_label(preferences: list[int], ties: ExpertTies = "tie") -> int:
    """A pair's label from its experts' preferences (-1: A better, 1: B): the majority, the sign of
    their mean. A split is a tie, or, with ``ties="first"``, the first expert's preference (PRD's
    code keeps the first vote it reads when the votes cancel out)."""
    total = sum(preferences)
    if total == 0 and ties == "first":
        return preferences[0]
    return (total > 0) - (total < 0)


SWAPPED = "@swapped"  # a case id's suffix: the pair with its answers shown the other way round


def swapped(case: Case) -> Case:
    """The same pair shown the other way round: answer B first. The label follows the answers."""
    return case.model_copy(update={
        "id": case.id + SWAPPED, "answer_a": case.answer_b, "answer_b": case.answer_a,
        "source_a": case.source_b, "source_b": case.source_a,
        "label": None if case.label is None else -case.label})


def pair_of(cases: dict[str, Case], case: str | None) -> Case:
    """The match's pair, as ``case_of`` finds it, shown the other way round when its id ends in
    ``@swapped`` (the second order of a position-calibrated game)."""
    if case is not None and case.endswith(SWAPPED) and case not in cases:
        return swapped(case_of(cases, case.removesuffix(SWAPPED)))
    return case_of(cases, case)


@lru_cache(maxsize=16)
def load_pairs(path: str, expert_ties: ExpertTies = "tie") -> dict[str, Case]:
    """Pairs of fixed answers to one question each, by id: JSONL lines {"id", "question",
    "answer_a", "answer_b"} with optional "source_a"/"source_b" and "label" (-1: A better, 1: B,
    0: tie); PRD's LFQA expert file is read as it is, its repeated judgments folded to their
    majority, a split decided by ``expert_ties`` (see ``expert_label``). Read once per process;
    errors name the line."""
    if expert_ties not in ("tie", "first"):
        raise ValueError(f"expert_ties {expert_ties!r}: one of tie, first")
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"no pairs file at {file} (JSONL: id, question, answer_a, answer_b, optional label)")
    cases: dict[str, Case] = {}
    votes: dict[str, list[int]] = {}  # LFQA: case id -> the experts' preferences
    ids: dict[str, str] = {}  # LFQA: (question, answers) -> case id
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            raw = json.loads(line)
            if "overall_preference" in raw:  # PRD's LFQA expert file
                case_id = ids.setdefault(json.dumps([raw["question"], raw["answer_a"], raw["answer_b"]]), str(number))
                votes.setdefault(case_id, []).append(int(raw["overall_preference"]))
                cases[case_id] = Case(id=case_id, question=raw["question"], answer_a=raw["answer_a"], answer_b=raw["answer_b"],
                                      source_a=raw.get("answer_a_type", "answer_a"), source_b=raw.get("answer_b_type", "answer_b"))
                continue
            case = Case.model_validate({**raw, "id": str(raw.get("id", ""))})
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{file}, line {number}: not a pair to discuss ({str(exc).splitlines()[0]})") from None
        if not case.id:
            raise ValueError(f"{file}, line {number}: the pair has no id")
        cases[case.id] = case
    for case_id, prefs in votes.items():
        cases[case_id] = cases[case_id].model_copy(update={"label": expert_label(prefs, expert_ties),
                                                           "expert_ties": expert_ties})
    if not cases:
        raise ValueError(f"{file}: no pairs in the file")
    return cases


class Response(BaseModel):
    """One response to a dialogue, to be scored on named dimensions."""

    model_config = ConfigDict(extra="forbid")

    id: str
    context: list[str] = Field(min_length=1, description="The dialogue so far, one turn a line, oldest first.")
    response: str = Field(min_length=1)
    fact: str | None = Field(None, description="Knowledge the response may draw on (Topical-Chat's grounding).")
    source: str = Field("response", description="Who wrote the response (a system's name).")
    human: dict[str, float] = Field(default_factory=dict, description="Human scores by dimension, any scale.")

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value):
        return str(value) if isinstance(value, int) else value

    @field_validator("context", mode="before")
    @classmethod
    def _context(cls, value):
        return [line for line in value.splitlines() if line.strip()] if isinstance(value, str) else value


@lru_cache(maxsize=16)
def load_responses(path: str) -> dict[str, Response]:
    """Responses to score, by id: JSONL lines {"id", "context", "response"} with optional "fact",
    "source" and "human" ({dimension: score}); "context" is a list of turns or one text, a turn a
    line. Read once per process; errors name the line."""
    return load_jsonl(path, Response, "response",
                      '{"id", "context": [turns], "response", optional "fact", "source", "human": {dimension: score}}')
