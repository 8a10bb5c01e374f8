"""What a run store holds: its file's name, its format, its tables and columns, the rows it is read
back in, and the errors of opening one. This is the one place the store's layout is written down:
the writer (``arena.store``) makes its tables from it, and the reader (``arena.contract.runs``)
reads them by it, so a plugin that reads a finished run never copies a table or column name.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, NamedTuple

from arena.contract.errors import ArenaError
from arena.contract.events import SeatInfo
from arena.contract.records import MatchRecord

STORE_FILE = "run.sqlite"
SCENARIO_FILE = "scenario.yaml"

SCHEMA_VERSION = 9  # bump when the tables change; older stores are upgraded when they can be, else refused
UPGRADABLE = {2, 3, 4, 5, 6, 7, 8}  # versions whose tables are a subset of these: opening one adds what is missing
# columns added since format 2, added to older stores; a review's structure (format 5) is NULL in
# reviews stored before it, which peer rank reads as battles of their own, as it did then; the run's
# key scheme (format 6) is NULL in runs begun before it, whose keys name agents ("agents"); why a
# stability check stopped and its width limit (format 7) are NULL in checks made before it
ADDED_COLUMNS = {"messages": {"shown": "TEXT"},
                 "reviews": {"sample": "INTEGER", "shown_order": "INTEGER", "difference": "REAL"},
                 "run": {"key_scheme": "TEXT"},
                 "stability": {"stopped": "TEXT", "width_limit": "REAL"}}
OLD_KEY_SCHEME = "agents"  # what a run whose key_scheme is NULL has (arena.contract.records.KeyScheme)

SCHEMA = """
CREATE TABLE IF NOT EXISTS run (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    name TEXT NOT NULL, scenario TEXT NOT NULL, fingerprint TEXT NOT NULL, arena_version TEXT,
    created REAL, updated REAL, status TEXT NOT NULL, planned INTEGER NOT NULL DEFAULT 0,
    pid INTEGER, host TEXT, key_scheme TEXT
);
CREATE TABLE IF NOT EXISTS match_rows (
    key TEXT PRIMARY KEY, position INTEGER NOT NULL, grp TEXT NOT NULL, repeat INTEGER NOT NULL, game TEXT NOT NULL,
    spec TEXT NOT NULL, status TEXT NOT NULL, seats TEXT, params TEXT, rounds INTEGER,
    error TEXT, started REAL, ended REAL, spec_rest INTEGER
);
CREATE TABLE IF NOT EXISTS texts (
    id INTEGER PRIMARY KEY, hash BLOB NOT NULL UNIQUE, text TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS match_ids (
    id INTEGER PRIMARY KEY, key TEXT NOT NULL UNIQUE
);
CREATE TABLE IF NOT EXISTS posted (
    match INTEGER NOT NULL, seq INTEGER NOT NULL, idx INTEGER NOT NULL, round INTEGER NOT NULL,
    sender INTEGER NOT NULL, recipients INTEGER NOT NULL, kind INTEGER NOT NULL, content INTEGER NOT NULL, data INTEGER,
    shown TEXT, PRIMARY KEY (match, seq)
);
CREATE TABLE IF NOT EXISTS happened (
    match INTEGER NOT NULL, seq INTEGER NOT NULL, type INTEGER NOT NULL, body INTEGER NOT NULL, rest INTEGER, at REAL,
    PRIMARY KEY (match, seq)
);
CREATE TABLE IF NOT EXISTS seat_outcomes (
    match INTEGER NOT NULL, seat INTEGER NOT NULL, agent INTEGER NOT NULL, role INTEGER NOT NULL, payoff REAL NOT NULL,
    PRIMARY KEY (match, seat)
);
CREATE TABLE IF NOT EXISTS seat_metrics (
    match INTEGER NOT NULL, metric INTEGER NOT NULL, seat INTEGER NOT NULL, value REAL NOT NULL,
    PRIMARY KEY (match, metric, seat)
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
    stopped TEXT, width_limit REAL, PRIMARY KEY (grp, repeats)
);
CREATE TABLE IF NOT EXISTS sessions (
    id INTEGER PRIMARY KEY AUTOINCREMENT, started REAL NOT NULL, overrides TEXT NOT NULL, match_limit INTEGER
);
CREATE INDEX IF NOT EXISTS match_rows_status ON match_rows (status);
"""

# Format 8 stores each distinct text once (``texts``, found by a hash of it) and each match key once
# (``match_ids``): a message row (``posted``) and an event row (``happened``) hold their numbers. Rules
# and prompts go to every seat of every match, and scripted agents give the same replies: most of a
# run's text repeats. An event's body is stored without its opening match and type (the row has both),
# which is what makes most bodies repeat; a body that does not open with them as plain text is kept
# whole (it opens with "{", a shortened one with "," or "}"). Format 9 numbers the names too (a
# message's sender and kind, an event's type, an outcome's seat, agent and role, a metric's name and
# seat: texts like any other), keys outcomes and metrics by the match's number (``seat_outcomes``,
# ``seat_metrics``), and cuts an event's body in two (``body`` then ``rest``: arena.store.texts), and a
# match's specification (``match_rows``: its own part in ``spec``, the part its entry's matches share,
# settings and scrub list, in ``spec_rest``), each part stored once. The views ``matches``,
# ``messages``, ``events``, ``outcomes`` and ``metrics`` give the rows as the formats before stored
# them, under the same row ids, which is what every reader reads; a change made through ``matches``
# (a tool setting a status by hand) goes to its row. On the right of a LEFT JOIN, one of these views
# (a join itself) may not be looked up by key: SQLite can build its whole result for each outer row,
# and the query grows with the square of the run (a resume did, until ``Reader.matches`` read the rows
# that match with an inner JOIN and those that do not with NOT EXISTS). Check a new query's plan
# (EXPLAIN QUERY PLAN: MATERIALIZE once, or a SEARCH by key, not a SCAN per row).
VIEWS = """
CREATE VIEW IF NOT EXISTS matches AS
    SELECT m.rowid AS rowid, m.key AS key, m.position AS position, m.grp AS grp, m.repeat AS repeat, m.game AS game,
           m.spec || coalesce((SELECT text FROM texts WHERE id = m.spec_rest), '') AS spec, m.status AS status,
           m.seats AS seats, m.params AS params, m.rounds AS rounds, m.error AS error, m.started AS started,
           m.ended AS ended
    FROM match_rows m;
CREATE TRIGGER IF NOT EXISTS matches_changed INSTEAD OF UPDATE ON matches BEGIN
    UPDATE match_rows SET key = NEW.key, position = NEW.position, grp = NEW.grp, repeat = NEW.repeat, game = NEW.game,
        spec = CASE WHEN NEW.spec IS OLD.spec THEN spec ELSE NEW.spec END,
        spec_rest = CASE WHEN NEW.spec IS OLD.spec THEN spec_rest END, status = NEW.status, seats = NEW.seats,
        params = NEW.params, rounds = NEW.rounds, error = NEW.error, started = NEW.started, ended = NEW.ended
    WHERE rowid = OLD.rowid;
END;
CREATE VIEW IF NOT EXISTS messages AS
    SELECT p.rowid AS rowid, k.key AS match_key, p.seq AS seq, p.idx AS idx, p.round AS round, s.text AS sender,
           r.text AS recipients, t.text AS kind, c.text AS content, d.text AS data, p.shown AS shown
    FROM posted p JOIN match_ids k ON k.id = p.match JOIN texts s ON s.id = p.sender JOIN texts r ON r.id = p.recipients
    JOIN texts t ON t.id = p.kind JOIN texts c ON c.id = p.content LEFT JOIN texts d ON d.id = p.data;
CREATE VIEW IF NOT EXISTS events AS
    SELECT h.rowid AS rowid, k.key AS match_key, h.seq AS seq, t.text AS type,
           CASE WHEN substr(b.text, 1, 1) = '{' THEN b.text || coalesce(r.text, '')
                ELSE '{"match":"' || k.key || '","type":"' || t.text || '"' || b.text || coalesce(r.text, '') END AS body,
           h.at AS at
    FROM happened h JOIN match_ids k ON k.id = h.match JOIN texts t ON t.id = h.type JOIN texts b ON b.id = h.body
    LEFT JOIN texts r ON r.id = h.rest;
CREATE VIEW IF NOT EXISTS outcomes AS
    SELECT o.rowid AS rowid, k.key AS match_key, s.text AS seat, a.text AS agent, r.text AS role, o.payoff AS payoff
    FROM seat_outcomes o JOIN match_ids k ON k.id = o.match JOIN texts s ON s.id = o.seat JOIN texts a ON a.id = o.agent
    JOIN texts r ON r.id = o.role;
CREATE VIEW IF NOT EXISTS metrics AS
    SELECT x.rowid AS rowid, k.key AS match_key, n.text AS metric, s.text AS seat, x.value AS value
    FROM seat_metrics x JOIN match_ids k ON k.id = x.match JOIN texts n ON n.id = x.metric JOIN texts s ON s.id = x.seat;
"""

# the match, message, event, outcome and metric tables of formats 2 to 7 (matches, outcomes and metrics
# to 8), which an upgrade moves into the tables above
OLD_TABLES = """
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
"""

# each table's CREATE statement, by its name: a reader of an older format makes the ones it lacks
TABLES = {m.group(1): m.group(0)
          for m in re.finditer(r"CREATE TABLE IF NOT EXISTS (\w+) \(.*?\n\);", OLD_TABLES + SCHEMA, re.S)}

REVIEW_COLUMNS = "match_key, seq, question, a, b, reviewer, score, sample, shown_order, difference"


# -- the rows a store is read back in --------------------------------------------------------------
# Small typed tuples, one match (or one seat) at a time: the run's readers (results, rank, report,
# show, export, annotate, resume, plugins) take them from the store's cursors as they go, so none
# holds a run's records; a record, with its transcript, is built only for a match someone asks for.

class MatchRow(NamedTuple):
    """A match without its transcript: what a listing, the CSV export, the live leaderboard and a
    resume need of it. ``status`` is finished, truncated, failed or interrupted (a match left pending
    or running by a crash reads as interrupted); ``payoffs`` maps seat labels to the first metric."""

    key: str
    group: str
    repeat: int
    game: str
    status: str
    seed: int
    seats: tuple[SeatInfo, ...]
    params: dict[str, Any]
    rounds: int
    error: str | None
    payoffs: dict[str, float]


class ScoreRow(NamedTuple):
    """A finished match's figures under one metric, by seat label; a seat the referee did not score is missing."""

    key: str
    group: str
    repeat: int
    seats: tuple[SeatInfo, ...]
    scores: dict[str, float]

    @classmethod
    def of(cls, match: MatchRecord | MatchRow, metric: str | None = None) -> "ScoreRow":
        """The row the store gives for this match: its payoffs (``metric`` None), or one metric's figures."""
        if metric is None or (metric == "payoff" and not getattr(match, "metrics", None)):  # stores kept no metrics once
            scores = match.payoffs
        else:
            scores = match.metrics.get(metric, {})
        return cls(match.key, match.group, match.repeat, match.seats, scores)


class TurnRow(NamedTuple):
    """One seat's turns in one finished match: how many it took (``turns``; valid or defaulted), and
    its troubled ones: invalid replies, timeouts, defaulted turns."""

    key: str
    group: str
    agent: str
    role: str
    invalid: int
    timeouts: int
    defaulted: int
    turns: int = 0


class MessageRow(NamedTuple):
    """A message as stored; ``seq`` is its place among the match's events."""

    seq: int
    index: int
    round: int
    sender: str
    recipients: tuple[str, ...]
    kind: str
    content: str
    data: dict[str, Any] | None
    shown: str | None


class EventRow(NamedTuple):
    """An event other than a posted message, its body as plain JSON data."""

    seq: int
    type: str
    body: dict[str, Any]


class Transcript(NamedTuple):
    """One match's messages and events, as the store keeps them."""

    match: MatchRow
    messages: list[MessageRow]
    events: list[EventRow]


class StoredTranscript(NamedTuple):
    """One match's messages and events as their rows are stored, for readers of a whole run: each
    message as (match key, round, sender, recipients as JSON, kind, content, data as JSON or None,
    shown), each event as (match key, type, body as JSON), in the order they happened."""

    match: MatchRow
    messages: list[tuple[str, int, str, str, str, str, str | None, str | None]]
    events: list[tuple[str, str, str]]


# -- what can go wrong with a run directory, worded for the person who typed the command ------------

class StoreError(ArenaError):
    """The run directory cannot be used as asked; the message says what to do."""


class DamagedStore(StoreError):
    """A store file that SQLite cannot read: cut short, overwritten, or not a database at all."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(
            f"{path} is damaged ({reason}) and cannot be read; restore it from a copy, or run `arena run` "
            f"on it with --force-new, which sets it aside as {path.name}.damaged-<time> and starts the run afresh"
        )


class NoRunYet(StoreError):
    """A store file with nothing in it: left by a version that made the store in place, stopped as it began."""

    def __init__(self, path: Path):
        self.path = path
        super().__init__(f"{path.parent} holds no run yet ({path.name} was left empty by a run stopped as it "
                         "started); `arena run` starts the run afresh in it")


class OtherFormat(StoreError):
    """A store written by a version of Arena whose format this one does not read."""

    def __init__(self, path: Path, version: int, current: int):
        self.path = path
        self.version = version
        super().__init__(
            f"{path} was written by another version of Arena (store format {version}, this one reads "
            f"{current}); export it with that version, or start a new run in another directory"
        )


class NotAFolder(StoreError):
    """A file where a run directory was asked for: most often the scenario file."""

    def __init__(self, path: Path):
        self.path = path
        scenario = path.suffix.lower() in (".yaml", ".yml")
        hint = f"; to play that scenario: `arena run {path}`" if scenario else ""
        super().__init__(f"{path} is a file, not a folder: give the run directory, the folder `arena run` made "
                         f"(`arena runs` lists them){hint}")


class NotPermitted(StoreError):
    """A run directory or store this user may not enter, read or write: not damaged, and left as it was."""

    def __init__(self, path: Path, doing: str = "read", advice: str = ""):
        self.path = path
        advice = advice or "run the command as a user who may, or ask its owner to grant access"
        super().__init__(f"{path}: not permitted: this user may not {doing} it (it is not damaged, and nothing was "
                         f"changed); {advice}")
