"""Reading a reviews JSONL file: in bulk, a column at a time, with the errors of a line-by-line check.

``ReviewLine`` (``review_line``) says what a valid line is and how a bad one is reported; asked
line by line it costs about 37 µs a line, most of `arena rank` on a million reviews. So a file is
first read by pyarrow's JSON reader in blocks, each column with a fixed type, and checked a column
at a time against the same rules. That path only ever accepts what ``ReviewLine`` accepts, and
gives the columns ``Reviews.from_rows`` builds from the same lines (``read`` returns them as the
``Reviews`` fields; ``Reviews.read_jsonl`` is the way in). Whatever it cannot settle goes to
``ReviewLine``:

- a row a column check rejects: its line is found by counting lines up to it, and ``ReviewLine``
  reports it, with the file, line number and field (rows before it passed the same checks);
- a file pyarrow cannot read with the fixed types (bad JSON, a number for a name, a score written
  1.0, an explicit null where a default is meant): the file is read line by line, each line by
  orjson and plain checks, and only a line those cannot settle is asked of ``ReviewLine``; the
  rows are returned for ``Reviews.from_rows``.
"""

from __future__ import annotations

import codecs
import math
import re
from pathlib import Path

import numpy as np
import orjson

from arena.contract.capabilities import Review

from .review_line import TIE, ReviewError, _sign, check_line

BLOCK_BYTES = 1 << 20  # pyarrow reads this much at a time; smaller blocks cost more calls a block (0.3 s more
# CPU at 256 KB on a million reviews). It reads ahead a few dozen blocks: what they held is given back at the end.
REQUIRED = ("question", "a", "b", "reviewer", "score")
ENCODING = "utf-8-sig"  # UTF-8, and a byte-order mark at the start of the file is not part of its first line
# the optional fields, their default and type (as Reviews.from_rows has them); match's are codes, "" by default
STRUCTURE = {"sample": (-1, np.int64), "order": (0, np.int8), "repeat": (1, np.int64), "difference": (np.nan, float),
             "match": ("", np.int64)}
SHORTEST_LINE = len('{"question":1,"a":1,"b":2,"reviewer":1,"score":0}')  # the fewest bytes a valid line takes
# A null where a field has a default is an error for ReviewLine, but pyarrow shows it as a missing field.
EXPLICIT_NULL = re.compile(rb'"(?:order|repeat|match)"\s*:\s*null')
LONE_CR = re.compile(rb"\r(?=[^\n])")  # followed by something other than a line feed, in what was read


class _Unsure(Exception):
    """The bulk reader cannot settle the file: read it line by line."""


def read(path: Path) -> dict | list[Review]:
    """The file's reviews: the ``Reviews`` fields, read in bulk, or the rows of the line reader."""
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


def _not_text(path: Path) -> None:
    """The error for a file that is not UTF-8 text, naming its first line that is not."""
    with path.open("rb") as handle:
        for number, line in enumerate(handle, start=1):
            try:
                line.decode(ENCODING)
            except UnicodeDecodeError:
                raise ReviewError(f"{path}, line {number}: not UTF-8 text") from None
    raise ReviewError(f"{path}: not UTF-8 text")


def by_line(path: Path) -> list[Review]:
    """The file read as ``ReviewLine`` reads it, line by line; orjson and ``_plain`` settle most lines."""
    rows = []
    try:
        handle = path.open(encoding=ENCODING)
    except FileNotFoundError:
        raise ReviewError(f"{path}: file not found") from None
    with handle:
        try:
            for number, line in enumerate(handle, start=1):
                if not line.strip():
                    continue
                try:
                    review = _plain(orjson.loads(line))
                except orjson.JSONDecodeError:
                    review = None
                rows.append(review or check_line(path, number, line))
        except UnicodeDecodeError:
            _not_text(path)
    if not rows:
        raise ReviewError(f"{path}: no reviews in the file")
    return rows


# -- in bulk -------------------------------------------------------------------------------------

class _Names:
    """Codes for names as blocks bring them (their order of first sight), renumbered in sorted order
    at the end. A block's names are looked up among those seen so far by pyarrow, in one call: no
    Python code runs per name."""

    def __init__(self):
        import pyarrow as pa

        self.seen = pa.array([], pa.string())

    def codes(self, column) -> np.ndarray:
        import pyarrow as pa
        from pyarrow._compute import SetLookupOptions

        found = _compute("index_in", column, options=SetLookupOptions(self.seen))
        if found.null_count:  # names not seen before: added, then looked up again
            new = _compute("unique", _compute("filter", column, _compute("is_null", found)))
            self.seen = pa.concat_arrays([self.seen, new])
            found = _compute("index_in", column, options=SetLookupOptions(self.seen))
        return found.to_numpy()

    def code(self, name: str) -> int:
        import pyarrow as pa

        return int(self.codes(pa.array([name], pa.string()))[0])

    def sort(self, *columns: np.ndarray) -> list[str]:
        """The names in sorted order; the codes in ``columns`` renumbered to match, in place (as
        ``Reviews.from_rows`` numbers them)."""
        seen = self.seen.to_pylist()
        names = sorted(seen)
        place = np.empty(len(names), dtype=np.int64)
        place[sorted(range(len(seen)), key=seen.__getitem__)] = np.arange(len(names))
        for column in columns:
            for start in range(0, column.size, 1 << 16):  # a stretch at a time: no copy of the column
                column[start:start + (1 << 16)] = place[column[start:start + (1 << 16)]]
        return names


def _compute(name: str, *args, options=None):
    """pyarrow's compute function ``name``, called by its name. ``pyarrow.compute`` would make a Python
    function for each of its hundreds at import (0.13 s of every `arena rank --reviews`); these few are
    called straight, as those functions call them."""
    from pyarrow._compute import call_function

    return call_function(name, list(args), options)


def _filled(column, value):
    """``column`` with ``value`` for its nulls (what ``fill_null`` does)."""
    import pyarrow as pa

    return _compute("coalesce", column, pa.scalar(value, type=column.type))


def _schema(wide: bool):
    """The columns pyarrow makes: the five a line must give, and with ``wide`` the optional ones
    too. Each column costs parse time on every line, given or not: a file of the five fields alone
    (PRD's) is read a third faster without them."""
    import pyarrow as pa

    text, whole = pa.string(), pa.int64()
    optional = [("sample", whole), ("order", whole), ("repeat", whole), ("difference", pa.float64()), ("match", text)]
    return pa.schema([("question", text), ("a", text), ("b", text), ("reviewer", text), ("score", whole)]
                     + (optional if wide else []))


def _first_bad(batch) -> int | None:
    """The index of the first row of ``batch`` a column check rejects, or None."""
    column = {name: batch.column(name) for name in batch.schema.names}
    bad = np.zeros(batch.num_rows, dtype=bool)
    for name in REQUIRED:
        if column[name].null_count:
            bad |= _compute("is_null", column[name]).to_numpy(zero_copy_only=False)
    score = _filled(column["score"], 0).to_numpy()
    bad |= (score < -1) | (score > 1)
    if "sample" in column:
        bad |= _filled(column["sample"], 0).to_numpy() < 0
    if "order" in column:
        order = _filled(column["order"], 0).to_numpy()
        bad |= (order < 0) | (order > 1)
    if "difference" in column and column["difference"].null_count < batch.num_rows:
        given = _compute("is_valid", column["difference"]).to_numpy(zero_copy_only=False)
        difference = _filled(column["difference"], 0.0).to_numpy()
        with np.errstate(invalid="ignore"):
            wrong = ~np.isfinite(difference) | (np.where(np.abs(difference) < TIE, 0, np.sign(difference)) != score)
        bad |= given & wrong
    bad |= _filled(_compute("equal", column["a"], column["b"]), False).to_numpy(zero_copy_only=False)
    return int(np.argmax(bad)) if bad.any() else None


def _report_row(path: Path, row: int) -> None:
    """Raise ``ReviewLine``'s error for the ``row``-th non-blank line (from 0), as the line reader would."""
    with path.open(encoding=ENCODING) as handle:
        seen = -1
        for number, line in enumerate(handle, start=1):
            if line.strip():
                seen += 1
                if seen == row:
                    check_line(path, number, line)
                    break
    raise _Unsure  # the columns were stricter than ReviewLine here: let the line reader decide


def _bulk(path: Path, handle) -> dict:
    try:
        import pyarrow as pa
        import pyarrow.json as pj
        from pyarrow._compute import call_function  # noqa: F401  (see _compute)
    except ImportError:  # a dependency, but the line reader gives the same reviews without it
        raise _Unsure from None
    if not hasattr(pj, "open_json"):  # pyarrow before 20 reads a whole file at once only
        raise _Unsure
    if handle.seek(0, 2) == 0:
        raise ReviewError(f"{path}: no reviews in the file")
    if _needs_lines(handle):
        raise _Unsure
    # The system's allocator for the blocks and what is computed on them: it gives memory back once freed,
    # where pyarrow's own (mimalloc) held on to about 40 MB of freed blocks to the end of the read, for no
    # gain in speed here. numpy copies what it keeps of each block.
    pool = pa.default_memory_pool()
    pa.set_memory_pool(pa.system_memory_pool())
    try:
        try:
            return _blocks(path, wide=False)
        except _Wider:
            return _blocks(path, wide=True)
    finally:
        pa.set_memory_pool(pool)
        _give_back()


def _give_back() -> None:
    """Hand the memory the read freed back to the system. glibc's allocator keeps what pyarrow's reading
    threads freed in their own arenas (40 MB after a million reviews, in 1 MB blocks) until asked to trim
    them; other C libraries have no such call and need none."""
    import ctypes

    try:
        trim = ctypes.CDLL(None).malloc_trim  # the process's own symbols, the C library's among them
    except (AttributeError, OSError, TypeError):
        return
    trim(0)


class _Wider(Exception):
    """A line gives a field beside the five: read the file again with every column."""


def _needs_lines(handle) -> bool:
    """Whether the file has something only the line reader reads as ``ReviewLine`` would: a null
    for a field with a default (``EXPLICIT_NULL``), a carriage return alone (a line break for
    Python's text files, mere whitespace for pyarrow), or bytes that are not UTF-8 (pyarrow does
    not look at a field it leaves out). Read a megabyte at a time: a memory map of the file would
    count all of it in the resident memory."""
    handle.seek(0)
    tail = b""
    text = codecs.getincrementaldecoder(ENCODING)()
    while chunk := handle.read(1 << 20):
        # ASCII is UTF-8, and isascii is ten times quicker than decoding; but after a read that ended inside
        # a character (the decoder holds its start), ASCII is the error
        if not chunk.isascii() or text.getstate()[0]:
            try:
                text.decode(chunk)
            except UnicodeDecodeError:
                return True
        for part in (chunk, tail + chunk[:256]):  # the read, and where it meets the one before
            if (b"null" in part and EXPLICIT_NULL.search(part)) or (b"\r" in part and LONE_CR.search(part)):
                return True
        tail = chunk[-256:]
    try:
        text.decode(b"", final=True)
    except UnicodeDecodeError:  # the file ends inside a character
        return True
    return False


def _blocks(path: Path, wide: bool) -> dict:
    """Each block checked, then its codes and values written into columns made once for the whole
    file: long enough for its most possible lines (the shortest valid line is 49 bytes), whose
    pages the system only gives as rows are written; no block's copy is kept to be joined later."""
    import pyarrow as pa
    import pyarrow.json as pj

    # narrow, any other field is an error, and the file is read again wide (extra fields left out): a
    # file that gives more fields mostly gives them on its first lines, so little is read twice
    options = pj.ParseOptions(explicit_schema=_schema(wide), unexpected_field_behavior="ignore" if wide else "error")
    names = {"a": _Names(), "question": _Names(), "reviewer": _Names(), "match": _Names()}
    names["b"] = names["a"]  # one list of contestants, whichever side they were shown on
    room = path.stat().st_size // SHORTEST_LINE + 1
    columns = {name: np.empty(room, dtype=np.int64) for name in ("question", "a", "b", "reviewer")}
    columns["score"] = np.empty(room, dtype=np.int8)
    rows = 0
    try:
        reader = pj.open_json(path, read_options=pj.ReadOptions(block_size=BLOCK_BYTES),
                              parse_options=options)
        for batch in reader:
            bad = _first_bad(batch)
            if bad is not None:
                _report_row(path, rows + bad)
            end = rows + batch.num_rows
            if end > room:  # cannot happen with valid lines; but never write past the columns
                raise _Unsure
            for name in ("question", "a", "b", "reviewer"):
                columns[name][rows:end] = names[name].codes(batch.column(name))
            columns["score"][rows:end] = batch.column("score").to_numpy()
            for name, (fill, dtype) in STRUCTURE.items():
                column = batch.column(name) if wide else None
                if (column is None or column.null_count == batch.num_rows) and name not in columns:
                    continue  # no line so far gave it: every row so far has its default, made at the end
                if name not in columns:
                    columns[name] = np.empty(room, dtype=dtype)
                    columns[name][:rows] = fill if name != "match" else names["match"].code("")
                values = names["match"].codes(_filled(column, "")) if name == "match" else _filled(column, fill).to_numpy(zero_copy_only=False)
                columns[name][rows:end] = values
            rows = end
    except pa.ArrowInvalid as exc:
        if not wide and "unexpected field" in str(exc):
            raise _Wider from None
        raise _Unsure from None
    if not rows:
        raise ReviewError(f"{path}: no reviews in the file")
    kept = {name: column[:rows] for name, column in columns.items()}
    contestants = names["a"].sort(kept["a"], kept["b"])
    questions, reviewers = names["question"].sort(kept["question"]), names["reviewer"].sort(kept["reviewer"])
    if "match" in kept:
        matches = names["match"].sort(kept["match"])
    else:
        matches = [""]
        kept["match"] = np.broadcast_to(np.zeros(1, dtype=np.int64), rows)
    for name, (fill, dtype) in STRUCTURE.items():
        if name not in kept:  # a field no line gives is one value on every row: a view of it, no memory per row
            kept[name] = np.broadcast_to(np.array(fill, dtype), rows)
    return dict(kept, questions=questions, contestants=contestants, reviewers=reviewers, matches=matches)
