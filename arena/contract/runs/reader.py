"""Reading a finished run (or one being written): ``open_run(path)`` gives a ``RunReader``.

Any plugin may read a run through it (a replay backend, a referee that re-judges recorded answers)
without knowing the store's tables. Nothing is written: the store is opened in SQLite's read-only
mode. Every reader streams from a cursor, in the plan's order (``position``) whatever order the
matches finished in; a full record is built only for the match asked for. Commands that read a run
(show, export, rank, report, watch) use it too, and the run's writer reads through one on its own
connection (``RunStore.read``).
"""

from __future__ import annotations

import json
import os
import socket
import sqlite3
from collections.abc import Iterator
from functools import lru_cache
from itertools import groupby
from operator import itemgetter
from pathlib import Path
from typing import Any

from pydantic import TypeAdapter

from arena.contract.calls import CallRecord
from arena.contract.capabilities import Review
from arena.contract.events import Event, MessagePosted, SeatInfo
from arena.contract.messages import REFEREE, Message
from arena.contract.records import KEPT, EventLog, KeyScheme, MatchRecord, MatchSpec
from arena.contract.runs.opening import open_readonly
from arena.contract.runs.schema import (OLD_KEY_SCHEME, EventRow, MatchRow, MessageRow, ScoreRow, StoredTranscript,
                                        Transcript, TurnRow)
from arena.contract.summaries import FinalNotice

_events = TypeAdapter(Event)


def open_run(path: str | Path) -> "RunReader":
    """The run in the folder ``path`` (or the run.sqlite file ``path``), read-only. A folder that holds
    no run, a damaged store, one of a newer format or one this user may not read raises a
    ``StoreError`` that says so in a sentence. Close it, or use it as a context manager."""
    run_dir, db = open_readonly(path)
    return RunReader(run_dir, db, owner=True)


class RunReader:
    """Read-only access to one run store. ``db`` is its SQLite connection; a reader made by
    ``open_run`` owns it and closes it, one the writer lends (``RunStore.read``) does not."""

    def __init__(self, run_dir: Path, db: sqlite3.Connection, owner: bool = False):
        self.run_dir = run_dir
        self.db = db
        self._owner = owner

    def close(self) -> None:
        if self._owner:
            self.db.close()

    def __enter__(self) -> "RunReader":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def scenario(self) -> str:
        """The scenario the run was started with, as its YAML text."""
        return self.run_info().get("scenario", "")

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

    def finished_keys(self) -> set[str]:
        """The matches a resume keeps: finished, or cut at max_rounds (played again, they would be cut again)."""
        marks = ",".join("?" * len(KEPT))
        return {k for (k,) in self.db.execute(f"SELECT key FROM matches WHERE status IN ({marks})", KEPT)}

    # -- matches -------------------------------------------------------------------
    _MATCH = "m.key, m.grp, m.repeat, m.game, m.status, m.spec, m.seats, m.params, m.rounds, m.error"

    def matches(self, status: str | None = None, key: str | None = None, group: str | None = None) -> Iterator[MatchRow]:
        """The run's matches (those of one status, one entry, or one key), with their payoffs and
        without their transcripts."""
        where, args = _where(status, key, group)
        # The matches with payoffs, then those without: not one LEFT JOIN, because SQLite cannot look a
        # view made of joins up by key on the right of a LEFT JOIN; it would build every outcome of the
        # run for each match asked for, and a resume, which asks for each, would grow with the square.
        unscored = f"{where} AND" if where else " WHERE"
        cursor = self.db.execute(
            f"SELECT {self._MATCH}, o.seat, o.payoff, m.position FROM matches m JOIN outcomes o ON o.match_key = m.key"
            f"{where} UNION ALL SELECT {self._MATCH}, NULL, NULL, m.position FROM matches m{unscored} NOT EXISTS "
            "(SELECT 1 FROM outcomes o WHERE o.match_key = m.key) ORDER BY 13, 1, 11", args + args)
        for _, rows in groupby(cursor, itemgetter(0)):
            rows = list(rows)
            key_, group_, repeat, game, status_, spec, seats, params, rounds, error = rows[0][:10]
            spec = json.loads(spec)  # in Python: a seed is 64 bits unsigned, more than SQLite's integers hold
            yield MatchRow(key_, group_, repeat, game, _status(status_), spec["seed"], _seats(seats),
                           json.loads(params) if params else dict(spec.get("params") or {}), rounds or 0, error,
                           {seat: payoff for *_, seat, payoff, _ in rows if seat is not None})

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

    def review_rows(self) -> list[Review]:
        """Every review of the run's finished matches, with its match and repeat, for peer rank."""
        return [Review._make(row) for row in self.db.execute(
            "SELECT r.question, r.a, r.b, r.reviewer, r.score, r.sample, COALESCE(r.shown_order, 0), m.repeat, "
            "r.difference, r.match_key FROM reviews r JOIN matches m ON m.key = r.match_key "
            "WHERE m.status = 'finished' ORDER BY m.position, r.seq")]

    def messages(self, kind: str | None = None, with_data: str | None = None, round: int | None = None,
                 key: str | None = None) -> Iterator[tuple[str, MessageRow]]:
        """(match key, message) for the messages of finished matches (of one kind, one round, one match),
        in the plan's order, each match's in the order they were posted; ``with_data``: only those whose
        data holds that field."""
        where, args = _where("finished", key, None)
        query = ("SELECT m.key, x.seq, x.idx, x.round, x.sender, x.recipients, x.kind, x.content, x.data, x.shown "
                 f"FROM matches m JOIN messages x ON x.match_key = m.key{where}")
        if kind is not None:
            query += " AND x.kind = ?"
            args.append(kind)
        if with_data is not None:
            query += " AND json_type(x.data, ?) IS NOT NULL"
            args.append("$." + with_data)
        if round is not None:
            query += " AND x.round = ?"
            args.append(round)
        for key_, *row in self.db.execute(query + " ORDER BY m.position, m.key, x.seq", args):
            yield key_, _message_row(row)

    def finished_games(self) -> list[str]:
        """The games of the run's finished matches, in the order the plan first plays them."""
        return [game for (game,) in self.db.execute(
            "SELECT game FROM matches WHERE status = 'finished' GROUP BY game ORDER BY MIN(position)")]

    def final_notices(self, fields: tuple[str, ...], game: str | None = None) -> Iterator[FinalNotice]:
        """Each finished match (of ``game``, when given) whose last referee notice with object data
        holds one of ``fields`` at its top level (a game's ``summary_fields``), with that data, in the
        plan's order. The text is searched for the fields first, so other matches' notices cost nothing."""
        if not fields:
            return
        of_game = "" if game is None else " AND m.game = ?"
        found = " OR ".join("instr(x.data, ?) > 0" for _ in fields)
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

    def spec(self, key: str) -> MatchSpec | None:
        """The specification of a match the store has, or None."""
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

    # -- what else the run kept --------------------------------------------------------
    def calls(self) -> Iterator[CallRecord]:
        """Every model call the run made (answered, failed or cached), in the order they ended."""
        names = ("match", "seat", "round", "attempt", "agent", "backend", "model", "prompt_tokens", "completion_tokens",
                 "cost", "latency", "cached", "retries", "error")
        for row in self.db.execute(
                "SELECT match_key, seat, round, attempt, agent, backend, model, prompt_tokens, completion_tokens, cost, "
                "latency, cached, retries, error FROM calls ORDER BY id"):
            yield CallRecord(**dict(zip(names, row)))

    def calls_in_flight(self) -> list[dict[str, Any]]:
        cursor = self.db.execute("SELECT match_key, seat, round, attempt, agent, backend, model, started "
                                 "FROM calls_in_flight ORDER BY started")
        names = ("match", "seat", "round", "attempt", "agent", "backend", "model", "started")
        return [dict(zip(names, row)) for row in cursor]

    def notes(self) -> list[dict[str, Any]]:
        cursor = self.db.execute("SELECT agent, endpoint, topic, text, at FROM notes ORDER BY id")
        return [dict(zip(("agent", "endpoint", "topic", "text", "at"), row)) for row in cursor]

    def stability(self) -> list[dict[str, Any]]:
        """The checks of until_stable entries. ``stopped``: why the entry stopped adding repeats ("stable",
        "max repeats", "budget", "outage", "limit"), None while it went on; ``width_limit``: the widest an
        interval could be, in payoff units (None in checks stored before format 7, whose stop is read from
        stable and done)."""
        cursor = self.db.execute("SELECT grp, repeats, tau, max_width, stable, done, stopped, width_limit FROM stability "
                                 "ORDER BY grp, repeats")
        names = ("group", "repeats", "tau", "max_width", "stable", "done", "stopped", "width_limit")
        rows = [dict(zip(names, row)) for row in cursor]
        for row in rows:
            if row["stopped"] is None and row["done"]:
                row["stopped"] = "stable" if row["stable"] else "max repeats"
        return rows


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
