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
    if _PLAIN.fullmatch(key) and _PLAIN.fullmatch(type_):
        opening = f'{{"match":"{key}","type":"{type_}"'
        if body.startswith(opening) and body[len(opening):len(opening) + 1] in (",", "}"):
            return body[len(opening):]
    return body


class Interned:
    """The numbers of the texts and match keys one writer's connection has stored or met, so that a
    text repeated across a run is looked up in the store once, not at every row. Forgotten when a
    transaction is rolled back (numbers given in it are gone), and when it grows past its bounds."""

    MAX_CHARS = 32 << 20  # the texts remembered, in characters: a run of long answers cannot fill memory
    MAX_KEYS = 1 << 16

    def __init__(self, db: sqlite3.Connection) -> None:
        self.db = db
        self._texts: dict[str, int] = {}
        self._chars = 0
        self._matches: dict[str, int] = {}

    def clear(self) -> None:
        self._texts.clear()
        self._chars = 0
        self._matches.clear()

    def text(self, text: str) -> int:
        found = self._texts.get(text)
        if found is not None:
            return found
        digest = text_hash(text)
        row = self.db.execute("SELECT id FROM texts WHERE hash = ?", (digest,)).fetchone()
        number = row[0] if row else self.db.execute("INSERT INTO texts (hash, text) VALUES (?, ?)", (digest, text)).lastrowid
        if self._chars + len(text) > self.MAX_CHARS:
            self._texts.clear()
            self._chars = 0
        self._texts[text] = number
        self._chars += len(text)
        return number

    def match(self, key: str) -> int:
        found = self._matches.get(key)
        if found is not None:
            return found
        row = self.db.execute("SELECT id FROM match_ids WHERE key = ?", (key,)).fetchone()
        number = row[0] if row else self.db.execute("INSERT INTO match_ids (key) VALUES (?)", (key,)).lastrowid
        if len(self._matches) >= self.MAX_KEYS:
            self._matches.clear()
        self._matches[key] = number
        return number

    def message(self, row: tuple) -> tuple:
        """A message row as ``EventRows`` makes it (texts in it) as ``posted`` stores it (their numbers)."""
        key, seq, idx, rnd, sender, recipients, kind, content, data, shown = row
        return (self.match(key), seq, idx, rnd, sender, self.text(recipients), kind, self.text(content),
                None if data is None else self.text(data), shown)

    def event(self, row: tuple) -> tuple:
        """An event row as ``EventRows`` makes it as ``happened`` stores it."""
        key, seq, type_, body, at = row
        return (self.match(key), seq, type_, self.text(event_rest(key, type_, body)), at)


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
