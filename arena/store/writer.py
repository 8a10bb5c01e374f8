"""The run store: one SQLite file per run directory, written as the run goes.

Messages and events are buffered as they happen and written when the store
commits: at a round's close once COMMIT_EVERY has passed, and when a match ends
(in a run, once for all the matches that end together: ``arena.store.commits``),
so another process can follow a run; a match's outcome is written in one
transaction with its last rows, so a crash loses at most the matches in flight.
Unfinished matches (left by a crash, or interrupted by a backend that was down)
are wiped and played again on resume.

Every write is whole under trio: a Ctrl-C that arrives in the middle of one is raised at the run's
next checkpoint, once the write is over (trio's KeyboardInterrupt protection). Raised half way, it
could leave rows written but still buffered, and the interrupted run's last flush would write them
twice.
"""

from __future__ import annotations

import json
import os
import re
import socket
import sqlite3
import stat
import time
from collections.abc import Iterator, Sequence
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter
from trio.lowlevel import enable_ki_protection as _whole

from arena import __version__
from arena.contract.events import Event, MessagePosted, SeatInfo
from arena.contract.calls import CallRecord, CallStarted
from arena.contract.capabilities import Review
from arena.contract.files import Found, examine, leftovers, replacing, set_aside, sqlite_damaged
from arena.contract.messages import REFEREE, Message
from arena.contract.records import KEPT, KEY_SCHEME, EventLog, KeyScheme, MatchRecord, MatchSpec
from arena.contract.summaries import FinalNotice
from arena.store.errors import DamagedStore, NoRunYet, NotAFolder, NotPermitted, OtherFormat, StoreError
from arena.store.lock import RunLock
from arena.store.rows import EventRow, MatchRow, MessageRow, ScoreRow, StoredTranscript, Transcript, TurnRow

STORE_FILE = "run.sqlite"
SCHEMA_VERSION = 6  # bump when the tables change; older stores are upgraded when they can be, else refused
UPGRADABLE = {2, 3, 4, 5}  # versions whose tables are a subset of these: opening one adds what is missing
# columns added since format 2, added to older stores; a review's structure (format 5) is NULL in
# reviews stored before it, which peer rank reads as battles of their own, as it did then; the run's
# key scheme (format 6) is NULL in runs begun before it, whose keys name agents ("agents")
ADDED_COLUMNS = {"messages": {"shown": "TEXT"},
                 "reviews": {"sample": "INTEGER", "shown_order": "INTEGER", "difference": "REAL"},
                 "run": {"key_scheme": "TEXT"}}
OLD_KEY_SCHEME: KeyScheme = "agents"  # what a run whose key_scheme is NULL has
SCENARIO_FILE = "scenario.yaml"

_events = TypeAdapter(Event)

SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    name TEXT NOT NULL, scenario TEXT NOT NULL, fingerprint TEXT NOT NULL, arena_version TEXT,
    created REAL, updated REAL, status TEXT NOT NULL, planned INTEGER NOT NULL DEFAULT 0,
    pid INTEGER, host TEXT, key_scheme TEXT
);
CREATE TABLE IF NOT EXISTS matches (
    key TEXT PRIMARY KEY, position INTEGER NOT NULL, grp TEXT NOT NULL, repeat INTEGER NOT NULL, game TEXT NOT NULL,
    spec TEXT NOT NULL, status TEXT NOT NULL, seats TEXT, params TEXT, rounds INTEGER,
    error TEXT, started REAL, ended REAL
);
CREATE TABLE IF NOT EXISTS messages (
    match_key TEXT NOT NULL, seq INTEGER NOT NULL, idx INTEGER NOT NULL, round INTEGER NOT NULL,
    sender TEXT NOT NULL, recipients TEXT NOT NULL, kind TEXT NOT NULL, content TEXT NOT NULL, data TEXT,
    shown TEXT, PRIMARY KEY (match_key, seq)
);
CREATE TABLE IF NOT EXISTS events (
    match_key TEXT NOT NULL, seq INTEGER NOT NULL, type TEXT NOT NULL, body TEXT NOT NULL, at REAL,
    PRIMARY KEY (match_key, seq)
);
CREATE TABLE IF NOT EXISTS outcomes (
    match_key TEXT NOT NULL, seat TEXT NOT NULL, agent TEXT NOT NULL, role TEXT NOT NULL, payoff REAL NOT NULL,
    PRIMARY KEY (match_key, seat)
);
CREATE TABLE IF NOT EXISTS metrics (
    match_key TEXT NOT NULL, metric TEXT NOT NULL, seat TEXT NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (match_key, metric, seat)
);
CREATE TABLE IF NOT EXISTS reviews (
    match_key TEXT NOT NULL, seq INTEGER NOT NULL, question TEXT NOT NULL, a TEXT NOT NULL, b TEXT NOT NULL,
    reviewer TEXT NOT NULL, score INTEGER NOT NULL, sample INTEGER, shown_order INTEGER, difference REAL,
    PRIMARY KEY (match_key, seq)
);
CREATE TABLE IF NOT EXISTS calls (
    id INTEGER PRIMARY KEY AUTOINCREMENT, match_key TEXT, seat TEXT, round INTEGER, attempt INTEGER,
    agent TEXT, backend TEXT, model TEXT, prompt_tokens INTEGER, completion_tokens INTEGER,
    cost REAL, latency REAL, cached INTEGER, retries INTEGER, error TEXT, at REAL
);
CREATE TABLE IF NOT EXISTS calls_in_flight (
    token TEXT PRIMARY KEY, match_key TEXT, seat TEXT, round INTEGER, attempt INTEGER, agent TEXT, backend TEXT,
    model TEXT, started REAL
);
CREATE TABLE IF NOT EXISTS notes (
    id INTEGER PRIMARY KEY AUTOINCREMENT, agent TEXT, endpoint TEXT, topic TEXT NOT NULL, text TEXT NOT NULL, at REAL
);
CREATE TABLE IF NOT EXISTS stability (
    grp TEXT NOT NULL, repeats INTEGER NOT NULL, tau REAL, max_width REAL, stable INTEGER, done INTEGER,
    PRIMARY KEY (grp, repeats)
);
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, overrides TEXT NOT NULL, match_limit INTEGER
);
CREATE INDEX IF NOT EXISTS matches_status ON matches (status);
"""


_REVIEW_COLUMNS = "match_key, seq, question, a, b, reviewer, score, sample, shown_order, difference"
# What the rows waiting for a commit are written with, in this order: a match's row before what
# updates it. "matches" maps a key to (spec, position), which `RunStore.spec` reads before it is
# written; "starts" maps a key to its row, so that a match ending before the write drops it and
# says when it started in its last row.
_WRITES = {
    "matches": "INSERT INTO matches (key, position, grp, repeat, game, spec, status) VALUES (?, ?, ?, ?, ?, ?, 'pending') "
               "ON CONFLICT (key) DO UPDATE SET status = 'pending', seats = NULL, rounds = NULL, error = NULL, "
               "started = NULL, ended = NULL",
    "starts": "UPDATE matches SET status = 'running', started = ?, seats = ? WHERE key = ?",
    "messages": "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "events": "INSERT INTO events VALUES (?, ?, ?, ?, ?)",
    "outcomes": "INSERT INTO outcomes VALUES (?, ?, ?, ?, ?)",
    "metrics": "INSERT INTO metrics VALUES (?, ?, ?, ?)",
    "reviews": f"INSERT INTO reviews ({_REVIEW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ends": "UPDATE matches SET status = ?, rounds = ?, error = ?, params = ?, ended = ?, seats = ?, "
            "started = coalesce(?, started) WHERE key = ?",
}
_KEYED = ("matches", "starts")


def _sqlite_reason(exc: sqlite3.Error) -> str:
    return f"SQLite says: {exc}"


# What SQLite answers when the operating system refuses it a file: a matter of permissions, never damage.
_REFUSED = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")


def sqlite_refused(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorname", "") or "").startswith(_REFUSED)


def _file_part(path: Path) -> Path:
    """The first part of ``path`` that is a file, for a path that goes through one."""
    for part in reversed((path, *path.parents)):
        if part.is_file():
            return part
    return path


def check_folder(run_dir: Path) -> None:
    """A run directory that is a file (the scenario, most often), or one this user may not enter, is said
    in a sentence before anything looks inside it; one that does not exist is left to the caller."""
    try:
        mode = run_dir.stat().st_mode
        if stat.S_ISDIR(mode):
            (run_dir / STORE_FILE).stat()  # may this user look inside?
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise NotAFolder(_file_part(run_dir)) from None
    except PermissionError:
        raise NotPermitted(run_dir, "enter") from None
    if not stat.S_ISDIR(mode):
        raise NotAFolder(run_dir)


def _examine(path: Path) -> Found:
    """``examine``, with a store this user may not read said as such (never as damaged)."""
    try:
        return examine(path)
    except PermissionError:
        raise NotPermitted(path, "read") from None


def _connect(path: Path) -> sqlite3.Connection:
    """The writer's connection: WAL, so readers can follow a run as it is written; older formats upgraded."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable at checkpoints, never corrupt
        db.execute("PRAGMA busy_timeout=30000")
        version = db.execute("PRAGMA user_version").fetchone()[0]
        has_tables = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if has_tables and version in UPGRADABLE:
            alter = ""
            for table, columns in ADDED_COLUMNS.items():
                present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}  # none: SCHEMA creates it whole
                alter += "".join(f"ALTER TABLE {table} ADD COLUMN {c} {kind}; " for c, kind in columns.items()
                                 if present and c not in present)
            db.executescript(f"BEGIN; {SCHEMA} {alter} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            version = SCHEMA_VERSION
    except sqlite3.DatabaseError as exc:
        db.close()
        if sqlite_damaged(exc):
            raise DamagedStore(path, _sqlite_reason(exc)) from None
        raise
    if has_tables and version != SCHEMA_VERSION:
        db.close()
        raise OtherFormat(path, version, SCHEMA_VERSION)
    return db


def _connect_readonly(path: Path) -> sqlite3.Connection:
    """A reader's connection: SQLite's read-only mode, no switch of journal mode, no upgrade, so that
    reading works in a folder nobody may write to and beside a run being written, and changes nothing.
    An older format is read through temporary tables and views that make it look current."""
    uri = path.absolute().as_uri()
    try:
        db = _probe(f"{uri}?mode=ro")
    except sqlite3.OperationalError:
        if path.with_name(path.name + "-wal").exists():
            raise
        # a WAL store with no log beside it, in a folder this process cannot write to: SQLite would create
        # the log's index even to read. Without a log the file alone is the whole store, and no writer can
        # be at work in such a folder; so it is read as a file that does not change.
        db = _probe(f"{uri}?mode=ro&immutable=1")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        if tables and version in UPGRADABLE:
            _read_as_current(db, tables)
        elif tables and version != SCHEMA_VERSION:
            raise OtherFormat(path, version, SCHEMA_VERSION)
    except sqlite3.DatabaseError as exc:
        db.close()
        if sqlite_damaged(exc):
            raise DamagedStore(path, _sqlite_reason(exc)) from None
        raise
    except BaseException:
        db.close()
        raise
    return db


def _probe(uri: str) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opening is lazy: make it happen here
    except BaseException:
        db.close()
        raise
    return db


_TABLES = {m.group(1): m.group(0) for m in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+) \(.*?\n\);", SCHEMA, re.S)}


def _read_as_current(db: sqlite3.Connection, tables: set[str]) -> None:
    """Make an older store read like the current format without writing to it: a table it lacks is an
    empty temporary one, a column it lacks is NULL in a temporary view (temporary names come first)."""
    for table, statement in _TABLES.items():
        if table not in tables:
            db.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
    for table, columns in ADDED_COLUMNS.items():
        present = {row[1] for row in db.execute(f"PRAGMA main.table_info({table})")}
        missing = [c for c in columns if c not in present]
        if table in tables and missing:
            nulls = "".join(f", NULL AS {c}" for c in missing)
            db.execute(f"CREATE TEMP VIEW {table} AS SELECT rowid AS rowid, *{nulls} FROM main.{table}")


def _build(path: Path, name: str, scenario_text: str, fingerprint: str) -> None:
    """A whole new store, tables and run row, in a file that is not yet the run's."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.executescript(f"BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};")
        now = time.time()
        db.execute(
            "INSERT INTO run (id, name, scenario, fingerprint, arena_version, created, updated, status, pid, host, "
            "key_scheme) VALUES (1, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?)",
            (name, scenario_text, fingerprint, __version__, now, now, os.getpid(), socket.gethostname(), KEY_SCHEME),
        )
        db.execute("COMMIT")
    finally:
        db.close()


IN_FLIGHT_AT_DEATH = "in flight when the run's process died; its answer and tokens are unknown"


class EventRows:
    """The rows the store writes for each event, made where the match is played: in the run's own
    process, or in a worker process, which sends them to the run for its store to write as they are."""

    __slots__ = ("_seq", "_recipients")

    def __init__(self) -> None:
        self._seq: dict[str, int] = {}  # a match's next row number
        self._recipients: dict[tuple[str, ...], str] = {}

    def start(self, key: str) -> None:
        """A match (or a replay of it) begins: its rows are numbered from 0."""
        self._seq[key] = 0

    def end(self, key: str) -> None:
        self._seq.pop(key, None)

    def rows(self, event: Event) -> tuple[tuple[str, tuple], ...]:
        """(table, row) pairs; a message's row holds its fields, any other event's its JSON."""
        key, kind = event.match, event.type  # the type's name, not isinstance: this runs for every event
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        if kind == "message":
            m = event.message
            recipients = self._recipients.get(m.recipients)
            if recipients is None:  # a match has a handful of audiences: each is encoded once
                if len(self._recipients) > 4096:
                    self._recipients.clear()
                recipients = self._recipients[m.recipients] = json.dumps(m.recipients)
            return (("messages", (key, seq, m.index, m.round, m.sender, recipients, m.kind, m.content,
                                  None if m.data is None else json.dumps(m.data), m.shown)),)
        # the serializer itself: model_dump_json's own argument handling cost as much as the encoding
        row = ("events", (key, seq, kind, event.__pydantic_serializer__.to_json(event).decode(), time.time()))
        if kind == "match_started":
            return (("starts", (time.time(), _seats_json(event.seats), key)), row)
        return (row,)


class RunStore:
    """One run's store. Made by `arena run` (``create_or_resume``: the one writer, holding the run's lock)
    or opened by a command that reads it (``open(..., readonly=True)``)."""

    def __init__(self, run_dir: Path, db: sqlite3.Connection, readonly: bool = False, lock: RunLock | None = None):
        self.run_dir = run_dir
        self.db = db
        self.readonly = readonly
        self._lock = lock
        self.took_over: dict[str, Any] | None = None  # the writer before this one, which died holding the run
        self.set_aside: Path | None = None  # where --force-new (or an unfinished store) moved the old store to
        self._encoder = EventRows()
        # rows waiting for the next commit, written together (one statement per table, not per event),
        # and always before a commit or a wipe of the match's rows
        self._rows: dict[str, Any] = {table: ({} if table in _KEYED else []) for table in _WRITES}
        self._keys: set[str] | None = None  # every match the store has a row for, once prepare has read them
        self._in_tx = False
        self._last_commit = time.monotonic()
        self._failed: sqlite3.Error | None = None  # a write that failed (a full disk): no write is taken after it
        self._journal: tuple[int, int] | None = None  # the writer's -wal file (device, inode), as it opened it

    # -- opening -------------------------------------------------------------------
    @classmethod
    def create_or_resume(cls, run_dir: str | Path, name: str, scenario_text: str, fingerprint: str, force_new: bool = False) -> "RunStore":
        """The run's writer: takes the run's lock first (a second writer is refused at once, naming the
        first), then resumes the store, or makes it whole in a file of its own and renames it into place,
        so that whenever this is stopped the directory holds either a complete store or none."""
        run_dir = Path(run_dir)
        check_folder(run_dir)
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise NotAFolder(_file_part(run_dir)) from None
        except PermissionError:
            raise NotPermitted(next(p for p in run_dir.parents if p.exists()), "write in") from None
        except OSError as exc:
            raise StoreError(f"cannot make the run directory {run_dir}: {exc.strerror}") from None
        lock = RunLock.acquire(run_dir)
        try:
            store = cls._take(run_dir, lock, name, scenario_text, fingerprint, force_new)
        except BaseException:
            lock.release()
            raise
        return store

    @classmethod
    def _take(cls, run_dir: Path, lock: RunLock, name: str, scenario_text: str, fingerprint: str, force_new: bool) -> "RunStore":
        path = run_dir / STORE_FILE
        for leftover in leftovers(path):  # a new store whose making was cut short: it never held a run
            leftover.unlink(missing_ok=True)
        try:
            found = _examine(path)
        except NotPermitted:  # refused, --force-new or not: a store nobody has read may be worth keeping
            raise NotPermitted(path, "read", "run as a user who may, or give this run another --run-dir "
                               "(--force-new sets aside only a store it could read)") from None
        problem, label, aside = None, "old", None
        if found.state == "damaged":
            problem, label = DamagedStore(path, found.reason), "damaged"
        elif found.state == "present":
            try:  # looked at read-only first: a store that cannot be resumed is left exactly as it was
                probe = _connect_readonly(path)
                try:
                    tables = probe.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
                    row = probe.execute("SELECT fingerprint FROM run WHERE id = 1").fetchone() if tables else None
                finally:
                    probe.close()
                if not tables:  # tables never made: no run in it, but not nothing either
                    aside = set_aside(path, "unfinished")
                elif row and row[0] != fingerprint:
                    problem = StoreError(
                        f"{run_dir} holds a run of a different version of this scenario (seed, agents, games, "
                        "tournament or match settings changed since it started). Resume it with the scenario it "
                        "started with (a copy is in its scenario.yaml), choose another --run-dir, or pass "
                        "--force-new to set the old run aside and start afresh."
                    )
            except DamagedStore as exc:
                problem, label = exc, "damaged"
            except sqlite3.DatabaseError as exc:
                if sqlite_refused(exc):  # its journal, say, belongs to another user: not damage, and not set aside
                    raise NotPermitted(path, "read") from None
                if not sqlite_damaged(exc):
                    raise
                problem, label = DamagedStore(path, _sqlite_reason(exc)), "damaged"
            except StoreError as exc:
                problem = StoreError(f"{exc}; or pass --force-new to set it aside and start afresh")
        if problem is not None and not force_new:
            raise problem
        if force_new and path.exists():  # the old run is renamed, never deleted; the response cache stays
            aside = set_aside(path, label)
        if not path.exists() or examine(path).state == "empty":
            with replacing(path) as partial:  # made whole aside, then renamed: never half a store in place
                _build(partial, name, scenario_text, fingerprint)
        try:
            db = _connect(path)
        except sqlite3.DatabaseError as exc:
            if sqlite_refused(exc):
                raise NotPermitted(path, "write to") from None
            raise
        try:
            # tables and format version as this version writes them, and the run row, in one transaction
            db.executescript(f"BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};")
            now = time.time()
            db.execute(
                "INSERT INTO run (id, name, scenario, fingerprint, arena_version, created, updated, status, pid, host, "
                "key_scheme) VALUES (1, ?, ?, ?, ?, ?, ?, 'running', ?, ?, ?) ON CONFLICT (id) DO UPDATE SET "
                "status = 'running', updated = excluded.updated, pid = excluded.pid, host = excluded.host",
                (name, scenario_text, fingerprint, __version__, now, now, os.getpid(), socket.gethostname(), KEY_SCHEME),
            )
            # Calls the last writer had in flight when it died (killed: it would have recorded them) were
            # sent, and a provider bills what it answered: each is recorded, its tokens unknown.
            db.execute(
                "INSERT INTO calls (match_key, seat, round, attempt, agent, backend, model, prompt_tokens, "
                "completion_tokens, cost, latency, cached, retries, error, at) SELECT match_key, seat, round, attempt, "
                "agent, backend, model, NULL, NULL, NULL, 0.0, 0, 0, ?, started FROM calls_in_flight ORDER BY started",
                (IN_FLIGHT_AT_DEATH,))
            db.execute("DELETE FROM calls_in_flight")
            db.execute("COMMIT")
            with replacing(run_dir / SCENARIO_FILE) as partial:
                partial.write_text(scenario_text, encoding="utf-8")
        except BaseException:
            db.close()
            raise
        store = cls(run_dir, db, lock=lock)
        store.took_over, store.set_aside = lock.previous, aside
        store._journal = _identity(path.with_name(path.name + "-wal"))
        return store

    @classmethod
    def open(cls, run_dir: str | Path, readonly: bool = False) -> "RunStore":
        """An existing run's store. ``readonly``: for commands that only read (show, export, rank, report,
        watch): nothing is written, not even SQLite's side files, and a read-only folder is fine."""
        run_dir = Path(run_dir)
        check_folder(run_dir)
        path = run_dir / STORE_FILE
        found = _examine(path)
        if found.state == "absent":
            raise StoreError(f"{run_dir} is not a run directory (no {STORE_FILE} in it)")
        if found.state == "damaged":
            raise DamagedStore(path, found.reason)
        if found.state == "empty":
            raise NoRunYet(path)
        try:
            db = _connect_readonly(path) if readonly else _connect(path)
        except sqlite3.DatabaseError as exc:
            if sqlite_refused(exc):
                raise NotPermitted(path, "read" if readonly else "write to") from None
            raise
        if not db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]:
            db.close()
            raise NoRunYet(path)
        return cls(run_dir, db, readonly=readonly)

    @_whole
    def close(self) -> None:
        if not self.readonly:
            try:  # a store at rest is left out of WAL mode: readers then need no side files to read it
                self.db.execute("PRAGMA journal_mode=DELETE")
            except sqlite3.Error:
                pass  # another process has it open: it stays in WAL mode, its side files with it, until next time
        self.db.close()
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    # -- what another process can read -----------------------------------------------
    def journal_lost(self) -> bool:
        """Whether the -wal file this writer commits into is no longer the one at its name: another
        program removed it (or put another in its place). What was committed since the last
        checkpoint is then in a file only this process can still reach, and lost when it closes."""
        return self._journal is not None and _identity(self._wal()) != self._journal

    def _wal(self) -> Path:
        return self.run_dir / (STORE_FILE + "-wal")

    def saved(self) -> dict[str, str] | None:
        """Each match's status as a new reader finds it in the files: what the run may say it saved. A
        writer whose journal was removed first copies everything it committed into the store file (a
        checkpoint reads the log through this process's own handle on it), which saves it all unless
        another process holds a read open at that moment. None: a new reader cannot read the store."""
        if self.journal_lost():
            try:  # no waiting for a reader (it may never end its read): as much as can be copied now
                self.db.execute("PRAGMA busy_timeout=0")
                self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            except sqlite3.Error:
                pass  # what was saved is read back below, whatever this managed
            finally:
                self.db.execute("PRAGMA busy_timeout=30000")
        try:
            reader = _connect_readonly(self.run_dir / STORE_FILE)
        except (StoreError, sqlite3.Error):
            return None
        try:
            return dict(reader.execute("SELECT key, status FROM matches").fetchall())
        except sqlite3.Error:
            return None
        finally:
            reader.close()

    # -- the run -------------------------------------------------------------------
    def run_info(self) -> dict[str, Any]:
        try:
            cursor = self.db.execute("SELECT * FROM run WHERE id = 1")
        except sqlite3.OperationalError:  # the writer has created the file but not yet its tables
            return {}
        row = cursor.fetchone()
        return dict(zip([c[0] for c in cursor.description], row)) if row else {}

    def key_scheme(self) -> KeyScheme:
        """How the run's match keys name the seating (``MatchIdentity``): what a resume plans with, so
        that a run begun by an older version keeps its keys and seeds."""
        return self.run_info().get("key_scheme") or OLD_KEY_SCHEME

    def status(self) -> str:
        """The stored status, except that a 'running' run whose process is gone is 'stopped (resumable)'."""
        info = self.run_info()
        status = info.get("status", "starting")
        if status == "running" and not _alive(info.get("pid"), info.get("host")):
            return "stopped (resumable)"
        return status

    @_whole
    def set_status(self, status: str) -> None:
        self._writable()
        self.db.execute("UPDATE run SET status = ?, updated = ? WHERE id = 1", (status, time.time()))

    @_whole
    def set_planned(self, planned: int) -> None:
        self._writable()
        self.db.execute("UPDATE run SET planned = ?, updated = ? WHERE id = 1", (planned, time.time()))

    @_whole
    def record_session(self, overrides: list[str], limit: int | None) -> None:
        """One `arena run` on this run: the `--set KEY=VALUE` it was given and its `--limit`, for `arena show`."""
        self._writable()
        self.db.execute("INSERT INTO sessions (started, overrides, match_limit) VALUES (?, ?, ?)",
                        (time.time(), json.dumps(overrides), limit))

    def sessions(self) -> list[dict[str, Any]]:
        try:
            rows = self.db.execute("SELECT started, overrides, match_limit FROM sessions ORDER BY id").fetchall()
        except sqlite3.OperationalError:  # a store of this format written before sessions were kept
            return []
        return [{"started": started, "overrides": json.loads(overrides), "limit": limit} for started, overrides, limit in rows]

    def counts(self) -> dict[str, int]:
        try:
            return dict(self.db.execute("SELECT status, COUNT(*) FROM matches GROUP BY status").fetchall())
        except sqlite3.OperationalError:
            return {}

    # -- matches -------------------------------------------------------------------
    def finished_keys(self) -> set[str]:
        """The matches a resume keeps: finished, or cut at max_rounds (played again, they would be cut again)."""
        marks = ",".join("?" * len(KEPT))
        return {k for (k,) in self.db.execute(f"SELECT key FROM matches WHERE status IN ({marks})", KEPT)}

    COMMIT_EVERY = 0.25  # seconds: how fresh a watcher's view is, against the cost of a commit per round

    @_whole
    def prepare(self, spec: MatchSpec, position: int) -> None:
        """Register a match about to be played, wiping whatever a crashed attempt left.

        ``position`` is the match's place in the tournament's plan, the order in
        which records are read back whatever the order they finished in."""
        self._begin()  # committed with whatever is written next; a crash before that leaves nothing to undo
        if self._keys is None:  # the store's matches, read once: a key seen before is wiped before it is played
            self._keys = {key for (key,) in self.db.execute("SELECT key FROM matches")}
        if spec.key in self._keys:
            self._write_rows()  # an earlier attempt's last rows go before they are wiped
            for table in ("messages", "events", "outcomes", "metrics", "reviews"):  # calls stay: they were paid for
                self.db.execute(f"DELETE FROM {table} WHERE match_key = ?", (spec.key,))
        self._keys.add(spec.key)
        self._rows["matches"][spec.key] = (spec, position)  # its row is written with the others; `spec` reads it meanwhile
        self._encoder.start(spec.key)

    @_whole
    def record_event(self, event: Event) -> None:
        """An event sink: called by the match loop for everything that happens."""
        self.add_rows(self._encoder.rows(event))

    @_whole
    def add_rows(self, rows: Sequence[tuple[str, tuple]]) -> None:
        """An event's rows, as ``EventRows`` made them (here, or in a worker process that played the match)."""
        self._begin()
        pending = self._rows
        for table, row in rows:
            if table == "starts":  # written with the rows; a match that ends first says it in its last row
                pending["starts"][row[2]] = row
                continue
            waiting = pending[table]
            waiting.append(row)
            # Rows wait for the commit, which makes them visible to readers anyway, or for a batch of 512;
            # writing them at every round close cost a statement per table per round.
            if table == "events" and row[2] == "round_closed" and time.monotonic() - self._last_commit >= self.COMMIT_EVERY:
                self._commit()
            elif len(waiting) >= 512:  # a long round (many matches at once) goes in parts
                self._write_rows()

    def _write_rows(self) -> None:
        """Every row waiting, one statement per table, in the order the tables' rows depend on."""
        try:
            self._write_each()
        except sqlite3.Error as exc:
            self._give_up(exc)
            raise

    def _write_each(self) -> None:
        for table, rows in self._rows.items():
            if rows:
                if table == "matches":
                    rows = [(spec.key, position, spec.group, spec.repeat, spec.game, spec.model_dump_json())
                            for spec, position in rows.values()]
                elif table == "starts":
                    rows = rows.values()
                self.db.executemany(_WRITES[table], rows)
                self._rows[table] = {} if table in _KEYED else []

    @_whole
    def finish(self, record: MatchRecord, commit: bool = True) -> None:
        """The outcome, in one transaction with the match's last events; committed now unless
        ``commit`` is false, when the caller commits it (a run shares one commit among the
        matches that end together: ``arena.store.commits``)."""
        self._begin()
        rows, key = self._rows, record.key
        if record.status in KEPT:
            rows["outcomes"] += [(key, seat.label, seat.agent, seat.role, record.payoffs[seat.label])
                                 for seat in record.seats if seat.label in record.payoffs]
        for metric, values in record.metrics.items():
            rows["metrics"] += [(key, metric, seat, value) for seat, value in values.items()]
        rows["reviews"] += [(key, seq, r.question, r.a, r.b, r.reviewer, r.score, r.sample, r.order, r.difference)
                            for seq, r in enumerate(record.reviews)]
        start = rows["starts"].pop(key, None)
        rows["ends"].append((record.status, record.rounds, record.error, json.dumps(record.params), time.time(),
                             _seats_json(record.seats), start[0] if start else None, key))
        if commit:
            self._commit()
        self._encoder.end(record.key)

    @_whole
    def call_started(self, call: CallStarted) -> None:
        """A call in flight, for `arena watch`; its record replaces it. Committed at once, with the match's
        events so far: a model call can take minutes, and a watcher should see the match and the call meanwhile."""
        self._begin()
        self.db.execute("INSERT OR REPLACE INTO calls_in_flight VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                        (call.token, call.match, call.seat, call.round, call.attempt, call.agent, call.backend,
                         call.model, time.time()))
        self._commit()

    def calls_in_flight(self) -> list[dict[str, Any]]:
        cursor = self.db.execute("SELECT match_key, seat, round, attempt, agent, backend, model, started "
                                 "FROM calls_in_flight ORDER BY started")
        names = ("match", "seat", "round", "attempt", "agent", "backend", "model", "started")
        return [dict(zip(names, row)) for row in cursor]

    @_whole
    def record_note(self, agent: str, endpoint: str, topic: str, text: str) -> None:
        self._begin()
        self.db.execute("INSERT INTO notes (agent, endpoint, topic, text, at) VALUES (?, ?, ?, ?, ?)",
                        (agent, endpoint, topic, text, time.time()))
        self._commit()

    def notes(self) -> list[dict[str, Any]]:
        cursor = self.db.execute("SELECT agent, endpoint, topic, text, at FROM notes ORDER BY id")
        return [dict(zip(("agent", "endpoint", "topic", "text", "at"), row)) for row in cursor]

    @_whole
    def record_call(self, call: CallRecord) -> None:
        """Committed at once: a call is money spent, and the budget counts it even after a crash."""
        self._begin()
        if call.token is not None:
            self.db.execute("DELETE FROM calls_in_flight WHERE token = ?", (call.token,))
        self.db.execute(
            "INSERT INTO calls (match_key, seat, round, attempt, agent, backend, model, prompt_tokens, completion_tokens, "
            "cost, latency, cached, retries, error, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (call.match, call.seat, call.round, call.attempt, call.agent, call.backend, call.model, call.prompt_tokens,
             call.completion_tokens, call.cost, call.latency, int(call.cached), call.retries, call.error, time.time()),
        )
        self._commit()

    def calls(self) -> list[CallRecord]:
        rows = self.db.execute(
            "SELECT match_key, seat, round, attempt, agent, backend, model, prompt_tokens, completion_tokens, cost, "
            "latency, cached, retries, error FROM calls ORDER BY id"
        ).fetchall()
        names = ("match", "seat", "round", "attempt", "agent", "backend", "model", "prompt_tokens", "completion_tokens",
                 "cost", "latency", "cached", "retries", "error")
        return [CallRecord(**dict(zip(names, row))) for row in rows]

    @_whole
    def record_stability(self, group: str, repeats: int, tau: float | None, max_width: float, stable: bool, done: bool) -> None:
        self._writable()
        self.db.execute(
            "INSERT OR REPLACE INTO stability VALUES (?, ?, ?, ?, ?, ?)", (group, repeats, tau, max_width, int(stable), int(done))
        )

    def stability(self) -> list[dict[str, Any]]:
        cursor = self.db.execute("SELECT grp, repeats, tau, max_width, stable, done FROM stability ORDER BY grp, repeats")
        return [dict(zip(("group", "repeats", "tau", "max_width", "stable", "done"), row)) for row in cursor]

    # -- reading back, in rows -----------------------------------------------------
    # Each reader streams from a cursor, in the plan's order (``position``) whatever order the
    # matches finished in; a full record is built only for the one match asked for.
    _MATCH = "m.key, m.grp, m.repeat, m.game, m.status, m.spec, m.seats, m.params, m.rounds, m.error"

    def matches(self, status: str | None = None, key: str | None = None, group: str | None = None) -> Iterator[MatchRow]:
        """The run's matches (those of one status, one entry, or one key), with their payoffs and
        without their transcripts."""
        where, args = _where(status, key, group)
        cursor = self.db.execute(
            f"SELECT {self._MATCH}, o.seat, o.payoff FROM matches m LEFT JOIN outcomes o ON o.match_key = m.key"
            f"{where} ORDER BY m.position, m.key, o.seat", args)
        for _, rows in groupby(cursor, itemgetter(0)):
            rows = list(rows)
            key_, group_, repeat, game, status_, spec, seats, params, rounds, error = rows[0][:10]
            spec = json.loads(spec)  # in Python: a seed is 64 bits unsigned, more than SQLite's integers hold
            yield MatchRow(key_, group_, repeat, game, _status(status_), spec["seed"], _seats(seats),
                           json.loads(params) if params else dict(spec.get("params") or {}), rounds or 0, error,
                           {seat: payoff for *_, seat, payoff in rows if seat is not None})

    def match(self, key: str) -> MatchRow | None:
        return next(self.matches(key=key), None)

    def scores(self, metric: str | None = None, group: str | None = None) -> Iterator[ScoreRow]:
        """Every finished match's figures under ``metric`` (None: the payoffs). Matches of a store
        written before referees reported metrics have their payoffs under the name "payoff"."""
        where, args = _where("finished", None, group)
        if metric is None:
            query = (f"SELECT m.key, m.grp, m.repeat, m.seats, o.seat, o.payoff FROM matches m "
                     f"JOIN outcomes o ON o.match_key = m.key{where} ORDER BY m.position, m.key, o.seat")
        else:
            query = (f"SELECT m.key, m.grp, m.repeat, m.seats, x.seat, x.value, m.position AS pos, x.rowid AS n "
                     f"FROM matches m JOIN metrics x ON x.match_key = m.key AND x.metric = ?{where}")
            args, where_args = [metric, *args], args
            if metric == "payoff":
                query += (f" UNION ALL SELECT m.key, m.grp, m.repeat, m.seats, o.seat, o.payoff, m.position, o.rowid "
                          f"FROM matches m JOIN outcomes o ON o.match_key = m.key{where} "
                          "AND NOT EXISTS (SELECT 1 FROM metrics WHERE match_key = m.key)")
                args += where_args
            query += " ORDER BY pos, 1, n"
        for _, rows in groupby(self.db.execute(query, args), itemgetter(0)):
            rows = list(rows)
            key, group_, repeat, seats = rows[0][:4]
            yield ScoreRow(key, group_, repeat, _seats(seats), {row[4]: row[5] for row in rows})

    def turns(self, group: str | None = None) -> Iterator[TurnRow]:
        """Every seat of a finished match that took a turn: how many turns (one action each, valid or
        defaulted), and how many invalid replies, timeouts and defaulted turns it had. A referee's
        judge sits in no seat and is left out."""
        where, args = _where("finished", None, group)
        failure = "json_extract(e.body, '$.failure')"
        cursor = self.db.execute(
            f"SELECT e.match_key, m.grp, m.seats, json_extract(e.body, '$.seat') AS seat, "
            f"SUM(e.type = 'turn_failed' AND {failure} = 'invalid'), SUM(e.type = 'turn_failed' AND {failure} = 'timeout'), "
            "SUM(e.type = 'action' AND coalesce(json_extract(e.body, '$.defaulted'), 0)), SUM(e.type = 'action') "
            f"FROM matches m JOIN events e ON e.match_key = m.key{where} AND "
            f"((e.type = 'turn_failed' AND {failure} IN ('invalid', 'timeout')) OR e.type = 'action') "
            "GROUP BY e.match_key, seat", args)
        for key, group_, seats, seat, invalid, timeouts, defaulted, taken in cursor:
            found = next((s for s in _seats(seats) if s.label == seat), None)
            if found is not None:
                yield TurnRow(key, group_, found.agent, found.role, invalid, timeouts, defaulted, taken)

    def metric_names(self) -> dict[str, list[str]]:
        """Each entry's metrics in the order its referees report them; the first is the payoff."""
        names: dict[str, dict[str, None]] = {}
        for group, metric in self.db.execute(
                "SELECT m.grp, x.metric FROM matches m LEFT JOIN metrics x ON x.match_key = m.key "
                "WHERE m.status = 'finished' ORDER BY m.position, m.key, x.rowid"):
            names.setdefault(group, {})[metric or "payoff"] = None
        return {group: list(found) for group, found in names.items()}

    def finished_games(self) -> list[str]:
        """The games of the run's finished matches, in the order the plan first plays them."""
        return [game for (game,) in self.db.execute(
            "SELECT game FROM matches WHERE status = 'finished' GROUP BY game ORDER BY MIN(position)")]

    def review_rows(self) -> list[Review]:
        """Every review of the run's finished matches, with its match and repeat, for peer rank."""
        return [Review._make(row) for row in self.db.execute(
            "SELECT r.question, r.a, r.b, r.reviewer, r.score, r.sample, COALESCE(r.shown_order, 0), m.repeat, "
            "r.difference, r.match_key FROM reviews r JOIN matches m ON m.key = r.match_key "
            "WHERE m.status = 'finished' ORDER BY m.position, r.seq")]

    def messages(self, kind: str, with_data: str | None = None, round: int | None = None,
                 key: str | None = None) -> Iterator[tuple[str, MessageRow]]:
        """(match key, message) for the messages of one kind in finished matches, in the plan's order;
        ``with_data``: only those whose data holds that field."""
        where, args = _where("finished", key, None)
        query = ("SELECT m.key, x.seq, x.idx, x.round, x.sender, x.recipients, x.kind, x.content, x.data, x.shown "
                 f"FROM matches m JOIN messages x ON x.match_key = m.key{where} AND x.kind = ?")
        args.append(kind)
        if with_data is not None:
            query += " AND json_type(x.data, ?) IS NOT NULL"
            args.append("$." + with_data)
        if round is not None:
            query += " AND x.round = ?"
            args.append(round)
        for key_, *row in self.db.execute(query + " ORDER BY m.position, m.key, x.seq", args):
            yield key_, _message_row(row)

    def final_notices(self, fields: tuple[str, ...], game: str | None = None) -> Iterator[FinalNotice]:
        """Each finished match (of ``game``, when given) whose last referee notice with object data
        holds one of ``fields`` at its top level (a game's ``summary_fields``), with that data, in the
        plan's order. The text is searched for the fields first, so other matches' notices cost nothing."""
        if not fields:
            return
        found = " OR ".join("instr(x.data, ?) > 0" for _ in fields)
        of_game = "" if game is None else " AND m.game = ?"
        query = (
            "SELECT m.key, m.grp, m.repeat, m.seats, x.data, m.game FROM matches m JOIN messages x ON x.match_key = m.key "
            f"WHERE m.status = 'finished'{of_game} AND x.kind = 'notice' AND x.sender = ? AND ({found}) "
            "AND json_type(x.data) = 'object' AND NOT EXISTS (SELECT 1 FROM messages y WHERE y.match_key = x.match_key "
            "AND y.seq > x.seq AND y.kind = 'notice' AND y.sender = ? AND json_type(y.data) = 'object') "
            "ORDER BY m.position, m.key")
        args = [*([] if game is None else [game]), REFEREE, *(json.dumps(f) for f in fields), REFEREE]
        for key, group, repeat, seats, data, game_ in self.db.execute(query, args):
            data = json.loads(data)
            if any(f in data for f in fields):
                yield FinalNotice(key, group, repeat, _seats(seats), data, game_)

    def transcript(self, key: str) -> Transcript | None:
        """One match's messages and events, as stored."""
        match = self.match(key)
        return None if match is None else self._transcript(match)

    def transcript_rows(self, status: str | None = None, events: tuple[str, ...] | None = None) -> Iterator[StoredTranscript]:
        """Every match's transcript (or those of one status), one at a time, in the plan's order, as it
        is stored: for a reader of a whole run (the report's packing), to which building a typed row of
        each of a large run's messages would cost more than the rest of its work. ``events``: only the
        events of these types. Matches, messages and events are read as three streams in that same
        order and met up, not with two queries per match."""
        where, args = _where(status, None, None)
        order = " ORDER BY m.position, m.key, x.seq"  # CROSS JOIN: matches outside, so each one's rows come by its key
        posted = groupby(self.db.execute(
            "SELECT m.key, x.round, x.sender, x.recipients, x.kind, x.content, x.data, x.shown "
            f"FROM matches m CROSS JOIN messages x ON x.match_key = m.key{where}{order}", args), itemgetter(0))
        chosen = "" if events is None else f" AND x.type IN ({', '.join('?' * len(events))})"
        happened = groupby(self.db.execute(
            f"SELECT m.key, x.type, x.body FROM matches m CROSS JOIN events x ON x.match_key = m.key{where}{chosen}{order}",
            [*args, *(events or ())]), itemgetter(0))
        next_posted, next_happened = next(posted, None), next(happened, None)
        for match in self.matches(status):
            messages, found = [], []
            if next_posted is not None and next_posted[0] == match.key:
                messages = list(next_posted[1])
                next_posted = next(posted, None)
            if next_happened is not None and next_happened[0] == match.key:
                found = list(next_happened[1])
                next_happened = next(happened, None)
            yield StoredTranscript(match, messages, found)

    def record(self, key: str) -> MatchRecord | None:
        """One match in full: transcript, payoffs, every metric and its reviews."""
        match = self.match(key)
        return None if match is None else self._record(match)

    def records(self, status: str | None = "finished") -> Iterator[MatchRecord]:
        """Match by match in full, in the plan's order: for `arena export`, which writes each as it comes."""
        for match in self.matches(status):
            yield self._record(match)

    def _transcript(self, match: MatchRow) -> Transcript:
        messages = [_message_row(row) for row in self.db.execute(
            "SELECT seq, idx, round, sender, recipients, kind, content, data, shown FROM messages WHERE match_key = ? "
            "ORDER BY seq", (match.key,))]
        events = [EventRow(seq, type_, json.loads(body)) for seq, type_, body in self.db.execute(
            "SELECT seq, type, body FROM events WHERE match_key = ? ORDER BY seq", (match.key,))]
        return Transcript(match, messages, events)

    def _record(self, match: MatchRow) -> MatchRecord:
        key = match.key
        messages = {
            seq: Message(index=idx, round=rnd, sender=sender, recipients=tuple(json.loads(rcpt)), content=content,
                         kind=kind, data=None if data is None else json.loads(data), shown=shown)
            for seq, idx, rnd, sender, rcpt, kind, content, data, shown in self.db.execute(
                "SELECT seq, idx, round, sender, recipients, kind, content, data, shown FROM messages WHERE match_key = ?",
                (key,))
        }
        events = {seq: _events.validate_json(body) for seq, body in self.db.execute(
            "SELECT seq, body FROM events WHERE match_key = ?", (key,))}
        for seq, message in messages.items():
            events[seq] = MessagePosted.model_construct(match=key, message=message)
        reviews = [Review(question, a, b, reviewer, score, sample, order, match.repeat, difference, key)
                   for question, a, b, reviewer, score, sample, order, difference in self.db.execute(
                       "SELECT question, a, b, reviewer, score, sample, COALESCE(shown_order, 0), difference "
                       "FROM reviews WHERE match_key = ? ORDER BY seq", (key,))]
        metrics: dict[str, dict[str, float]] = {}
        for metric, seat, value in self.db.execute(
                "SELECT metric, seat, value FROM metrics WHERE match_key = ? ORDER BY rowid", (key,)):
            metrics.setdefault(metric, {})[seat] = value
        return MatchRecord(
            key=key, group=match.group, repeat=match.repeat, game=match.game, reviews=reviews, metrics=metrics,
            params=match.params, seed=match.seed, seats=match.seats, status=match.status, rounds=match.rounds,
            payoffs=match.payoffs, messages=tuple(messages[s] for s in sorted(messages)),
            events=EventLog((events[s] for s in sorted(events)), match=key), error=match.error,
        )

    @_whole
    def override_review(self, match_key: str, reviewer: str, a: str, b: str, question: str, score: int) -> bool:
        """Replace a reviewer's verdicts on a pair (every sample, either order) in one match by one
        verdict, from ``a``'s side (score -1: a better): a single sample, which peer rank takes as
        that reviewer's calibrated verdict. False when there was nothing to replace."""
        with_rows = self.db.execute(
            "SELECT COUNT(*) FROM reviews WHERE match_key = ? AND reviewer = ? AND ((a = ? AND b = ?) OR (a = ? AND b = ?))",
            (match_key, reviewer, a, b, b, a)).fetchone()[0]
        if not with_rows:
            return False
        self._begin()
        self.db.execute("DELETE FROM reviews WHERE match_key = ? AND reviewer = ? AND ((a = ? AND b = ?) OR (a = ? AND b = ?))",
                        (match_key, reviewer, a, b, b, a))
        last = self.db.execute("SELECT COALESCE(MAX(seq), -1) FROM reviews WHERE match_key = ?", (match_key,)).fetchone()[0]
        self.db.execute(f"INSERT INTO reviews ({_REVIEW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, NULL)",
                        (match_key, last + 1, question, a, b, reviewer, score))
        self._commit()
        return True

    def spec(self, key: str) -> MatchSpec | None:
        """The specification of a match the store has registered, or None."""
        waiting = self._rows["matches"].get(key)
        if waiting is not None:
            return waiting[0]
        row = self.db.execute("SELECT spec FROM matches WHERE key = ?", (key,)).fetchone()
        return MatchSpec.model_validate_json(row[0]) if row else None

    def match_keys(self) -> list[tuple[str, str]]:
        return self.db.execute("SELECT key, status FROM matches ORDER BY position").fetchall()

    def match_statuses(self) -> dict[str, str]:
        """Each match's status as a reader shows it: one that was being played when the run stopped
        (Ctrl-C, an error) or its process died is interrupted (not scored; the next `arena run` plays
        it again), not running: only a run that is being played has running matches."""
        stored = dict(self.match_keys())
        if self.status() != "running":
            return {key: "interrupted" if status == "running" else status for key, status in stored.items()}
        return stored

    # -- transactions --------------------------------------------------------------
    def _begin(self) -> None:
        self._writable()
        if not self._in_tx:
            self.db.execute("BEGIN")
            self._in_tx = True

    def _writable(self) -> None:
        if self._failed is not None:
            raise StoreError(f"the run store takes no more writes after this one failed: {self._failed}") from self._failed

    def _commit(self) -> None:
        if self._in_tx:
            try:
                self._write_rows()
                self.db.execute("COMMIT")
            except sqlite3.Error as exc:
                self._give_up(exc)
                raise
            self._in_tx = False
        self._last_commit = time.monotonic()

    def _give_up(self, exc: sqlite3.Error) -> None:
        """A write failed part way (a full disk): what the transaction holds is unknown (a batch of rows
        goes in row by row), so it is rolled back whole, its rows dropped, and no other write is taken.
        What was committed stays; the matches in flight are played again by the next run."""
        self._failed = exc
        try:
            self.db.execute("ROLLBACK")
        except sqlite3.Error:
            pass  # SQLite rolled it back itself
        self._in_tx = False
        self._rows = {table: ({} if table in _KEYED else []) for table in _WRITES}

    @_whole
    def flush(self) -> None:
        self._commit()


def _where(status: str | None, key: str | None, group: str | None) -> tuple[str, list[Any]]:
    """The WHERE clause choosing matches (table alias m) by status, key and entry."""
    clauses, args = [], []
    if status == "interrupted":  # a match left pending or running was cut short too
        clauses.append("m.status IN ('interrupted', 'pending', 'running')")
    elif status is not None:
        clauses.append("m.status = ?")
        args.append(status)
    for column, value in (("m.key", key), ("m.grp", group)):
        if value is not None:
            clauses.append(f"{column} = ?")
            args.append(value)
    return (" WHERE " + " AND ".join(clauses) if clauses else ""), args


def _status(stored: str) -> str:
    # a match left pending or running was cut short by a crash or a stop, like one a backend interrupted
    return stored if stored in ("finished", "truncated", "failed", "interrupted") else "interrupted"


@lru_cache(maxsize=1024)  # a tournament has a few seatings, each written twice per match
def _seats_json(seats: tuple[SeatInfo, ...]) -> str:
    return json.dumps([s.model_dump() for s in seats])


@lru_cache(maxsize=4096)
def _seats(text: str | None) -> tuple[SeatInfo, ...]:
    """Seatings repeat from match to match; each is parsed once (SeatInfo is frozen, so sharing is safe)."""
    return tuple(SeatInfo(**seat) for seat in json.loads(text or "[]"))


@lru_cache(maxsize=4096)
def _recipients(text: str) -> tuple[str, ...]:
    """Audiences repeat from message to message; each is parsed once."""
    return tuple(json.loads(text))


def _message_row(row) -> MessageRow:
    seq, idx, rnd, sender, recipients, kind, content, data, shown = row
    return MessageRow(seq, idx, rnd, sender, _recipients(recipients), kind, content,
                      None if data is None else json.loads(data), shown)


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino


def _alive(pid: int | None, host: str | None) -> bool:
    """Whether the process that writes a run still exists. From another machine we cannot tell: assume it does."""
    if not pid:
        return False
    if host and host != socket.gethostname():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return not _zombie(pid)


def _zombie(pid: int) -> bool:
    """Whether the process has died and only waits for its parent to collect it (State Z, or X while
    it is removed): it writes nothing any more. Where /proc cannot say, it is taken to be alive."""
    try:
        with open(f"/proc/{pid}/status", encoding="ascii", errors="replace") as status:
            for line in status:
                if line.startswith("State:"):
                    return line.split()[1:2] in (["Z"], ["X"])
    except OSError:
        return False
    return False


def run_dirs(output: str | Path) -> Iterator[Path]:
    """``output`` itself if it is a run directory, and every run directory in it. A folder this user may
    not enter is yielded too: whether it holds a run is unknown, and the listing says it cannot tell."""
    root = Path(output)
    check_folder(root)

    def holds_a_run(folder: Path) -> bool:
        try:
            return (folder / STORE_FILE).exists()
        except PermissionError:
            return True

    if holds_a_run(root):
        yield root
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and holds_a_run(child):
                yield child
