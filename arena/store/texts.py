"""Each distinct text stored once: the numbers a message or event row refers to its texts by.

A run posts the same rules and prompts to every seat of every match, and its agents often give the
same replies: before format 8, nine in ten of a public goods run's message texts were copies. The
writer now keeps each text once in ``texts``, found again by a hash of it, and each match key once in
``match_ids``; the message and event rows hold their numbers, and the views ``messages`` and
``events`` (``arena.contract.runs.schema``) read them back as they were. A text is written in the
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


class Interned:
    """The numbers of the texts and match keys one writer's connection has stored or met, so that a
    text repeated across a run is looked up in the store once, not at every row; those of a batch of
    rows it has not met are stored and looked up together, a statement for all of them. Forgotten when
    a transaction is rolled back (numbers given in it are gone), and when it grows past its bounds."""

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
        self._learn_texts({text for row in rows for text in (row[5], row[7], row[8]) if text is not None})
        self._learn_matches({row[0] for row in rows})
        texts, matches = self._texts, self._matches
        return [(matches[key], seq, idx, rnd, sender, texts[recipients], kind, texts[content],
                 None if data is None else texts[data], shown)
                for key, seq, idx, rnd, sender, recipients, kind, content, data, shown in rows]

    def events(self, rows: list[tuple]) -> list[tuple]:
        """Event rows as ``EventRows`` makes them as ``happened`` stores them."""
        rests = [event_rest(key, type_, body) for key, _, type_, body, _ in rows]
        self._learn_texts(set(rests))
        self._learn_matches({row[0] for row in rows})
        texts, matches = self._texts, self._matches
        return [(matches[key], seq, type_, texts[rest], at) for (key, seq, type_, _, at), rest in zip(rows, rests)]

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


# Moving a store of formats 2 to 7 to format 8, in the upgrade's transaction: every text and key of
# the old tables into ``texts`` and ``match_ids``, each row into the new tables under its own row id
# (a follower's marks stay good), then the old tables dropped, for the views to take their names.
# ``text_hash`` and ``event_rest`` are the functions above, given to the connection for this.
MOVE_TO_TEXTS = """
INSERT OR IGNORE INTO match_ids (key) SELECT match_key FROM messages UNION SELECT match_key FROM events;
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
    SELECT e.rowid, k.id, e.seq, e.type, (SELECT id FROM texts WHERE hash = text_hash(event_rest(e.match_key, e.type, e.body))), e.at
    FROM events e JOIN match_ids k ON k.key = e.match_key ORDER BY e.rowid;
DROP TABLE messages;
DROP TABLE events;
"""


def ready_to_move(db: sqlite3.Connection) -> None:
    """Give a writer's connection the functions ``MOVE_TO_TEXTS`` calls."""
    db.create_function("text_hash", 1, text_hash, deterministic=True)
    db.create_function("event_rest", 3, event_rest, deterministic=True)
