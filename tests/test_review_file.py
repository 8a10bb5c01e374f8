"""Reviews files read in bulk (arena/rank/review_file.py): the same reviews, and the same errors naming
the file, line and field, as reading every line with ReviewLine; and the compiled Elo kept on disk."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from arena.rank import leaderboard, review_file
from arena.rank.review_line import check_line
from arena.rank.reviews import ReviewError, Reviews

COLUMNS = ("question", "a", "b", "reviewer", "score", "sample", "order", "repeat", "difference", "match")
NAMES = ("questions", "contestants", "reviewers", "matches")


def line_by_line(path) -> Reviews:
    """What `arena rank` read before: every line validated by ReviewLine."""
    rows = []
    with open(path, encoding="utf-8") as handle:
        for number, line in enumerate(handle, start=1):
            if line.strip():
                rows.append(check_line(path, number, line))
    if not rows:
        raise ReviewError(f"{path}: no reviews in the file")
    return Reviews.from_rows(rows)


def assert_same(found: Reviews, expected: Reviews):
    for name in NAMES:
        assert getattr(found, name) == getattr(expected, name), name
    for name in COLUMNS:
        x, y = getattr(found, name), getattr(expected, name)
        assert x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y, equal_nan=True), name


@pytest.fixture
def bulk_only(monkeypatch):
    """The bulk reader must settle the file by itself: reading it line by line fails the test."""
    def refuse(path):
        raise AssertionError(f"{path} was read line by line")

    monkeypatch.setattr(review_file, "by_line", refuse)


def synthetic(n: int, seed: int, structure: bool) -> list[dict]:
    rng = np.random.default_rng(seed)
    lines = []
    for i in range(n):
        a, b = rng.choice(7, 2, replace=False)
        score = int(rng.integers(-1, 2))
        line = {"question": f"q{rng.integers(40)}", "a": f"m{a}", "b": f"m{b}", "reviewer": f"r{rng.integers(4)}",
                "score": score}
        if structure:  # each field on some lines only, as write_jsonl leaves out defaults
            if rng.random() < 0.5:
                line["sample"] = int(rng.integers(3))
            if rng.random() < 0.5:
                line["order"] = 1
            if rng.random() < 0.3:
                line["repeat"] = int(rng.integers(1, 4))
            if rng.random() < 0.5:
                line["difference"] = score * float(rng.integers(1, 9)) / 2
            if rng.random() < 0.4:
                line["match"] = f"pairwise#{rng.integers(3)}"
        if rng.random() < 0.2:
            line["comment"] = ["an extra field", {"of": "any shape"}] if i % 2 else 3.5
        lines.append(line)
    return lines


def write(path, lines: list, blank_every: int = 0) -> None:
    with open(path, "w", encoding="utf-8") as out:
        for i, line in enumerate(lines, start=1):
            out.write((line if isinstance(line, str) else json.dumps(line)) + "\n")
            if blank_every and i % blank_every == 0:
                out.write("  \n")


@pytest.mark.parametrize("structure", [False, True])
def test_a_large_file_gives_the_reviews_and_the_leaderboard_of_the_line_reader(tmp_path, bulk_only, monkeypatch, structure):
    monkeypatch.setattr(review_file, "BLOCK_BYTES", 1 << 16)  # many blocks, so codes are joined across them
    path = tmp_path / "reviews.jsonl"
    write(path, synthetic(20_000, seed=3, structure=structure), blank_every=997)
    found, expected = Reviews.read_jsonl(path), line_by_line(path)
    assert len(found) == 20_000
    assert_same(found, expected)
    options = dict(methods=("winrate", "elo", "bt"), orderings=20, bootstrap=5)
    assert leaderboard(found, **options).model_dump() == leaderboard(expected, **options).model_dump()


def test_extra_fields_are_allowed_and_change_nothing(tmp_path, bulk_only):
    plain = [{"question": "q1", "a": "x", "b": "y", "reviewer": "j", "score": s} for s in (-1, 0, 1)]
    extra = [dict(line, length_a=120, markdown={"headers": 2}, note="kept out") for line in plain]
    write(tmp_path / "plain.jsonl", plain)
    write(tmp_path / "extra.jsonl", extra)
    assert_same(Reviews.read_jsonl(tmp_path / "extra.jsonl"), Reviews.read_jsonl(tmp_path / "plain.jsonl"))
    assert list(Reviews.read_jsonl(tmp_path / "extra.jsonl").rows())[0].battle == ("q1", "x", "y", "j", -1)


@pytest.mark.parametrize("text", ["", "\n\n  \n"])
def test_an_empty_file_says_so(tmp_path, text):
    path = tmp_path / "reviews.jsonl"
    path.write_text(text)
    with pytest.raises(ReviewError, match=f"{path}: no reviews in the file"):
        Reviews.read_jsonl(path)


GOOD = '{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0}'
BAD = {  # a bad line, and what the error says after "FILE, line N: "
    "bad JSON": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0', "Invalid JSON"),
    "missing field": ('{"question": "q", "a": "A", "reviewer": "r", "score": 0}', "b: Field required"),
    "null name": ('{"question": "q", "a": "A", "b": null, "reviewer": "r", "score": 0}', "b: Input should be a valid string"),
    "wrong type": ('{"question": ["q"], "a": "A", "b": "B", "reviewer": "r", "score": 0}', "question: Input should be a valid string"),
    "score a word": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": "high"}', "score: Input should be a valid integer"),
    "score out of range": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 2}', "score: score must be -1 (A better), 0 (tie) or 1"),
    "negative sample": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0, "sample": -1}', "sample: Input should be greater than or equal to 0"),
    "order 2": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0, "order": 2}', "order: Input should be less than or equal to 1"),
    "order null": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0, "order": null}', "order: Input should be a valid integer"),
    "difference of the other sign": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 1, "difference": -2}', "score 1 is not the sign of difference -2"),
    "difference too big": ('{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 1, "difference": 1e400}', "difference: Input should be a finite number"),
    "a carriage return": ('{"question": "q",\r "a": "A", "b": "B", "reviewer": "r", "score": 0}', "Invalid JSON"),
    "itself": ('{"question": "q", "a": "A", "b": "A", "reviewer": "r", "score": 0}', "a contestant cannot battle itself ('A')"),
}


@pytest.mark.parametrize("case", list(BAD))
@pytest.mark.parametrize("where", [3, 2_500])
def test_a_bad_line_is_named_by_file_line_and_field(tmp_path, monkeypatch, case, where):
    monkeypatch.setattr(review_file, "BLOCK_BYTES", 1 << 14)  # deep lines sit in a later block
    bad, says = BAD[case]
    lines = [GOOD] * 3_000
    lines[where - 1] = bad
    lines[where + 5] = BAD["score out of range"][0]  # a later bad line is not the one reported
    path = tmp_path / "reviews.jsonl"
    path.write_text("\n".join(lines[:10]) + "\n\n" + "\n".join(lines[10:]) + "\n")  # a blank line after line 10
    line = where + (where > 10)
    with pytest.raises(ReviewError) as error:
        Reviews.read_jsonl(path)
    assert str(error.value).startswith(f"{path}, line {line}: {says}")
    with pytest.raises(ReviewError) as before:
        line_by_line(path)
    assert str(error.value) == str(before.value)


def test_the_command_names_the_bad_line(tmp_path, run_cli):
    path = tmp_path / "reviews.jsonl"
    path.write_text(GOOD + "\n" + BAD["score out of range"][0] + "\n")
    result = run_cli("rank", "--reviews", path, "--method", "elo", "--bootstrap", "0")
    assert result.returncode == 2 and result.stdout == ""
    assert f"{path}, line 2: score: score must be -1 (A better), 0 (tie) or 1 (B better)" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_byte_order_mark_is_read_past_and_bytes_that_are_not_text_are_named(tmp_path):
    path = tmp_path / "reviews.jsonl"
    path.write_bytes(b"\xef\xbb\xbf" + f"{GOOD}\n{GOOD}\n".encode())
    assert len(Reviews.read_jsonl(path)) == 2  # as the spreadsheet that saved it meant
    path.write_bytes(f"{GOOD}\n".encode() + GOOD.replace('"q"', '"q\xff"').encode("latin-1") + b"\n")
    with pytest.raises(ReviewError, match=f"{path}, line 2: not UTF-8 text"):
        Reviews.read_jsonl(path)
    path.write_bytes(f"{GOOD}\n".encode() + GOOD.replace("}", ', "note": "\xff"}').encode("latin-1") + b"\n")
    with pytest.raises(ReviewError, match=f"{path}, line 2: not UTF-8 text"):  # in a field nobody reads, too
        Reviews.read_jsonl(path)


def test_text_is_checked_across_the_megabytes_the_scan_reads(tmp_path, bulk_only, monkeypatch):
    """The scan for what only the line reader reads decodes a megabyte only when it is not ASCII, or when
    the one before ended inside a character: a character cut by the megabyte's end is still text, and a
    bad byte after megabytes of ASCII is still named."""
    path = tmp_path / "reviews.jsonl"
    plain = (GOOD + "\n").encode()
    lines = (1 << 20) // len(plain) + 1
    head = plain * (lines - 1)
    cut = GOOD.replace('"q"', '"q-\u00e9"').encode()  # é is two bytes: put the first as the megabyte's last
    pad = (1 << 20) - len(head) - cut.index("\u00e9".encode()) - 1
    head += b" " * pad  # whitespace before a line's JSON: the same review
    path.write_bytes(head + cut + b"\n" + plain)
    found = Reviews.read_jsonl(path)
    assert len(found) == lines + 1 and "q-\u00e9" in found.questions
    assert_same(found, line_by_line(path))
    monkeypatch.undo()  # bytes that are not text are named by the line reader
    path.write_bytes(head + plain + GOOD.replace('"q"', '"q\xff"').encode("latin-1") + b"\n")
    with pytest.raises(ReviewError, match=f"{path}, line {lines + 1}: not UTF-8 text"):
        Reviews.read_jsonl(path)


ODD = [  # lines ReviewLine takes though the columns' fixed types do not: the line reader settles them
    '{"question": 7, "a": "A", "b": "B", "reviewer": "r", "score": 1}',
    '{"question": "q", "a": 12, "b": "B", "reviewer": 3, "score": 1.0}',
    '{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": true, "match": 5}',
    '{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": -1, "difference": -3, "repeat": "2"}',
    '{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0, "sample": null, "difference": null}',
    # not odd for the columns, but a field named through an escape must not be taken for one the file lacks
    '{"question": "q", "a": "A", "b": "B", "reviewer": "r", "score": 0, "ord\\u0065r": 1, "s\\u0061mple": 2}',
]


@pytest.mark.parametrize("odd", ODD)
def test_lines_the_columns_cannot_type_read_as_the_line_reader_reads_them(tmp_path, odd):
    path = tmp_path / "reviews.jsonl"
    path.write_text(f"{GOOD}\n{odd}\n{GOOD.replace('0}', '1}')}\n")
    assert_same(Reviews.read_jsonl(path), line_by_line(path))


# -- the compiled Elo, kept on disk -------------------------------------------------------------------
LOAD_KERNELS = textwrap.dedent("""
    import json
    import numpy as np
    from arena.rank import elo_loop
    from arena.rank.reviews import Reviews
    rows = [("q%d" % (i % 7), "m%d" % (i % 5), "m%d" % ((i + 1 + i // 5) % 5), "r%d" % (i % 3), i % 3 - 1)
            for i in range(60)]
    reviews = Reviews.from_rows(rows)
    draws = np.random.default_rng(0).random((2, len(reviews)))
    order = elo_loop.shuffled(np.arange(len(reviews)), draws, compiled=True)
    weights, nobody = np.ones(len(reviews.reviewers)), np.full(len(reviews.reviewers), -1)
    elo_loop.replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order, weights, nobody,
                    len(reviews.contestants), compiled=True)
    slots = np.full(len(reviews) + 1, -1)
    slots[-1] = 0
    elo_loop.checkpoint_sums(reviews.a, reviews.b, reviews.score, order, slots, 1, len(reviews.contestants),
                             compiled=True)
    from arena.rank import elo_compiled
    kernels = [elo_compiled.shuffle, elo_compiled.replay, elo_compiled.checkpoint_sums]
    print(json.dumps({"hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
                      "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels)}))
""")


def test_a_second_process_loads_the_compiled_elo_from_disk(tmp_path):
    pytest.importorskip("numba")
    env = dict(os.environ, NUMBA_CACHE_DIR=str(tmp_path / "cache"))
    run = lambda: json.loads(subprocess.run([sys.executable, "-c", LOAD_KERNELS], env=env, capture_output=True,
                                            text=True, check=True).stdout)
    first = run()
    assert first["misses"] == 3 and first["hits"] == 0  # an empty cache: each kernel compiled once
    written = {index.name.split("-")[0] for index in (tmp_path / "cache").rglob("*.nbi")}
    assert written >= {f"elo_compiled.{name}" for name in ("shuffle", "replay", "checkpoint_sums")}  # and kept
    second = run()
    assert second == {"hits": 3, "misses": 0}  # a new process compiles nothing


def test_the_compiled_elo_finds_somewhere_to_keep_its_code(monkeypatch, tmp_path):
    pytest.importorskip("numba")
    from numba.core import config

    from arena.rank import elo_compiled

    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setattr(elo_compiled.tempfile, "tempdir", str(tmp_path))  # the system's temporary folder, here
    writable = set()
    monkeypatch.setattr(elo_compiled, "_writable", lambda folder: folder.parent == tmp_path and tmp_path in writable)
    assert elo_compiled._cache() is False and config.CACHE_DIR == ""  # nowhere: compiled in each process, no failure
    writable.add(tmp_path)  # the install and the home folder read-only, the temporary folder not
    assert elo_compiled._cache() is True
    assert config.CACHE_DIR == str(tmp_path / f"arena-numba-{os.getuid()}")
    monkeypatch.setattr(config, "CACHE_DIR", "")
    monkeypatch.setattr(elo_compiled, "_writable", lambda folder: folder.name == "__pycache__")
    assert elo_compiled._cache() is True and config.CACHE_DIR == ""  # beside the code: numba finds it itself


def test_the_command_ranks_a_large_file_as_the_line_reader_does(tmp_path, run_cli):
    # 20,000 reviews with the default 1,000 orderings: the compiled Elo plays them
    path = tmp_path / "reviews.jsonl"
    write(path, synthetic(20_000, seed=5, structure=True))
    result = run_cli("rank", "--reviews", path, "--json", "--bootstrap", "3", timeout=600)
    assert result.returncode == 0, result.stderr
    expected = leaderboard(line_by_line(path), bootstrap=3)
    assert json.loads(result.stdout) == json.loads(expected.model_dump_json())
