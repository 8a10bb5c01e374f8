"""Reading a reviews JSONL file: in bulk, a column at a time, with the errors of a line-by-line check.

``ReviewLine`` (pydantic) says what a valid line is and how a bad one is reported; asked line by
line it costs about 37 µs a line, most of `arena rank` on a million reviews. So a file is first
read by pyarrow's JSON reader in blocks, each column with a fixed type, and checked a column at a
time against the same rules. That path only ever accepts what ``ReviewLine`` accepts, and gives the
same columns ``Reviews.from_rows`` builds from the lines. Whatever it cannot settle goes to
``ReviewLine``:

- a row a column check rejects: its line is found by counting lines up to it, and ``ReviewLine``
  reports it, with the file, line number and field (rows before it passed the same checks);
- a block pyarrow cannot read with the fixed types (bad JSON, a number for a name, a score written
  1.0, an explicit null where a default is meant): the file is read line by line, each line by
  orjson and plain checks, and only a line those cannot settle is asked of ``ReviewLine``.
"""

from __future__ import annotations

import math
import mmap
import re
from pathlib import Path

import numpy as np
import orjson

from arena.contract.capabilities import Review

from .reviews import TIE, ReviewError, ReviewLine, Reviews, _sign
from pydantic import ValidationError

BLOCK_BYTES = 1 << 20  # pyarrow reads this much at a time: what is held beside the columns built so far
# One thread: the other core, if any, loads the compiled Elo meanwhile (elo_loop.warm_up), and a
# second parsing thread held 20 MB more at its peak for about the same CPU time.
TEXT = ("question", "a", "b", "reviewer", "match")  # names, kept as codes into their sorted lists
REQUIRED = ("question", "a", "b", "reviewer", "score")
STRUCTURE = {"sample": (-1, np.int64), "order": (0, np.int8), "repeat": (1, np.int64), "difference": (np.nan, float)}
# A null where a field has a default is an error for ReviewLine, but pyarrow shows it as a missing field.
EXPLICIT_NULL = re.compile(rb'"(?:order|repeat|match)"\s*:\s*null')


class _Unsure(Exception):
    """The bulk reader cannot settle the file: read it line by line."""


def read(path: Path) -> Reviews:
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        raise ReviewError(f"{path}: file not found") from None
    with handle:
        try:
            return _bulk(path, handle)
        except _Unsure:
            pass
    return by_line(path)


# -- line by line --------------------------------------------------------------------------------

def check_line(path: Path, number: int, line: str | bytes) -> Review:
    """One line as ``ReviewLine`` takes it, or the error naming its file, line and field."""
    try:
        review = ReviewLine.model_validate_json(line)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = "".join(f"{p}: " for p in first["loc"][:1])  # none for a disagreement between fields
        message = first["msg"].removeprefix("Value error, ")
        raise ReviewError(f"{path}, line {number}: {where}{message}") from None
    if review.a == review.b:
        raise ReviewError(f"{path}, line {number}: a contestant cannot battle itself ({review.a!r})")
    return review.review()


def _plain(value) -> Review | None:
    """The review of a parsed line when plain types make it certain what ``ReviewLine`` gives
    (strings or integers for names, integers in range, a finite difference of the score's sign);
    None: ask ``ReviewLine``."""
    if type(value) is not dict:
        return None
    names = []
    for name in ("question", "a", "b", "reviewer", "match"):
        text = value.get(name, "" if name == "match" else None)
        kind = type(text)
        if kind is int:
            text = str(text)  # ReviewLine takes a number for a name, as its text
        elif kind is not str:
            return None
        names.append(text)
    score, sample = value.get("score"), value.get("sample")
    order, repeat, difference = value.get("order", 0), value.get("repeat", 1), value.get("difference")
    if (type(score) is not int or score not in (-1, 0, 1) or type(order) is not int or order not in (0, 1)
            or type(repeat) is not int or not (sample is None or (type(sample) is int and sample >= 0))
            or names[1] == names[2]):
        return None
    if difference is not None:
        if type(difference) not in (int, float):
            return None
        difference = float(difference)
        if not math.isfinite(difference) or _sign(difference) != score:
            return None
    question, a, b, reviewer, match = names
    return Review(question, a, b, reviewer, score, sample, order, repeat, difference, match)


def by_line(path: Path) -> Reviews:
    """The file read as ``ReviewLine`` reads it, line by line; orjson and ``_plain`` settle most lines."""
    rows = []
    try:
        handle = path.open(encoding="utf-8")
    except FileNotFoundError:
        raise ReviewError(f"{path}: file not found") from None
    with handle:
        for number, line in enumerate(handle, start=1):
            if not line.strip():
                continue
            try:
                review = _plain(orjson.loads(line))
            except orjson.JSONDecodeError:
                review = None
            rows.append(review or check_line(path, number, line))
    if not rows:
        raise ReviewError(f"{path}: no reviews in the file")
    return Reviews.from_rows(rows)


# -- in bulk -------------------------------------------------------------------------------------

class _Names:
    """Codes for names as blocks bring them, renumbered in sorted order at the end."""

    def __init__(self):
        self.index: dict[str, int] = {}

    def codes(self, column) -> np.ndarray:
        import pyarrow.compute as pc

        encoded = pc.dictionary_encode(column)
        index = self.index
        ids = np.fromiter((index.setdefault(name, len(index)) for name in encoded.dictionary.to_pylist()),
                          dtype=np.int32, count=len(encoded.dictionary))
        return ids[encoded.indices.to_numpy(zero_copy_only=False)]

    def sorted(self, parts: list[np.ndarray]) -> tuple[np.ndarray, list[str]]:
        """The codes of every block, as int64 codes into the sorted names (as ``Reviews.from_rows`` numbers them)."""
        names = sorted(self.index)
        place = np.empty(len(names), dtype=np.int64)
        place[[self.index[name] for name in names]] = np.arange(len(names))
        codes = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int32)
        parts.clear()  # the blocks' codes go as soon as they are joined
        return place[codes], names


def _schema():
    import pyarrow as pa

    text, whole = pa.string(), pa.int64()
    return pa.schema([("question", text), ("a", text), ("b", text), ("reviewer", text), ("score", whole),
                      ("sample", whole), ("order", whole), ("repeat", whole), ("difference", pa.float64()),
                      ("match", text)])


def _first_bad(batch) -> int | None:
    """The index of the first row of ``batch`` a column check rejects, or None."""
    import pyarrow.compute as pc

    column = {name: batch.column(name) for name in batch.schema.names}
    bad = np.zeros(batch.num_rows, dtype=bool)
    for name in REQUIRED:
        if column[name].null_count:
            bad |= column[name].is_null().to_numpy(zero_copy_only=False)
    score = column["score"].fill_null(0).to_numpy()
    sample = column["sample"].fill_null(0).to_numpy()
    order = column["order"].fill_null(0).to_numpy()
    bad |= (score < -1) | (score > 1) | (sample < 0) | (order < 0) | (order > 1)
    if column["difference"].null_count < batch.num_rows:
        given = column["difference"].is_valid().to_numpy(zero_copy_only=False)
        difference = column["difference"].fill_null(0.0).to_numpy()
        with np.errstate(invalid="ignore"):
            wrong = ~np.isfinite(difference) | (np.where(np.abs(difference) < TIE, 0, np.sign(difference)) != score)
        bad |= given & wrong
    bad |= pc.equal(column["a"], column["b"]).fill_null(False).to_numpy(zero_copy_only=False)
    return int(np.argmax(bad)) if bad.any() else None


def _report_row(path: Path, row: int) -> None:
    """Raise ``ReviewLine``'s error for the ``row``-th non-blank line (from 0), as the line reader would."""
    with path.open(encoding="utf-8") as handle:
        seen = -1
        for number, line in enumerate(handle, start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    check_line(path, number, line)
                    break
    raise _Unsure  # the columns were stricter than ReviewLine here: let the line reader decide


def _bulk(path: Path, handle) -> Reviews:
    try:
        import pyarrow as pa
        import pyarrow.json as pj
    except ImportError:  # a dependency, but the line reader gives the same reviews without it
        raise _Unsure from None
    if handle.seek(0, 2) == 0:
        raise ReviewError(f"{path}: no reviews in the file")
    with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
        if data.find(b"null") >= 0 and EXPLICIT_NULL.search(data):
            raise _Unsure
    try:
        return _blocks(path)
    finally:
        # numpy copied what it keeps of each block: what pyarrow's pool still holds goes back to the system
        pa.default_memory_pool().release_unused()


def _blocks(path: Path) -> Reviews:
    import pyarrow as pa
    import pyarrow.json as pj

    options = pj.ParseOptions(explicit_schema=_schema(), unexpected_field_behavior="ignore")
    contestants, others = _Names(), {name: _Names() for name in ("question", "reviewer", "match")}
    parts: dict[str, list[np.ndarray]] = {name: [] for name in _schema().names}
    given = set()  # the structure's fields some line gives: the others are their default on every row
    rows = 0
    try:
        reader = pj.open_json(path, read_options=pj.ReadOptions(block_size=BLOCK_BYTES, use_threads=False), parse_options=options)
        for batch in reader:
            bad = _first_bad(batch)
            if bad is not None:
                _report_row(path, rows + bad)
            rows += batch.num_rows
            for name in ("a", "b"):
                parts[name].append(contestants.codes(batch.column(name)))
            for name, names in others.items():
                parts[name].append(names.codes(batch.column(name).fill_null("") if name == "match" else batch.column(name)))
            parts["score"].append(batch.column("score").to_numpy().astype(np.int8))
            for name, (fill, dtype) in STRUCTURE.items():
                column = batch.column(name)
                if column.null_count == batch.num_rows:  # the field's default on every row: made when needed
                    parts[name].append(np.broadcast_to(np.array(fill, dtype), batch.num_rows))
                else:
                    given.add(name)
                    parts[name].append(column.fill_null(fill).to_numpy(zero_copy_only=False).astype(dtype))
    except pa.ArrowInvalid:
        raise _Unsure from None
    if not rows:
        raise ReviewError(f"{path}: no reviews in the file")
    # a and b share one list of contestants, numbered together as from_rows numbers them
    a_b, everyone = contestants.sorted(parts.pop("a") + parts.pop("b"))
    question, questions = others["question"].sorted(parts["question"])
    reviewer, reviewers = others["reviewer"].sorted(parts["reviewer"])
    match, matches = others["match"].sorted(parts["match"])
    joined = {}
    for name, (fill, dtype) in STRUCTURE.items():
        # a field no line gives is one value on every row: a read-only view of it, no memory per row
        joined[name] = np.concatenate(parts[name]) if name in given else np.broadcast_to(np.array(fill, dtype), rows)
        parts[name].clear()
    if len(matches) == 1:  # one match (or none named): one code on every row
        match = np.broadcast_to(match[:1], rows)
    return Reviews(question=question, a=a_b[:rows], b=a_b[rows:], reviewer=reviewer, score=np.concatenate(parts["score"]),
                   questions=questions, contestants=everyone, reviewers=reviewers, sample=joined["sample"],
                   order=joined["order"], repeat=joined["repeat"], difference=joined["difference"], match=match,
                   matches=matches)
