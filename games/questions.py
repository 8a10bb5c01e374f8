"""Question sets: a JSONL file, one question a line: {"id", "question", optional "category", "reference"}
(or Vicuna80's {"question_id", "text", "category"})."""

from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path

from pydantic import AliasChoices, BaseModel, Field, ValidationError, field_validator


class Question(BaseModel):
    # Vicuna80's own file names them question_id and text: it can be used as it is.
    id: str = Field(validation_alias=AliasChoices("id", "question_id"))
    question: str = Field(validation_alias=AliasChoices("question", "text"))
    category: str | None = None
    reference: str | None = None

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value):
        return str(value) if isinstance(value, int) else value


@lru_cache(maxsize=32)
def load_questions(path: str) -> dict[str, Question]:
    """The file's questions by id, in file order; read once per process. Errors name the line."""
    file = Path(path).expanduser()
    if not file.is_file():
        raise ValueError(f"no question set at {file} (a JSONL file: one {{\"id\", \"question\"}} object a line)")
    questions: dict[str, Question] = {}
    for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            question = Question.model_validate(json.loads(line))
        except (json.JSONDecodeError, ValidationError) as exc:
            raise ValueError(f"{file}, line {number}: not a question ({str(exc).splitlines()[0]})") from None
        if question.id in questions:
            raise ValueError(f"{file}, line {number}: question id {question.id!r} appears twice")
        questions[question.id] = question
    if not questions:
        raise ValueError(f"{file}: no questions in the file")
    return questions
