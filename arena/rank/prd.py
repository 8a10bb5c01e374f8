"""Importing PRD's released Vicuna80 ratings as review tuples."""

from __future__ import annotations

import json
import re
from pathlib import Path

from .reviews import ReviewError, Reviews

SCORES = {1: -1, 2: 1, 3: 0}  # PRD: 1 = the first-named answer (Assistant 1) is better, 2 = the second, 3 = tie


def read_prd(folder: str | Path, contestants: list[str] | None = None) -> tuple[Reviews, list[str]]:
    """Every ``ratings-<reviewer>/answer_<m1>-vs-answer_<m2>-<reviewer>-reviewer*.jsonl`` file under
    ``folder``; human votes come from ``ratings-human`` as reviewer ``human``. Files named with
    hyphens only (``answer-gpt35-vs-answer-gpt4-...``, a second run) are left out. With
    ``contestants``, only battles between those. Returns the reviews and the files left out."""
    folder = Path(folder)
    rows, skipped = [], []
    folders = sorted(p for p in folder.glob("ratings-*") if p.is_dir())
    if not folders:
        raise ReviewError(f"{folder}: no ratings-<reviewer> folders (is this PRD's vicuna80 folder?)")
    for sub in folders:
        reviewer = sub.name[len("ratings-"):]
        pattern = re.compile(rf"answer_(.+?)-vs-answer_(.+)-{re.escape(reviewer)}-reviewer(?:[_-]threeclass)?\.jsonl")
        for path in sorted(sub.glob("*.jsonl")):
            match = pattern.fullmatch(path.name)
            if not match:
                skipped.append(str(path))
                continue
            a, b = match.groups()
            if contestants is not None and (a not in contestants or b not in contestants):
                continue
            for number, line in enumerate(path.open(encoding="utf-8"), start=1):
                if not line.strip():
                    continue
                record = json.loads(line)
                if record.get("score") not in SCORES:
                    raise ReviewError(f"{path}, line {number}: score {record.get('score')!r} is not one of 1, 2, 3")
                rows.append((str(record["question_id"]), a, b, reviewer, SCORES[record["score"]]))
    return Reviews.from_rows(rows), skipped
