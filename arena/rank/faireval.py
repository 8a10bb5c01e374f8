"""Importing FairEval's released data (Wang et al., "Large Language Models are not Fair Evaluators")
as review tuples.

The repository (github.com/i-Eval/FairEval) lays its data out as FastChat's Vicuna evaluation does:

- ``question.jsonl``: ``{"question_id", "text", "category"}`` a line (optional here);
- ``answer/answer_<model>.jsonl``: ``{"answer_id", "model_id", "question_id", "text", "metadata"}``
  a line, the questions in the same order in every file;
- ``review/review_<m1>_<m2>_human.txt``: the three authors' majority label, one line per question in
  the answers' order, no question id: ``CHATGPT`` (gpt35's answer is better), ``VICUNA13B`` or ``TIE``;
- ``review/review_<m1>_<m2>_<tag>.json``, written by ``FairEval.py`` (JSON lines despite the name):
  ``{"question_id", "question", "review": [...], "review_bpc": [...], "score": [s1, s2]}``, where
  ``review`` holds the k evaluations with m1's answer shown first and ``review_bpc`` the k with m2's
  first (BPC); each evaluation ends with two lines, the scores of Assistant 1 and of Assistant 2.

Contestants are named by their answer file (``gpt35``, ``vicuna-13b``: FairEval's own names, and
PRD's importer's for the same Vicuna80 answers). The human labels become reviewer ``human``, one
review per question (the annotators saw the answers in an order that was not recorded); every
evaluation in a FairEval.py file becomes one review in the order it was shown, its reviewer named
by the file's tag (``gpt-3.5-turbo-0301_mec3_bpc1``), so both presentation orders are kept, unless
``order`` asks for one: ``first`` reads ``review`` alone (the evaluations FairEval makes without BPC),
``second`` reads ``review_bpc`` alone.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from .reviews import HUMAN, ReviewError, Reviews

# the words of the released label file, and the answer file each one names
LABELS = {"CHATGPT": "gpt35", "VICUNA13B": "vicuna-13b", "TIE": None}
_SCORE = re.compile(r":\s*(-?\d+(?:\.\d+)?)\s*$")


def _sign(first: float, second: float) -> int:
    """A review's score: -1 when the answer shown first scored higher, +1 when the second did."""
    return (second > first) - (second < first)


def _jsonl(path: Path) -> list[tuple[int, dict]]:
    rows = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ReviewError(f"{path}, line {number}: not JSON ({exc.msg})") from None
        if not isinstance(row, dict):
            raise ReviewError(f"{path}, line {number}: expected a JSON object")
        rows.append((number, row))
    return rows


def _question_ids(path: Path, text_field: str = "text") -> list[str]:
    """The question ids of a question or answer file, in file order."""
    ids = []
    for number, row in _jsonl(path):
        if "question_id" not in row or not isinstance(row.get(text_field), str):
            raise ReviewError(f"{path}, line {number}: expected an object with question_id and {text_field}")
        ids.append(str(row["question_id"]))
    if not ids:
        raise ReviewError(f"{path}: no lines in the file")
    return ids


def _answers(folder: Path) -> dict[str, list[str]]:
    """Contestant (file name without ``answer_``) -> its question ids in order."""
    directory = folder / "answer"
    files = sorted(directory.glob("answer_*.jsonl")) if directory.is_dir() else []
    if not files:
        raise ReviewError(f"{folder}: no answer/answer_<model>.jsonl files (is this FairEval's repository folder?)")
    return {path.stem.removeprefix("answer_"): _question_ids(path) for path in files}


def _pair_of(name: str, contestants: list[str], suffix: str) -> tuple[str, str, str] | None:
    """(m1, m2, tag) for a review file named ``review_<m1>_<m2>_<tag><suffix>``, reading m1 and m2
    against the answer files (model names may hold underscores, so the name alone is ambiguous)."""
    for first in contestants:
        for second in contestants:
            head = f"review_{first}_{second}_"
            if first != second and name.startswith(head) and name.endswith(suffix) and len(name) > len(head) + len(suffix):
                return first, second, name[len(head):-len(suffix)]
    return None


def _order(ids_by_file: dict[str, list[str]], pair: tuple[str, str], folder: Path) -> list[str]:
    """The question order the label file follows: the answers', which must agree (as FairEval.py asserts)."""
    first, second = (ids_by_file[m] for m in pair)
    for i, (x, y) in enumerate(zip(first, second), start=1):
        if x != y:
            raise ReviewError(f"{folder / 'answer'}: line {i} of answer_{pair[0]}.jsonl is question {x}, of "
                              f"answer_{pair[1]}.jsonl question {y}; the files must list the questions in the same order")
    if len(first) != len(second):
        raise ReviewError(f"{folder / 'answer'}: answer_{pair[0]}.jsonl has {len(first)} answers, "
                          f"answer_{pair[1]}.jsonl {len(second)}")
    questions = folder / "question.jsonl"
    if questions.is_file():
        listed = _question_ids(questions)
        for i, (x, y) in enumerate(zip(listed, first), start=1):
            if x != y:
                raise ReviewError(f"{questions}, line {i}: question {x}, but the answers' line {i} is question {y}")
        if len(listed) != len(first):
            raise ReviewError(f"{questions}: {len(listed)} questions, but {len(first)} answers in each answer file")
    return first


def read_labels(path: Path, pair: tuple[str, str], questions: list[str]) -> list[tuple[str, str, str, str, int]]:
    """The human label file: one label a line, line i for the i-th question."""
    lines = path.read_text(encoding="utf-8").splitlines()
    while lines and not lines[-1].strip():
        lines.pop()
    scores = []
    for number, line in enumerate(lines, start=1):
        label = line.strip().upper()
        if label not in LABELS:
            what = "an empty line" if not label else repr(line.strip())
            raise ReviewError(f"{path}, line {number}: {what} is not a label (one of {', '.join(LABELS)}, one a line)")
        winner = LABELS[label]
        if winner is not None and winner not in pair:
            raise ReviewError(f"{path}, line {number}: {label} names {winner}'s answer, which is not one of this "
                              f"file's pair ({pair[0]}, {pair[1]})")
        scores.append(0 if winner is None else (-1 if winner == pair[0] else 1))
    if len(scores) != len(questions):
        raise ReviewError(f"{path}: {len(scores)} labels for {len(questions)} questions (one label a line, in the "
                          "answer files' order)")
    return [(question, pair[0], pair[1], HUMAN, score) for question, score in zip(questions, scores)]


def _scores(text: str) -> tuple[float, float] | None:
    """The two scores an evaluation ends with ("Score of the Assistant 1: 8", then Assistant 2's)."""
    tail = [line for line in text.splitlines() if line.strip()][-2:]
    found = [_SCORE.search(line) for line in tail]
    if len(found) != 2 or not all(found):
        return None
    return float(found[0].group(1)), float(found[1].group(1))


# --order: which of a FairEval.py file's lists to read. ``review`` shows the file's first model's answer
# first; ``review_bpc`` (Balanced Position Calibration) the second model's.
ORDERS = {"first": ("review",), "second": ("review_bpc",), "both": ("review", "review_bpc")}


def read_evaluations(path: Path, pair: tuple[str, str], reviewer: str, questions: list[str],
                     order: str = "both") -> list[tuple[str, str, str, str, int]]:
    """A FairEval.py output file: every evaluation as the review of the order it was shown in; with
    ``order`` first or second, only those shown in that order (see ``ORDERS``)."""
    known = set(questions)
    rows = []
    for number, row in _jsonl(path):
        question = str(row.get("question_id"))
        if question not in known:
            raise ReviewError(f"{path}, line {number}: question_id {row.get('question_id')!r} is not a question "
                              "of the answer files")
        for field, (first, second) in (("review", pair), ("review_bpc", pair[::-1])):
            if field not in ORDERS[order]:
                continue
            texts = row.get(field, [])
            if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
                raise ReviewError(f"{path}, line {number}: {field} must be a list of evaluation texts")
            for k, text in enumerate(texts, start=1):
                scores = _scores(text)
                if scores is None:
                    raise ReviewError(f"{path}, line {number}: {field} evaluation {k} does not end with two score "
                                      "lines (Score of the Assistant 1: <n>, Score of the Assistant 2: <n>)")
                rows.append((question, first, second, reviewer, _sign(*scores)))
    if not rows and order != "both":
        shown = pair[0] if order == "first" else pair[1]
        raise ReviewError(f"{path}: no evaluations with {shown}'s answer shown first ({ORDERS[order][0]}), which "
                          f"--order {order} asks for; --order both reads whatever the file holds")
    if not rows:
        raise ReviewError(f"{path}: no evaluations in the file")
    return rows


def read_faireval(folder: str | Path, contestants: list[str] | None = None,
                  order: str = "both") -> tuple[Reviews, list[str]]:
    """Every human label file and FairEval.py output under ``folder/review`` for a pair of
    ``folder/answer`` files. With ``contestants``, only pairs of those; ``order`` (first, second,
    both) chooses which presentation order of the evaluations to read (the human labels, whose order
    was not recorded, are read whatever it is). Returns the reviews and the review files left out
    (named for no pair of answer files, or of another pair)."""
    if order not in ORDERS:
        raise ReviewError(f"order {order!r}: expected one of {', '.join(ORDERS)}")
    folder = Path(folder)
    if not folder.is_dir():
        raise ReviewError(f"{folder}: no such folder")
    ids = _answers(folder)
    names = sorted(ids, key=len, reverse=True)  # the longest names first, so vicuna-13b is not read as vicuna
    reviews = folder / "review"
    files = sorted(p for p in reviews.iterdir() if p.is_file()) if reviews.is_dir() else []
    rows, skipped, labelled = [], [], False
    for path in files:
        found = _pair_of(path.name, names, ".txt") or _pair_of(path.name, names, ".json")
        if found is None or (found[2] != HUMAN and path.suffix == ".txt"):
            skipped.append(str(path))
            continue
        first, second, tag = found
        if contestants is not None and not {first, second} <= set(contestants):
            continue
        order_of_questions = _order(ids, (first, second), folder)
        if path.suffix == ".txt":
            rows += read_labels(path, (first, second), order_of_questions)
            labelled = True
        else:
            rows += read_evaluations(path, (first, second), tag, order_of_questions, order)
    if not labelled:
        raise ReviewError(f"{reviews}: no human label file review_<m1>_<m2>_human.txt for a pair of the answer "
                          f"files ({', '.join(sorted(ids))})")
    return Reviews.from_rows(rows), skipped
