"""Following a run that another process writes: what its store gained since the last look.

`arena watch` asks `Follower.poll` every half second or so. Each poll reads, in one read
transaction (a consistent picture), only the rows added since the previous poll: events, calls,
notes and messages by their row ids, outcomes likewise; the calls in flight and the keys of the
running matches are small and read whole. The first poll reads the events, calls and notes from
the start, so the figures of a run watched late are the figures of a run watched from its start.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from pydantic import TypeAdapter

from arena.contract.calls import CallRecord, CallStarted
from arena.contract.events import Event
from arena.contract.messages import Message
from arena.contract.runs import RunReader

FOLLOWED_EVENTS = ("match_started", "round_closed", "turn_failed", "match_ended", "match_failed", "match_interrupted")
"""The events a follower reads (the others are the transcript's business)."""

_event = TypeAdapter(Event)
_CALL_COLUMNS = ("match", "seat", "round", "attempt", "agent", "backend", "model", "prompt_tokens",
                 "completion_tokens", "cost", "latency", "cached", "retries", "error")
_FLIGHT_COLUMNS = ("token", "match", "seat", "round", "attempt", "agent", "backend", "model")


class Note(NamedTuple):
    """A fact about an endpoint the run said once (e.g. the output mode it fell back to)."""

    agent: str | None
    endpoint: str | None
    topic: str
    text: str


class Outcome(NamedTuple):
    seat: str
    agent: str
    role: str
    payoff: float


@dataclass
class Changes:
    """What one poll found."""

    planned: int = 0
    facts: list[tuple[float, Event | CallRecord | CallStarted | Note]] = field(default_factory=list)
    """Events, ended calls, started calls and notes, each with the time the store wrote it, in time order."""
    gone: list[str] = field(default_factory=list)
    """Tokens of calls no longer in flight (their records are among the facts of this poll or an earlier one)."""
    messages: list[tuple[str, Message]] = field(default_factory=list)
    outcomes: dict[str, tuple[str, list[Outcome]]] = field(default_factory=dict)
    """Newly finished matches: key -> (group, each seat's outcome)."""
    running: set[str] = field(default_factory=set)
    """Keys of the matches the store has as running now."""


class Follower:
    """Incremental reads of one run store. ``skip_kinds``: message kinds not worth reading (the
    rules every match opens with, the prompts each turn repeats)."""

    def __init__(self, store: RunReader, first_messages: int = 8, skip_kinds: tuple[str, ...] = ("rules", "prompt")):
        self.store = store
        self.db: sqlite3.Connection = store.db
        self.first_messages = first_messages
        self.skip_kinds = skip_kinds
        self._marks = {"events": 0, "calls": 0, "notes": 0, "messages": 0, "outcomes": 0}
        self._flying: set[str] = set()
        self._first = True
        # the highest row id of messages and events, read where their rows are: behind format 8's views
        # (arena.store.texts) SQLite would scan every row for it, at every poll
        stored = {name for (name,) in self.db.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'")}
        self._last = {view: f"SELECT COALESCE(MAX(rowid), ?) FROM {table if table in stored else view}"
                      for view, table in (("messages", "posted"), ("events", "happened"))}

    def wait_for_run(self, timeout: float = 10.0) -> dict[str, Any]:
        """The run row; a run that is just starting may not have written it yet."""
        deadline = time.monotonic() + timeout
        while True:
            info = self.store.run_info()
            if info or time.monotonic() > deadline:
                return info
            time.sleep(0.05)

    def poll(self) -> Changes:
        db, marks, now = self.db, self._marks, time.time()
        changes = Changes()
        skip = ",".join("?" * len(self.skip_kinds)) or "''"
        db.execute("BEGIN")
        try:
            changes.planned = db.execute("SELECT planned FROM run WHERE id = 1").fetchone()[0]
            facts: list[tuple[float, int, Any]] = []
            rows = db.execute(
                f"SELECT rowid, body, at FROM events WHERE rowid > ? AND type IN ({','.join('?' * len(FOLLOWED_EVENTS))}) "
                "ORDER BY rowid", (marks["events"], *FOLLOWED_EVENTS)).fetchall()
            facts += [(at or now, 0, _event.validate_json(body)) for _, body, at in rows]
            marks["events"] = db.execute(self._last["events"], (marks["events"],)).fetchone()[0]

            rows = db.execute(f"SELECT id, {', '.join(c if c != 'match' else 'match_key' for c in _CALL_COLUMNS)}, at "
                              "FROM calls WHERE id > ? ORDER BY id", (marks["calls"],)).fetchall()
            for row in rows:
                values = dict(zip(_CALL_COLUMNS, row[1:-1]))
                values["cached"] = bool(values["cached"])
                values["retries"] = values["retries"] or 0
                values["latency"] = values["latency"] or 0.0
                facts.append((row[-1] or now, 1, CallRecord(**values)))
            if rows:
                marks["calls"] = rows[-1][0]

            flying = db.execute("SELECT token, match_key, seat, round, attempt, agent, backend, model, started "
                                "FROM calls_in_flight").fetchall()
            for row in flying:
                if row[0] not in self._flying:
                    facts.append((row[-1] or now, 2, CallStarted(**dict(zip(_FLIGHT_COLUMNS, row[:-1])))))
            tokens = {row[0] for row in flying}
            changes.gone = sorted(self._flying - tokens)
            self._flying = tokens

            rows = db.execute("SELECT id, agent, endpoint, topic, text, at FROM notes WHERE id > ? ORDER BY id",
                              (marks["notes"],)).fetchall()
            facts += [(at or now, 3, Note(agent, endpoint, topic, text)) for _, agent, endpoint, topic, text, at in rows]
            if rows:
                marks["notes"] = rows[-1][0]

            columns = "m.rowid, m.match_key, m.idx, m.round, m.sender, m.recipients, m.kind, m.content, m.shown"
            if self._first:  # the feed starts with the last few messages of the matches in play
                rows = db.execute(
                    f"SELECT {columns} FROM messages m JOIN matches x ON x.key = m.match_key "
                    f"WHERE x.status = 'running' AND m.kind NOT IN ({skip}) ORDER BY m.rowid DESC LIMIT ?",
                    (*self.skip_kinds, self.first_messages)).fetchall()[::-1]
                marks["messages"] = db.execute(self._last["messages"], (0,)).fetchone()[0]
            else:
                rows = db.execute(f"SELECT {columns} FROM messages m WHERE m.rowid > ? AND m.kind NOT IN ({skip}) "
                                  "ORDER BY m.rowid", (marks["messages"], *self.skip_kinds)).fetchall()
                marks["messages"] = db.execute(self._last["messages"], (marks["messages"],)).fetchone()[0]
            changes.messages = [
                (key, Message(index=idx, round=rnd, sender=sender, recipients=tuple(json.loads(rcpt)), kind=kind,
                              content=content, shown=shown))
                for _, key, idx, rnd, sender, rcpt, kind, content, shown in rows
            ]

            # a truncated match's scores are kept, but like the results, the running leaderboard leaves them out
            rows = db.execute("SELECT o.rowid, o.match_key, x.grp, o.seat, o.agent, o.role, o.payoff FROM outcomes o "
                              "JOIN matches x ON x.key = o.match_key WHERE o.rowid > ? AND x.status = 'finished' "
                              "ORDER BY o.rowid", (marks["outcomes"],)).fetchall()
            for _, key, group, seat, agent, role, payoff in rows:
                changes.outcomes.setdefault(key, (group, []))[1].append(Outcome(seat, agent, role, payoff))
            if rows:
                marks["outcomes"] = rows[-1][0]

            changes.running = {key for (key,) in db.execute("SELECT key FROM matches WHERE status = 'running'")}
        finally:
            db.execute("COMMIT")
        facts.sort(key=lambda fact: (fact[0], fact[1]))  # stable: each table keeps its own order within a time
        changes.facts = [(at, item) for at, _, item in facts]
        self._first = False
        return changes
