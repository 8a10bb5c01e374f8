"""Each distinct text stored once: the numbers a message or event row refers to its texts by.

A run posts the same rules and prompts to every seat of every match, and its agents often give the
same replies: before format 8, nine in ten of a public goods run's message texts were copies. The
writer now keeps each text once in ``texts``, found again by a hash of it, and each match key once in
``match_ids``; the message and event rows hold their numbers, and the views ``messages`` and
``events`` (``arena.contract.runs.schema``) read them back as they were. Format 9 does the same for
the names rows repeat (senders, kinds, event types, seats, agents, roles, metrics), for the parts of
event bodies that repeat (``event_parts``) and for the part of a match's spec its entry shares
(``spec_parts``), and keys outcomes and metrics by the match's number. A text is written in the
transaction of the first row that refers to it, before that row: a reader never finds a row whose
text is not there yet.
"""

from __future__ import annotations

import hashlib
import re
import sqlite3
from functools import lru_cache

# What a body may open with for the views to give it back byte for byte: the match key and event type
# as the serializer writes them, which for text without quotes, backslashes or control characters is
# the text itself between quotes (the view puts it back that way).
_PLAIN = re.compile(r'[^"\\\x00-\x1f]*')


def text_hash(text: str) -> bytes:
    """A text's address: 16 bytes of BLAKE2b, for which two different texts of one run never meet."""
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).digest()


def event_rest(key: str, type_: str, body: str) -> str:
    """An event's JSON without its opening match and type, which the row holds and the view puts back;
    the body whole when it does not open with them as the view writes them."""
    opening = _opening(key, type_)
    if opening is not None and body.startswith(opening) and body[len(opening):len(opening) + 1] in (",", "}"):
        return body[len(opening):]
    return body


@lru_cache(maxsize=4096)  # a run's matches each have a few event types: made once, not at every event
def _opening(key: str, type_: str) -> str | None:
    if _PLAIN.fullmatch(key) and _PLAIN.fullmatch(type_):
        return f'{{"match":"{key}","type":"{type_}"'
    return None


# The fields an event's rest is cut after, when they are plain: in a turn's action the round and the
# seat, in a match's start its game and seed. What follows (the action and reply, the seats) repeats
# across rounds, seats and matches, and is then stored once; the view joins the two parts again.
_HEAD = re.compile(r'(?:,"(?:[^"\\]|\\.)*":(?:"(?:[^"\\]|\\.)*"|[^,"{}\[\]]+)){1,2}')
# Where a match's specification is cut: what follows (settings, referees, the scrub list) is the same
# for every match of an entry. The text can occur nowhere else but as the field (a quote inside a JSON
# string is escaped), or as a key of the params before it, where cutting is still exact, only less shared.
_SPEC_REST = ',"shuffle_seats":'


def event_parts(key: str, type_: str, body: str) -> tuple[str, str | None]:
    """An event's JSON as two texts, stored once each: its rest (``event_rest``) cut after its first
    plain fields, and what follows them (None: not cut); the view gives back their concatenation."""
    rest = event_rest(key, type_, body)
    if rest[:1] == ",":
        head = _HEAD.match(rest)
        if head is not None and head.end() < len(rest):
            return rest[:head.end()], rest[head.end():]
    return rest, None


def spec_parts(spec: str) -> tuple[str, str | None]:
    """A match's specification as its own part and a part shared by its entry's matches (None: not cut)."""
    cut = spec.find(_SPEC_REST)
    return (spec[:cut], spec[cut:]) if cut > 0 else (spec, None)


class Interned:
    """The numbers of the texts and match keys one writer's connection has stored or met, so that a
    text repeated across a run is looked up in the store once, not at every row; those of a batch of
    rows it has not met are stored and looked up together, a statement for all of them. Forgotten when
    a transaction is rolled back (numbers given in it are gone), and when it grows past its bounds.
    Names (a message's sender and kind, an event's type, a seat, agent, role or metric) are texts too."""

    MAX_CHARS = 32 << 20  # the texts remembered, in characters: a run of long answers cannot fill memory
    MAX_KEYS = 1 << 16
    _PART = 500  # numbers looked up per statement (SQLite takes at most 32,766 parameters)

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._texts: dict[str, int] = {}
        self._chars = 0
        self._matches: dict[str, int] = {}

    def clear(self) -> None:
        self._texts.clear()
        self._chars = 0
        self._matches.clear()

    def messages(self, rows: list[tuple]) -> list[tuple]:
        """Message rows as ``EventRows`` makes them (texts in them) as ``posted`` stores them (numbers)."""
        self._learn_texts({text for row in rows for text in (row[4], row[5], row[6], row[7], row[8]) if text is not None})
        self._learn_matches({row[0] for row in rows})
        texts, matches = self._texts, self._matches
        return [(matches[key], seq, idx, rnd, texts[sender], texts[recipients], texts[kind], texts[content],
                 None if data is None else texts[data], shown)
                for key, seq, idx, rnd, sender, recipients, kind, content, data, shown in rows]

    def events(self, rows: list[tuple]) -> list[tuple]:
        """Event rows as ``EventRows`` makes them as ``happened`` stores them."""
        parts = [event_parts(key, type_, body) for key, _, type_, body, _ in rows]
        self._learn_texts({text for pair in parts for text in pair if text is not None} | {row[2] for row in rows})
        self._learn_matches({row[0] for row in rows})
        texts, matches = self._texts, self._matches
        return [(matches[key], seq, texts[type_], texts[head], None if tail is None else texts[tail], at)
                for (key, seq, type_, _, at), (head, tail) in zip(rows, parts)]

    def outcomes(self, rows: list[tuple]) -> list[tuple]:
        """Outcome rows (match key, seat, agent, role, payoff) as ``seat_outcomes`` stores them."""
        self._learn_texts({text for row in rows for text in row[1:4]})
        self._learn_matches({row[0] for row in rows})
        texts, matches = self._texts, self._matches
        return [(matches[key], texts[seat], texts[agent], texts[role], payoff) for key, seat, agent, role, payoff in rows]

    def metrics(self, rows: list[tuple]) -> list[tuple]:
        """Metric rows (match key, metric, seat, value) as ``seat_metrics`` stores them."""
        self._learn_texts({text for row in rows for text in row[1:3]})
        self._learn_matches({row[0] for row in rows})
        texts, matches = self._texts, self._matches
        return [(matches[key], texts[metric], texts[seat], value) for key, metric, seat, value in rows]

    def spec_rests(self, rests: set[str]) -> dict[str, int]:
        """The numbers of the shared parts of match specifications."""
        self._learn_texts(rests)
        return {rest: self._texts[rest] for rest in rests}

    def _learn_texts(self, wanted: set[str]) -> None:
        missing = [text for text in wanted if text not in self._texts]
        if not missing:
            return
        size = sum(map(len, missing))
        if self._chars + size > self.MAX_CHARS:
            self._texts.clear()
            self._chars = 0
            missing = list(wanted)
            size = sum(map(len, missing))
        by_hash = {text_hash(text): text for text in missing}
        self.db.executemany("INSERT OR IGNORE INTO texts (hash, text) VALUES (?, ?)", by_hash.items())
        hashes = list(by_hash)
        for i in range(0, len(hashes), self._PART):
            part = hashes[i:i + self._PART]
            for digest, number in self.db.execute(
                    f"SELECT hash, id FROM texts WHERE hash IN ({', '.join('?' * len(part))})", part):
                self._texts[by_hash[digest]] = number
        self._chars += size

    def _learn_matches(self, wanted: set[str]) -> None:
        missing = [key for key in wanted if key not in self._matches]
        if not missing:
            return
        if len(self._matches) + len(missing) > self.MAX_KEYS:
            self._matches.clear()
            missing = list(wanted)
        self.db.executemany("INSERT OR IGNORE INTO match_ids (key) VALUES (?)", [(key,) for key in missing])
        for i in range(0, len(missing), self._PART):
            part = missing[i:i + self._PART]
            self._matches.update(self.db.execute(
                f"SELECT key, id FROM match_ids WHERE key IN ({', '.join('?' * len(part))})", part))


# Moving a store of formats 2 to 8 to format 9, in the upgrade's transaction. The writer first copies
# the old rows (and the matches), whether tables (formats 2 to 7) or format 8's views over numbered texts, to temporary
# tables (``old_*``) and drops the old ones; then every text, name and match key they hold goes into
# ``texts`` and ``match_ids``, each row into the new tables under its own row id (a follower's marks
# stay good), and the texts no row refers to any more (format 8's whole event bodies) are deleted.
# ``text_hash``, ``event_head``, ``event_tail``, ``spec_head`` and ``spec_tail``: the functions below.
SNAPSHOT = """
CREATE TEMP TABLE old_matches AS SELECT rowid AS rid, key, position, grp, repeat, game, spec, status, seats, params,
    rounds, error, started, ended FROM main.matches;
CREATE TEMP TABLE old_messages AS SELECT rowid AS rid, match_key, seq, idx, round, sender, recipients, kind, content,
    data, shown FROM main.messages;
CREATE TEMP TABLE old_events AS SELECT rowid AS rid, match_key, seq, type, body, at FROM main.events;
CREATE TEMP TABLE old_outcomes AS SELECT rowid AS rid, match_key, seat, agent, role, payoff FROM main.outcomes;
CREATE TEMP TABLE old_metrics AS SELECT rowid AS rid, match_key, metric, seat, value FROM main.metrics;
"""
MOVE_TO_TEXTS = """
INSERT OR IGNORE INTO match_ids (key) SELECT match_key FROM old_messages UNION SELECT match_key FROM old_events
    UNION SELECT match_key FROM old_outcomes UNION SELECT match_key FROM old_metrics;
INSERT OR IGNORE INTO texts (hash, text) SELECT text_hash(t), t FROM (
    SELECT sender AS t FROM old_messages UNION SELECT recipients FROM old_messages UNION SELECT kind FROM old_messages
    UNION SELECT content FROM old_messages UNION SELECT data FROM old_messages WHERE data IS NOT NULL
    UNION SELECT type FROM old_events UNION SELECT event_head(match_key, type, body) FROM old_events
    UNION SELECT event_tail(match_key, type, body) FROM old_events WHERE event_tail(match_key, type, body) IS NOT NULL
    UNION SELECT seat FROM old_outcomes UNION SELECT agent FROM old_outcomes UNION SELECT role FROM old_outcomes
    UNION SELECT metric FROM old_metrics UNION SELECT seat FROM old_metrics
    UNION SELECT spec_tail(spec) FROM old_matches WHERE spec_tail(spec) IS NOT NULL);
INSERT INTO match_rows (rowid, key, position, grp, repeat, game, spec, spec_rest, status, seats, params, rounds, error,
                        started, ended)
    SELECT rid, key, position, grp, repeat, game, spec_head(spec), (SELECT id FROM texts WHERE hash = text_hash(spec_tail(spec))),
           status, seats, params, rounds, error, started, ended
    FROM old_matches ORDER BY rid;
INSERT INTO posted (rowid, match, seq, idx, round, sender, recipients, kind, content, data, shown)
    SELECT m.rid, k.id, m.seq, m.idx, m.round, (SELECT id FROM texts WHERE hash = text_hash(m.sender)),
           (SELECT id FROM texts WHERE hash = text_hash(m.recipients)), (SELECT id FROM texts WHERE hash = text_hash(m.kind)),
           (SELECT id FROM texts WHERE hash = text_hash(m.content)),
           CASE WHEN m.data IS NOT NULL THEN (SELECT id FROM texts WHERE hash = text_hash(m.data)) END, m.shown
    FROM old_messages m JOIN match_ids k ON k.key = m.match_key ORDER BY m.rid;
INSERT INTO happened (rowid, match, seq, type, body, rest, at)
    SELECT e.rid, k.id, e.seq, (SELECT id FROM texts WHERE hash = text_hash(e.type)),
           (SELECT id FROM texts WHERE hash = text_hash(event_head(e.match_key, e.type, e.body))),
           (SELECT id FROM texts WHERE hash = text_hash(event_tail(e.match_key, e.type, e.body))), e.at
    FROM old_events e JOIN match_ids k ON k.key = e.match_key ORDER BY e.rid;
INSERT INTO seat_outcomes (rowid, match, seat, agent, role, payoff)
    SELECT o.rid, k.id, (SELECT id FROM texts WHERE hash = text_hash(o.seat)),
           (SELECT id FROM texts WHERE hash = text_hash(o.agent)), (SELECT id FROM texts WHERE hash = text_hash(o.role)),
           o.payoff
    FROM old_outcomes o JOIN match_ids k ON k.key = o.match_key ORDER BY o.rid;
INSERT INTO seat_metrics (rowid, match, metric, seat, value)
    SELECT x.rid, k.id, (SELECT id FROM texts WHERE hash = text_hash(x.metric)),
           (SELECT id FROM texts WHERE hash = text_hash(x.seat)), x.value
    FROM old_metrics x JOIN match_ids k ON k.key = x.match_key ORDER BY x.rid;
DELETE FROM texts WHERE id NOT IN (SELECT n FROM (
    SELECT sender AS n FROM posted UNION SELECT recipients FROM posted UNION SELECT kind FROM posted
    UNION SELECT content FROM posted UNION SELECT data FROM posted UNION SELECT type FROM happened
    UNION SELECT body FROM happened UNION SELECT rest FROM happened UNION SELECT seat FROM seat_outcomes
    UNION SELECT agent FROM seat_outcomes UNION SELECT role FROM seat_outcomes UNION SELECT metric FROM seat_metrics
    UNION SELECT seat FROM seat_metrics UNION SELECT spec_rest FROM match_rows) WHERE n IS NOT NULL);
DROP TABLE old_matches;
DROP TABLE old_messages;
DROP TABLE old_events;
DROP TABLE old_outcomes;
DROP TABLE old_metrics;
"""


def _hash(text: str | None) -> bytes | None:
    return None if text is None else text_hash(text)  # the module's, looked up when called


def _event_head(key: str, type_: str, body: str) -> str:
    return event_parts(key, type_, body)[0]


def _event_tail(key: str, type_: str, body: str) -> str | None:
    return event_parts(key, type_, body)[1]


def _spec_head(spec: str) -> str:
    return spec_parts(spec)[0]


def _spec_tail(spec: str) -> str | None:
    return spec_parts(spec)[1]


def ready_to_move(db: sqlite3.Connection) -> None:
    """Give a writer's connection the functions ``MOVE_TO_TEXTS`` calls."""
    db.create_function("text_hash", 1, _hash, deterministic=True)
    db.create_function("event_head", 3, _event_head, deterministic=True)
    db.create_function("event_tail", 3, _event_tail, deterministic=True)
    db.create_function("spec_head", 1, _spec_head, deterministic=True)
    db.create_function("spec_tail", 1, _spec_tail, deterministic=True)
