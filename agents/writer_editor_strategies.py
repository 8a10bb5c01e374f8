"""Scripted stand-ins for the writer/editor games (code review, translation) and their judge.

They are offline players for tests and demos, not models: they read the reference the game
passes in its structured prompt data (a canonical solution, a reference translation), which
no model ever sees. As a writer it gets it right with probability ``write``, otherwise hands
in a flawed version; as an editor it catches a flaw with probability ``edit``; the judge
scores by similarity to the reference.
"""

from __future__ import annotations

import difflib
import json
import random

from pydantic import Field

from arena.contract import Strategy, StrategyParams, Turn



def flawed(data: dict) -> str:
    """A plausible wrong answer: code whose body does nothing useful, a text with words missing."""
    reference = data.get("reference") or data.get("source") or ""
    if data.get("task") == "code":
        return data["source"] + "    return None\n"
    words = reference.split()
    if len(words) > 1:
        return " ".join(w for i, w in enumerate(words) if i % 3 != 1)
    return "".join(c for i, c in enumerate(reference) if i % 4 != 1)  # scripts written without spaces


def right(data: dict) -> str:
    if data.get("reference"):
        return data["reference"]
    if data.get("task") == "code":
        return data["source"] + "    pass\n"  # no solution to copy: the best a stand-in can do
    return data.get("source", "")


class WriterEditorParams(StrategyParams):
    write: float = Field(0.5, ge=0, le=1, description="Chance that a first draft is right.")
    fix: float = Field(0.8, ge=0, le=1, description="Chance that a revision after review comments is right.")
    edit: float = Field(0.5, ge=0, le=1, description="Chance of catching a flaw as reviewer or proofreader.")


class WriterEditor(Strategy):
    """Plays either role: programmer or translator (writing), reviewer or proofreader (editing)."""

    Params = WriterEditorParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        data = turn.prompt_data or {}
        stage = data.get("stage")
        current = data.get("current") or ""
        wrong = current.strip() != right(data).strip()
        if stage == "write":
            return right(data) if rng.random() < self.params.write else flawed(data)
        if stage == "revise":
            return right(data) if wrong and data.get("last_review") and rng.random() < self.params.fix else current
        caught = wrong and rng.random() < self.params.edit
        if data.get("task") == "code":
            if caught:
                return ("Correctness: the function does not compute what the docstring asks; it returns the same value "
                        "whatever the input. Implement the logic and check it against the docstring's examples.")
            return data.get("done_word", "over")
        return right(data) if caught else current


class ReferenceJudgeParams(StrategyParams):
    noise: float = Field(0.0, ge=0, description="Standard deviation of noise added to each score.")


def similarity(a: str, b: str | None, given: str = "") -> float:
    """How close ``a`` is to ``b``, leaving out what both were given (a function's signature)."""
    if not b:
        return 0.5  # nothing to compare with: a middling score
    a, b, given = a.strip(), b.strip(), given.strip()
    if given and a.startswith(given) and b.startswith(given):
        a, b = a[len(given):], b[len(given):]
    return difflib.SequenceMatcher(None, a.strip(), b.strip(), autojunk=False).ratio()


class ReferenceJudge(Strategy):
    """Scores the writer by how close its first draft is to the reference, the editor by how close
    the final version is (a good editor brings a flawed draft to the reference)."""

    Params = ReferenceJudgeParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        data = turn.prompt_data or {}
        low, high = data.get("scale", [1, 10])

        def score(text: str) -> int:
            closeness = similarity(text, data.get("reference"), data.get("source", ""))
            raw = low + (high - low) * closeness + rng.gauss(0, self.params.noise)
            return int(min(high, max(low, round(raw))))

        verdict = {
            data["writer"]: {"evaluation": "closeness of the first version to the reference", "score": score(data["first"])},
            data["editor"]: {"evaluation": "closeness of the final version to the reference", "score": score(data["final"])},
        }
        return json.dumps(verdict, ensure_ascii=False)
