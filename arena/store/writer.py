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
import socket
import sqlite3
import time
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

from trio.lowlevel import enable_ki_protection as _whole

from arena import __version__
from arena.contract.events import Event, SeatInfo
from arena.contract.calls import CallRecord, CallStarted
from arena.contract.files import examine, leftovers, replacing, set_aside, sqlite_damaged
from arena.contract.records import KEPT, KEY_SCHEME, MatchRecord, MatchSpec
from arena.contract.runs.opening import (check_folder, connect_or_say, connect_readonly, examine_store, file_part,
                                         open_begun, sqlite_reason, sqlite_refused)
from arena.contract.runs.reader import RunReader
from arena.contract.runs.schema import (ADDED_COLUMNS, REVIEW_COLUMNS, SCENARIO_FILE, SCHEMA, SCHEMA_VERSION, STORE_FILE,
                                        TABLES,
                                        UPGRADABLE, VIEWS, DamagedStore, NotAFolder, NotPermitted, OtherFormat,
                                        StoreError)
from arena.store.lock import RunLock
from arena.store.texts import MOVE_TO_TEXTS, SNAPSHOT, Interned, ready_to_move, spec_parts

# What the rows waiting for a commit are written with, in this order: a match's row before what
# updates it. "matches" maps a key to (spec, position), which `RunStore.spec` reads before it is
# written; "starts" maps a key to its row, so that a match ending before the write drops it and
# says when it started in its last row.
_WRITES = {
    "matches": "INSERT INTO match_rows (key, position, grp, repeat, game, spec, spec_rest, status) "
               "VALUES (?, ?, ?, ?, ?, ?, ?, 'pending') "
               "ON CONFLICT (key) DO UPDATE SET status = 'pending', seats = NULL, rounds = NULL, error = NULL, "
               "started = NULL, ended = NULL",
    "starts": "UPDATE match_rows SET status = 'running', started = ?, seats = ? WHERE key = ?",
    "messages": "INSERT INTO posted VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",  # texts by number: arena.store.texts
    "events": "INSERT INTO happened VALUES (?, ?, ?, ?, ?, ?)",
    "outcomes": "INSERT INTO seat_outcomes VALUES (?, ?, ?, ?, ?)",
    "metrics": "INSERT INTO seat_metrics VALUES (?, ?, ?, ?)",
    "reviews": f"INSERT INTO reviews ({REVIEW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
    "ends": "UPDATE match_rows SET status = ?, rounds = ?, error = ?, params = ?, ended = ?, seats = ?, "
            "started = coalesce(?, started) WHERE key = ?",
}
_KEYED = ("matches", "starts")
_CREATE = SCHEMA + VIEWS  # the tables, and the views the readers read messages and events through


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
            # The rows of messages, events, outcomes and metrics, as tables (formats 2 to 7) or format 8's
            # views, move to the tables that number their texts, in the upgrade's one transaction (a crash
            # leaves the old store whole); a table an old format never had is made empty to move from.
            kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name IN "
                                    "('matches', 'messages', 'events', 'outcomes', 'metrics', 'posted', 'happened')"))
            moved = ("matches", "messages", "events", "outcomes", "metrics")
            missing = "".join(TABLES[name] + ";" for name in moved if name not in kinds)
            drop = "".join(f"DROP {kinds.get(name, 'table').upper()} {name}; " for name in moved)
            drop += "".join(f"DROP TABLE {name}; " for name in ("posted", "happened") if name in kinds)
            ready_to_move(db)
            db.executescript(f"BEGIN; {alter} {missing} {SNAPSHOT} {drop} {SCHEMA} {MOVE_TO_TEXTS} {VIEWS} "
                             f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
            version = SCHEMA_VERSION
    except sqlite3.DatabaseError as exc:
        db.close()
        if sqlite_damaged(exc):
            raise DamagedStore(path, sqlite_reason(exc)) from None
        raise
    if has_tables and version != SCHEMA_VERSION:
        db.close()
        raise OtherFormat(path, version, SCHEMA_VERSION)
    return db


def _build(path: Path, name: str, scenario_text: str, fingerprint: str) -> None:
    """A whole new store, tables and run row, in a file that is not yet the run's."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        db.executescript(f"BEGIN; {_CREATE} PRAGMA user_version = {SCHEMA_VERSION};")
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
    """One run's store, to write it. Made by `arena run` (``create_or_resume``: the one writer, holding the
    run's lock), or opened to amend a finished run (``open``: `arena annotate` writes a person's verdicts).
    A command that only reads a run opens it with ``arena.contract.open_run``; the writer reads what it
    wrote through ``read``, a reader on its own connection."""

    def __init__(self, run_dir: Path, db: sqlite3.Connection, lock: RunLock | None = None):
        self.run_dir = run_dir
        self.db = db
        self.read = RunReader(run_dir, db)
        self._lock = lock
        self.took_over: dict[str, Any] | None = None  # the writer before this one, which died holding the run
        self.set_aside: Path | None = None  # where --force-new (or an unfinished store) moved the old store to
        self._encoder = EventRows()
        self._interned = Interned(db)  # the numbers of the texts and match keys the rows refer to
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
            raise NotAFolder(file_part(run_dir)) from None
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
            found = examine_store(path)
        except NotPermitted:  # refused, --force-new or not: a store nobody has read may be worth keeping
            raise NotPermitted(path, "read", "run as a user who may, or give this run another --run-dir "
                               "(--force-new sets aside only a store it could read)") from None
        problem, label, aside = None, "old", None
        if found.state == "damaged":
            problem, label = DamagedStore(path, found.reason), "damaged"
        elif found.state == "present":
            try:  # looked at read-only first: a store that cannot be resumed is left exactly as it was
                probe = connect_readonly(path)
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
                problem, label = DamagedStore(path, sqlite_reason(exc)), "damaged"
            except StoreError as exc:
                problem = StoreError(f"{exc}; or pass --force-new to set it aside and start afresh")
        if problem is not None and not force_new:
            raise problem
        if force_new and path.exists():  # the old run is renamed, never deleted; the response cache stays
            aside = set_aside(path, label)
        if not path.exists() or examine(path).state == "empty":
            with replacing(path) as partial:  # made whole aside, then renamed: never half a store in place
                _build(partial, name, scenario_text, fingerprint)
        db = connect_or_say(path, _connect, "write to")
        try:
            # tables and format version as this version writes them, and the run row, in one transaction
            db.executescript(f"BEGIN; {_CREATE} PRAGMA user_version = {SCHEMA_VERSION};")
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
    def open(cls, run_dir: str | Path) -> "RunStore":
        """An existing run's store, to write to it (without the run's lock: a finished run)."""
        run_dir = Path(run_dir)
        check_folder(run_dir)
        return cls(run_dir, open_begun(run_dir, run_dir / STORE_FILE, _connect, "write to"))

    @_whole
    def close(self) -> None:
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
            reader = connect_readonly(self.run_dir / STORE_FILE)
        except (StoreError, sqlite3.Error):
            return None
        try:
            return dict(reader.execute("SELECT key, status FROM matches").fetchall())
        except sqlite3.Error:
            return None
        finally:
            reader.close()

    # -- the run -------------------------------------------------------------------
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

    # -- matches -------------------------------------------------------------------
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
            for table in ("posted", "happened"):  # texts stay: the match played again posts them again
                self.db.execute(f"DELETE FROM {table} WHERE match = (SELECT id FROM match_ids WHERE key = ?)", (spec.key,))
            for table in ("seat_outcomes", "seat_metrics"):  # calls stay: they were paid for
                self.db.execute(f"DELETE FROM {table} WHERE match = (SELECT id FROM match_ids WHERE key = ?)", (spec.key,))
            self.db.execute("DELETE FROM reviews WHERE match_key = ?", (spec.key,))
        self._keys.add(spec.key)
        self._rows["matches"][spec.key] = (spec, position)  # its row is written with the others; `spec` reads it meanwhile
        self._encoder.start(spec.key)

    @_whole
    def record_event(self, event: Event) -> None:
        """An event sink: called by the match loop for everything that happens."""
        self.add_rows(self._encoder.rows(event))

    @_whole
    def add_rows(self, rows: Sequence[tuple[str, tuple]]) -> None:
        """An event's rows, as ``EventRows`` made them (here, or in a worker process that played the match);
        or many events' rows at once."""
        pending = self._rows
        for table, row in rows:
            # Each row waits inside a transaction: a round's close below may commit part way through a batch,
            # and a row left waiting with none open is skipped by the next flush (it writes only what a
            # transaction holds), lost if no other write comes after it (a bench's synthetic run lost its outcomes).
            if not self._in_tx:
                self._begin()
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
                if table == "matches":  # a spec's part shared with its entry's matches is a text, stored once
                    parts = [(spec, position, *spec_parts(spec.model_dump_json())) for spec, position in rows.values()]
                    shared = self._interned.spec_rests({rest for *_, rest in parts if rest is not None})
                    rows = [(spec.key, position, spec.group, spec.repeat, spec.game, own, shared.get(rest))
                            for spec, position, own, rest in parts]
                elif table == "starts":
                    rows = rows.values()
                elif table == "messages":  # each text found or stored first, in this same transaction
                    rows = self._interned.messages(rows)
                elif table == "events":
                    rows = self._interned.events(rows)
                elif table == "outcomes":
                    rows = self._interned.outcomes(rows)
                elif table == "metrics":
                    rows = self._interned.metrics(rows)
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

    @_whole
    def record_note(self, agent: str, endpoint: str, topic: str, text: str) -> None:
        self._begin()
        self.db.execute("INSERT INTO notes (agent, endpoint, topic, text, at) VALUES (?, ?, ?, ?, ?)",
                        (agent, endpoint, topic, text, time.time()))
        self._commit()

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

    @_whole
    def record_stability(self, group: str, repeats: int, tau: float | None, max_width: float, stable: bool, done: bool,
                         stopped: str | None = None, width_limit: float | None = None) -> None:
        """One check of an until_stable entry; ``stopped`` says why it ended, None while it goes on."""
        self._writable()
        self.db.execute(
            "INSERT OR REPLACE INTO stability (grp, repeats, tau, max_width, stable, done, stopped, width_limit) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)", (group, repeats, tau, max_width, int(stable), int(done), stopped, width_limit)
        )

    @_whole
    def stop_stability(self, group: str, why: str) -> None:
        """The run stopped before the entry's next whole block (``why``: budget, outage, limit): said on its last
        check, which a resumed run replaces when it checks that block again."""
        self._writable()
        self.db.execute("UPDATE stability SET stopped = ? WHERE grp = ? AND repeats = "
                        "(SELECT MAX(repeats) FROM stability WHERE grp = ?)", (why, group, group))

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
        self.db.execute(f"INSERT INTO reviews ({REVIEW_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, 0, 0, NULL)",
                        (match_key, last + 1, question, a, b, reviewer, score))
        self._commit()
        return True

    def spec(self, key: str) -> MatchSpec | None:
        """The specification of a match the store has registered, or None: one still waiting for the
        commit is found in memory (the live view asks for a match as soon as it starts)."""
        waiting = self._rows["matches"].get(key)
        return waiting[0] if waiting is not None else self.read.spec(key)

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
        self._interned.clear()  # the numbers given in the rolled back transaction are gone

    @_whole
    def flush(self) -> None:
        self._commit()


@lru_cache(maxsize=1024)  # a tournament has a few seatings, each written twice per match
def _seats_json(seats: tuple[SeatInfo, ...]) -> str:
    return json.dumps([s.model_dump() for s in seats])


def _identity(path: Path) -> tuple[int, int] | None:
    try:
        found = path.stat()
    except OSError:
        return None
    return found.st_dev, found.st_ino
