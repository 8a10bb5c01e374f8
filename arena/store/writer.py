"""The run store: one SQLite file per run directory, written as the run goes.

Messages and events are written as they happen (committed when a round
closes), so another process can follow a run; a match's outcome is written in
one transaction when it ends, so a crash loses at most the matches in flight.
Unfinished matches (left by a crash, or interrupted by a backend that was down)
are wiped and played again on resume.
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
import time
from collections.abc import Iterator
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from arena import __version__
from arena.contract.events import Event, MatchStarted, MessagePosted, RoundClosed, SeatInfo
from arena.contract.calls import CallRecord, CallStarted
from arena.contract.errors import ArenaError
from arena.contract.records import EventLog, MatchRecord, MatchSpec
from arena.contract.messages import Message
from arena.store.rows import EventRow, MatchRow, MessageRow, ScoreRow, Transcript, TurnRow

STORE_FILE = "run.sqlite"
SCHEMA_VERSION = 4  # bump when the tables change; older stores are upgraded when they can be, else refused
UPGRADABLE = {2, 3}  # versions whose tables are a subset of these: opening one adds what is missing
ADDED_COLUMNS = {"messages": {"shown": "TEXT"}}  # columns added since format 2, added to older stores
SCENARIO_FILE = "scenario.yaml"

_events = TypeAdapter(Event)

SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    name TEXT NOT NULL, scenario TEXT NOT NULL, fingerprint TEXT NOT NULL, arena_version TEXT,
    created REAL, updated REAL, status TEXT NOT NULL, planned INTEGER NOT NULL DEFAULT 0,
    pid INTEGER, host TEXT
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
    reviewer TEXT NOT NULL, score INTEGER NOT NULL, PRIMARY KEY (match_key, seq)
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
CREATE INDEX IF NOT EXISTS matches_status ON matches (status);
"""


class StoreError(ArenaError):
    """The run directory cannot be used as asked; the message says what to do."""


def _connect(path: Path) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA synchronous=NORMAL")  # in WAL mode: durable at checkpoints, never corrupt
    db.execute("PRAGMA busy_timeout=30000")
    version = db.execute("PRAGMA user_version").fetchone()[0]
    has_tables = db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
    if has_tables and version in UPGRADABLE:
        alter = ""
        for table, columns in ADDED_COLUMNS.items():
            present = {row[1] for row in db.execute(f"PRAGMA table_info({table})")}
            alter += "".join(f"ALTER TABLE {table} ADD COLUMN {c} {kind}; " for c, kind in columns.items() if c not in present)
        db.executescript(f"BEGIN; {SCHEMA} {alter} PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;")
        version = SCHEMA_VERSION
    if has_tables and version != SCHEMA_VERSION:
        db.close()
        raise StoreError(
            f"{path} was written by another version of Arena (store format {version}, this one reads "
            f"{SCHEMA_VERSION}); export it with that version, or start a new run in another directory"
        )
    return db


class RunStore:
    def __init__(self, run_dir: Path, db: sqlite3.Connection):
        self.run_dir = run_dir
        self.db = db
        self._seq: dict[str, int] = {}
        self._in_tx = False
        self._last_commit = time.monotonic()

    # -- opening -------------------------------------------------------------------
    @classmethod
    def create_or_resume(cls, run_dir: str | Path, name: str, scenario_text: str, fingerprint: str, force_new: bool = False) -> "RunStore":
        run_dir = Path(run_dir)
        run_dir.mkdir(parents=True, exist_ok=True)
        path = run_dir / STORE_FILE
        if path.exists():
            problem = None
            try:
                db = _connect(path)
                row = db.execute("SELECT fingerprint FROM run WHERE id = 1").fetchone()
                db.close()
                if row and row[0] != fingerprint:
                    problem = (
                        f"{run_dir} holds a run of a different version of this scenario (seed, agents, games, "
                        "tournament or match settings changed since it started). Resume it with the scenario it "
                        "started with (a copy is in its scenario.yaml), choose another --run-dir, or pass "
                        "--force-new to set the old run aside and start afresh."
                    )
            except StoreError as exc:
                problem = f"{exc}; or pass --force-new to set it aside and start afresh"
            if problem is not None and not force_new:
                raise StoreError(problem)
            if force_new:  # the old run is renamed, never deleted; the response cache stays
                stamp = time.strftime("%Y%m%d-%H%M%S")
                n = 0
                while (run_dir / f"{STORE_FILE}.old-{stamp}{'-' + str(n) if n else ''}").exists():
                    n += 1
                aside = f"{STORE_FILE}.old-{stamp}{'-' + str(n) if n else ''}"
                for suffix in ("", "-wal", "-shm"):
                    old = run_dir / (STORE_FILE + suffix)
                    if old.exists():
                        old.rename(run_dir / f"{aside}{suffix}")
        store = cls(run_dir, _connect(path))
        # tables, format version and run row in one transaction: a reader never sees half a store
        store.db.executescript(f"BEGIN; {SCHEMA} PRAGMA user_version = {SCHEMA_VERSION};")
        now = time.time()
        store.db.execute(
            "INSERT INTO run (id, name, scenario, fingerprint, arena_version, created, updated, status, pid, host) "
            "VALUES (1, ?, ?, ?, ?, ?, ?, 'running', ?, ?) "
            "ON CONFLICT (id) DO UPDATE SET status = 'running', updated = excluded.updated, pid = excluded.pid, host = excluded.host",
            (name, scenario_text, fingerprint, __version__, now, now, os.getpid(), socket.gethostname()),
        )
        store.db.execute("COMMIT")
        (run_dir / SCENARIO_FILE).write_text(scenario_text, encoding="utf-8")
        return store

    @classmethod
    def open(cls, run_dir: str | Path) -> "RunStore":
        run_dir = Path(run_dir)
        path = run_dir / STORE_FILE
        if not path.exists():
            raise StoreError(f"{run_dir} is not a run directory (no {STORE_FILE} in it)")
        return cls(run_dir, _connect(path))

    def close(self) -> None:
        self.db.close()

    # -- the run -------------------------------------------------------------------
    def run_info(self) -> dict[str, Any]:
        try:
            cursor = self.db.execute("SELECT * FROM run WHERE id = 1")
        except sqlite3.OperationalError:  # the writer has created the file but not yet its tables
            return {}
        row = cursor.fetchone()
        return dict(zip([c[0] for c in cursor.description], row)) if row else {}

    def status(self) -> str:
        """The stored status, except that a 'running' run whose process is gone is 'stopped (resumable)'."""
        info = self.run_info()
        status = info.get("status", "starting")
        if status == "running" and not _alive(info.get("pid"), info.get("host")):
            return "stopped (resumable)"
        return status

    def set_status(self, status: str) -> None:
        self.db.execute("UPDATE run SET status = ?, updated = ? WHERE id = 1", (status, time.time()))

    def set_planned(self, planned: int) -> None:
        self.db.execute("UPDATE run SET planned = ?, updated = ? WHERE id = 1", (planned, time.time()))

    def counts(self) -> dict[str, int]:
        try:
            return dict(self.db.execute("SELECT status, COUNT(*) FROM matches GROUP BY status").fetchall())
        except sqlite3.OperationalError:
            return {}

    # -- matches -------------------------------------------------------------------
    def finished_keys(self) -> set[str]:
        return {k for (k,) in self.db.execute("SELECT key FROM matches WHERE status = 'finished'")}

    COMMIT_EVERY = 0.25  # seconds: how fresh a watcher's view is, against the cost of a commit per round

    def prepare(self, spec: MatchSpec, position: int) -> None:
        """Register a match about to be played, wiping whatever a crashed attempt left.

        ``position`` is the match's place in the tournament's plan, the order in
        which records are read back whatever the order they finished in."""
        self._begin()  # committed with whatever is written next; a crash before that leaves nothing to undo
        for table in ("messages", "events", "outcomes", "metrics", "reviews"):  # calls stay: they were paid for
            self.db.execute(f"DELETE FROM {table} WHERE match_key = ?", (spec.key,))
        self.db.execute(
            "INSERT INTO matches (key, position, grp, repeat, game, spec, status) VALUES (?, ?, ?, ?, ?, ?, 'pending') "
            "ON CONFLICT (key) DO UPDATE SET status = 'pending', seats = NULL, rounds = NULL, error = NULL, "
            "started = NULL, ended = NULL",
            (spec.key, position, spec.group, spec.repeat, spec.game, spec.model_dump_json()),
        )
        self._seq[spec.key] = 0

    def record_event(self, event: Event) -> None:
        """An event sink: called by the match loop for everything that happens."""
        key = event.match
        seq = self._seq.get(key, 0)
        self._seq[key] = seq + 1
        self._begin()
        if isinstance(event, MatchStarted):
            self.db.execute(
                "UPDATE matches SET status = 'running', started = ?, seats = ? WHERE key = ?",
                (time.time(), json.dumps([s.model_dump() for s in event.seats]), key),
            )
        if isinstance(event, MessagePosted):
            m = event.message
            self.db.execute(
                "INSERT INTO messages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (key, seq, m.index, m.round, m.sender, json.dumps(m.recipients), m.kind, m.content,
                 None if m.data is None else json.dumps(m.data), m.shown),
            )
        else:
            self.db.execute("INSERT INTO events VALUES (?, ?, ?, ?, ?)", (key, seq, event.type, event.model_dump_json(), time.time()))
        if isinstance(event, RoundClosed) and time.monotonic() - self._last_commit >= self.COMMIT_EVERY:
            self._commit()

    def finish(self, record: MatchRecord) -> None:
        """The outcome, in one transaction with the match's last events."""
        self._begin()
        for seat in record.seats:
            if record.status == "finished" and seat.label in record.payoffs:
                self.db.execute(
                    "INSERT INTO outcomes VALUES (?, ?, ?, ?, ?)",
                    (record.key, seat.label, seat.agent, seat.role, record.payoffs[seat.label]),
                )
        for metric, values in record.metrics.items():
            self.db.executemany("INSERT INTO metrics VALUES (?, ?, ?, ?)",
                                [(record.key, metric, seat, value) for seat, value in values.items()])
        for seq, (question, a, b, reviewer, score) in enumerate(record.reviews):
            self.db.execute("INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?)", (record.key, seq, question, a, b, reviewer, score))
        self.db.execute(
            "UPDATE matches SET status = ?, rounds = ?, error = ?, params = ?, ended = ?, seats = ? WHERE key = ?",
            (record.status, record.rounds, record.error, json.dumps(record.params), time.time(),
             json.dumps([s.model_dump() for s in record.seats]), record.key),
        )
        self._commit()
        self._seq.pop(record.key, None)

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

    def record_note(self, agent: str, endpoint: str, topic: str, text: str) -> None:
        self._begin()
        self.db.execute("INSERT INTO notes (agent, endpoint, topic, text, at) VALUES (?, ?, ?, ?, ?)",
                        (agent, endpoint, topic, text, time.time()))
        self._commit()

    def notes(self) -> list[dict[str, Any]]:
        cursor = self.db.execute("SELECT agent, endpoint, topic, text, at FROM notes ORDER BY id")
        return [dict(zip(("agent", "endpoint", "topic", "text", "at"), row)) for row in cursor]

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

    def record_stability(self, group: str, repeats: int, tau: float | None, max_width: float, stable: bool, done: bool) -> None:
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
        """The seats of finished matches that had invalid replies, timeouts or defaulted turns, with
        how many of each. A referee's judge sits in no seat and is left out."""
        where, args = _where("finished", None, group)
        failure = "json_extract(e.body, '$.failure')"
        cursor = self.db.execute(
            f"SELECT e.match_key, m.grp, m.seats, json_extract(e.body, '$.seat') AS seat, "
            f"SUM(e.type = 'turn_failed' AND {failure} = 'invalid'), SUM(e.type = 'turn_failed' AND {failure} = 'timeout'), "
            f"SUM(e.type = 'action') FROM matches m JOIN events e ON e.match_key = m.key{where} AND "
            f"((e.type = 'turn_failed' AND {failure} IN ('invalid', 'timeout')) "
            "OR (e.type = 'action' AND json_extract(e.body, '$.defaulted'))) GROUP BY e.match_key, seat", args)
        for key, group_, seats, seat, invalid, timeouts, defaulted in cursor:
            found = next((s for s in _seats(seats) if s.label == seat), None)
            if found is not None:
                yield TurnRow(key, group_, found.agent, found.role, invalid, timeouts, defaulted)

    def metric_names(self) -> dict[str, list[str]]:
        """Each entry's metrics in the order its referees report them; the first is the payoff."""
        names: dict[str, dict[str, None]] = {}
        for group, metric in self.db.execute(
                "SELECT m.grp, x.metric FROM matches m LEFT JOIN metrics x ON x.match_key = m.key "
                "WHERE m.status = 'finished' ORDER BY m.position, m.key, x.rowid"):
            names.setdefault(group, {})[metric or "payoff"] = None
        return {group: list(found) for group, found in names.items()}

    def review_rows(self) -> list[tuple[str, str, str, str, int]]:
        """Every review tuple (question, a, b, reviewer, score) of the run's finished matches, for peer rank."""
        return self.db.execute(
            "SELECT r.question, r.a, r.b, r.reviewer, r.score FROM reviews r JOIN matches m ON m.key = r.match_key "
            "WHERE m.status = 'finished' ORDER BY m.position, r.seq"
        ).fetchall()

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

    def transcript(self, key: str) -> Transcript | None:
        """One match's messages and events, as stored."""
        match = self.match(key)
        return None if match is None else self._transcript(match)

    def transcripts(self, status: str | None = None) -> Iterator[Transcript]:
        """Every match's transcript (or those of one status), one at a time, in the plan's order."""
        for match in self.matches(status):
            yield self._transcript(match)

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
        reviews = [tuple(row) for row in self.db.execute(
            "SELECT question, a, b, reviewer, score FROM reviews WHERE match_key = ? ORDER BY seq", (key,))]
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

    def override_review(self, match_key: str, reviewer: str, a: str, b: str, question: str, score: int) -> bool:
        """Replace a reviewer's verdicts on a pair (either order) in one match by one verdict, from
        ``a``'s side (score -1: a better). False when there was nothing to replace."""
        with_rows = self.db.execute(
            "SELECT COUNT(*) FROM reviews WHERE match_key = ? AND reviewer = ? AND ((a = ? AND b = ?) OR (a = ? AND b = ?))",
            (match_key, reviewer, a, b, b, a)).fetchone()[0]
        if not with_rows:
            return False
        self._begin()
        self.db.execute("DELETE FROM reviews WHERE match_key = ? AND reviewer = ? AND ((a = ? AND b = ?) OR (a = ? AND b = ?))",
                        (match_key, reviewer, a, b, b, a))
        last = self.db.execute("SELECT COALESCE(MAX(seq), -1) FROM reviews WHERE match_key = ?", (match_key,)).fetchone()[0]
        self.db.execute("INSERT INTO reviews VALUES (?, ?, ?, ?, ?, ?, ?)", (match_key, last + 1, question, a, b, reviewer, score))
        self._commit()
        return True

    def spec(self, key: str) -> MatchSpec | None:
        """The specification of a match the store has registered, or None."""
        row = self.db.execute("SELECT spec FROM matches WHERE key = ?", (key,)).fetchone()
        return MatchSpec.model_validate_json(row[0]) if row else None

    def match_keys(self) -> list[tuple[str, str]]:
        return self.db.execute("SELECT key, status FROM matches ORDER BY position").fetchall()

    # -- transactions --------------------------------------------------------------
    def _begin(self) -> None:
        if not self._in_tx:
            self.db.execute("BEGIN")
            self._in_tx = True

    def _commit(self) -> None:
        if self._in_tx:
            self.db.execute("COMMIT")
            self._in_tx = False
        self._last_commit = time.monotonic()

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
    return stored if stored in ("finished", "failed", "interrupted") else "interrupted"


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
    return True


def run_dirs(output: str | Path) -> Iterator[Path]:
    root = Path(output)
    if (root / STORE_FILE).exists():
        yield root
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if (child / STORE_FILE).exists():
                yield child
