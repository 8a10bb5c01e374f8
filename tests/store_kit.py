"""Shared by the store tests: a tiny scenario, the CLI called in this process, damaged files, and a
way to run the CLI in a child process whose kernel permission checks hold even for root."""

from __future__ import annotations

import ctypes
import json
import os
import random
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import yaml

from arena.cli.commands import main

TINY = {
    "name": "tiny",
    "seed": 3,
    "agents": {"give": {"backend": "scripted", "strategy": "always_all"},
               "keep": {"backend": "scripted", "strategy": "free_rider"}},
    "games": [{"game": "public_goods", "params": {"rounds": 2}}],
    "tournament": {"repeats": 2},
}


def write_scenario(folder: Path, raw: dict | None = None, name: str = "s.yaml") -> Path:
    path = folder / name
    path.write_text(yaml.safe_dump(raw or TINY), encoding="utf-8")
    return path


def cli(capsys, *args) -> tuple[int, str, str]:
    """`arena ARGS` in this process: (exit status, stdout, stderr)."""
    capsys.readouterr()
    width = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = "250"  # wide tables: no cell folded over two lines
    try:
        code = main([str(a) for a in args])
    finally:
        if width is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = width
    out, err = capsys.readouterr()
    return code, out, err


def one_line(text: str) -> str:
    return " ".join(text.split())


# -- damaged stores -------------------------------------------------------------------------------
def _truncated(data: bytes) -> bytes:
    return data[: (len(data) // 2) // 4096 * 4096]  # cut at a page boundary, as an interrupted copy is


def _garbage_header(data: bytes) -> bytes:
    return b"PK\x03\x04 this is a zip file now " + data[30:]


def _random_bytes(data: bytes) -> bytes:
    return random.Random(7).randbytes(len(data))


def _all_garbage(data: bytes) -> bytes:
    return b"not a database at all\n" * (len(data) // 22)


def _bad_pages(data: bytes) -> bytes:
    """Header and schema intact, every other page overwritten: only reading the tables finds it."""
    return data[:4096] + b"\xff" * (len(data) - 4096)


DAMAGE = {"truncated": _truncated, "garbage header": _garbage_header, "random bytes": _random_bytes,
          "all garbage": _all_garbage, "bad pages": _bad_pages}


def damage(store_file: Path, kind: str) -> bytes:
    damaged = DAMAGE[kind](store_file.read_bytes())
    store_file.write_bytes(damaged)
    return damaged


def snapshot(folder: Path) -> dict[str, tuple[bytes, int]]:
    """Every file in a folder: its bytes and its modification time in nanoseconds."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in sorted(folder.iterdir()) if p.is_file()}


def journal_mode(store_file: Path) -> str:
    """What the file's header says, read without SQLite (bytes 18 and 19 are 2 in WAL mode)."""
    header = store_file.read_bytes()[:20]
    return "wal" if header[18] == 2 else "rollback"


# -- a child process whose file permissions hold ---------------------------------------------------
CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, PR_CAPBSET_DROP = 1, 2, 24


def _drop_override() -> None:
    """Run in the child before it starts Python: drop the capabilities that let root ignore file modes,
    so a folder made read-only is read-only for it too (a program exec'd as root gets its bounding set)."""
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


CHILD = """
import contextlib, io, json, sys
from arena.cli.commands import main
results = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except BaseException as exc:
            import traceback
            traceback.print_exc()
            code = "raised " + type(exc).__name__
    results.append([code, out.getvalue(), err.getvalue()])
print(json.dumps(results))
"""


def as_unprivileged(commands: list[list[str]], cwd: Path, env: dict | None = None, limit_file_size: int | None = None):
    """Run each `arena` command line in one child process that file permissions bind (root's override
    dropped); with ``limit_file_size``, no file it writes may grow past that many bytes (RLIMIT_FSIZE, as a
    full disk would stop it). Returns [(exit status, stdout, stderr)] and whether permissions bind."""
    import resource
    import signal

    def setup():
        if os.geteuid() == 0:
            _drop_override()
        if limit_file_size is not None:
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the limit fails with EFBIG instead
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit_file_size, limit_file_size))

    result = subprocess.run([sys.executable, "-c", CHILD, json.dumps([[str(a) for a in c] for c in commands])],
                            cwd=cwd, env={**os.environ, "COLUMNS": "200", **(env or {})}, preexec_fn=setup,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    return [tuple(r) for r in json.loads(result.stdout.splitlines()[-1])]


def permissions_bind(folder: Path) -> bool:
    """Whether a child made by ``as_unprivileged`` is refused a write into ``folder``."""
    probe = folder / ".probe"
    code = ("import sys\ntry:\n    open(sys.argv[1], 'w').close()\nexcept PermissionError:\n    sys.exit(3)\n")
    result = subprocess.run([sys.executable, "-c", code, str(probe)],
                            preexec_fn=_drop_override if os.geteuid() == 0 else None)
    if probe.exists():
        probe.unlink()
    return result.returncode == 3


def make_read_only(folder: Path) -> None:
    for path in [*folder.rglob("*"), folder]:
        path.chmod(0o555 if path.is_dir() else 0o444)


def make_writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        path.chmod(0o755 if path.is_dir() else 0o644)


def copy_run(source: Path, target: Path) -> Path:
    return Path(shutil.copytree(source, target))


def stored_notes(run_dir: Path) -> list[str]:
    db = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        return [text for (text,) in db.execute("SELECT text FROM notes ORDER BY id")]
    finally:
        db.close()



def as_format7(store_file: Path) -> None:
    """Lay a store of today's format out as format 7 did: matches, messages, events, outcomes and metrics
    in tables of their own, each row holding its texts (the rows as the views give them, under the same
    row ids)."""
    from arena.contract.runs.schema import OLD_TABLES

    db = sqlite3.connect(store_file, isolation_level=None)
    try:
        rows = {name: db.execute(f"SELECT * FROM {name}").fetchall()  # the views give the row id first
                for name in ("matches", "messages", "events", "outcomes", "metrics")}
        db.executescript("BEGIN; DROP VIEW matches; DROP VIEW messages; DROP VIEW events; DROP VIEW outcomes; "
                         "DROP VIEW metrics; DROP TABLE match_rows; DROP TABLE posted; DROP TABLE happened; "
                         "DROP TABLE seat_outcomes; DROP TABLE seat_metrics; DROP TABLE texts; DROP TABLE match_ids; "
                         f"{OLD_TABLES} CREATE INDEX matches_status ON matches (status);")
        for name, found in rows.items():
            if found:
                columns = ", ".join(c[0] for c in db.execute(f"SELECT * FROM {name}").description)
                db.executemany(f"INSERT INTO {name} (rowid, {columns}) VALUES ({', '.join('?' * len(found[0]))})", found)
        db.execute("PRAGMA user_version = 7")
        db.execute("COMMIT")
    finally:
        db.close()


# Format 8 as it was laid out: texts and match keys numbered, a message's sender and kind, an event's type
# and outcomes and metrics as plain text, an event's rest in one text (arena.store.texts before format 9)
_FORMAT8 = """
CREATE TABLE texts (id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, text TEXT NOT NULL);
CREATE TABLE match_ids (id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE);
CREATE TABLE posted (
    match INTEGER NOT NULL, seq INTEGER NOT NULL, idx INTEGER NOT NULL, round INTEGER NOT NULL,
    sender TEXT NOT NULL, recipients INTEGER NOT NULL, kind TEXT NOT NULL, content INTEGER NOT NULL, data INTEGER,
    shown TEXT, PRIMARY KEY (match, seq)
);
CREATE TABLE happened (
    match INTEGER NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, body INTEGER NOT NULL, at REAL,
    PRIMARY KEY (match, seq)
);
INSERT INTO match_ids (key) SELECT match_key FROM messages UNION SELECT match_key FROM events;
INSERT OR IGNORE INTO texts (hash, text) SELECT text_hash(content), content FROM messages;
INSERT OR IGNORE INTO texts (hash, text) SELECT text_hash(recipients), recipients FROM messages;
INSERT OR IGNORE INTO texts (hash, text) SELECT text_hash(data), data FROM messages WHERE data IS NOT NULL;
INSERT OR IGNORE INTO texts (hash, text)
    SELECT text_hash(rest), rest FROM (SELECT event_rest(match_key, type, body) AS rest FROM events);
INSERT INTO posted (rowid, match, seq, idx, round, sender, recipients, kind, content, data, shown)
    SELECT m.rowid, k.id, m.seq, m.idx, m.round, m.sender,
           (SELECT id FROM texts WHERE hash = text_hash(m.recipients)), m.kind,
           (SELECT id FROM texts WHERE hash = text_hash(m.content)),
           CASE WHEN m.data IS NOT NULL THEN (SELECT id FROM texts WHERE hash = text_hash(m.data)) END, m.shown
    FROM messages m JOIN match_ids k ON k.key = m.match_key ORDER BY m.rowid;
INSERT INTO happened (rowid, match, seq, type, body, at)
    SELECT e.rowid, k.id, e.seq, e.type,
           (SELECT id FROM texts WHERE hash = text_hash(event_rest(e.match_key, e.type, e.body))), e.at
    FROM events e JOIN match_ids k ON k.key = e.match_key ORDER BY e.rowid;
DROP TABLE messages;
DROP TABLE events;
CREATE VIEW messages AS
    SELECT p.rowid AS rowid, k.key AS match_key, p.seq AS seq, p.idx AS idx, p.round AS round, p.sender AS sender,
           r.text AS recipients, p.kind AS kind, c.text AS content, d.text AS data, p.shown AS shown
    FROM posted p JOIN match_ids k ON k.id = p.match JOIN texts r ON r.id = p.recipients
    JOIN texts c ON c.id = p.content LEFT JOIN texts d ON d.id = p.data;
CREATE VIEW events AS
    SELECT h.rowid AS rowid, k.key AS match_key, h.seq AS seq, h.type AS type,
           CASE WHEN substr(b.text, 1, 1) = '{' THEN b.text
                ELSE '{"match":"' || k.key || '","type":"' || h.type || '"' || b.text END AS body, h.at AS at
    FROM happened h JOIN match_ids k ON k.id = h.match JOIN texts b ON b.id = h.body;
PRAGMA user_version = 8;
"""


def as_format8(store_file: Path) -> None:
    """Lay a store of today's format out as format 8 did (by way of format 7's tables)."""
    from arena.store.texts import event_rest, text_hash

    as_format7(store_file)
    db = sqlite3.connect(store_file, isolation_level=None)
    try:
        db.create_function("text_hash", 1, text_hash)
        db.create_function("event_rest", 3, event_rest)
        db.executescript(f"BEGIN; {_FORMAT8} COMMIT;")
    finally:
        db.close()
