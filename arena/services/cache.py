"""The response cache: the same request, asked again, is answered from disk.

The key holds everything that shapes a reply: backend, model, endpoint,
parameters, the exact messages and a sample index, so k samples of one prompt
at a temperature above zero are k entries, not one. Each reply keeps what it
cost when it was first asked (tokens, dollars, seconds), so a rerun can say what
the cache saved.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from arena.contract.calls import CachedReply
from arena.contract.files import set_aside, sqlite_damaged

# columns added after the first release of the cache: a file written before them gains them on open
_LATER_COLUMNS = {"cost": "REAL", "latency": "REAL"}


def cache_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        try:
            self.db.execute("PRAGMA journal_mode=WAL")
            self._tune()
            self.db.execute(
                "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
                "prompt_tokens INTEGER, completion_tokens INTEGER, at REAL, cost REAL, latency REAL)"
            )
            present = {row[1] for row in self.db.execute("PRAGMA table_info(responses)")}
            for column, kind in _LATER_COLUMNS.items():
                if column not in present:  # older entries keep NULL there: their cost and time are unknown
                    self.db.execute(f"ALTER TABLE responses ADD COLUMN {column} {kind}")
        except BaseException:
            self.db.close()
            raise

    @classmethod
    def open_or_none(cls, path: str | Path) -> tuple["ResponseCache | None", str | None]:
        """The cache, or, when its file is damaged, no cache and a sentence saying so: a broken cache
        costs the run its saved replies, never the run itself. The damaged file is set aside (renamed,
        not deleted), so the next run starts a fresh cache in its place."""
        path = Path(path)
        try:
            return cls(path), None
        except sqlite3.DatabaseError as exc:
            if not sqlite_damaged(exc):
                raise
            reason = str(exc)
        try:
            where = f"set aside as {set_aside(path, 'damaged').name}; the next run starts a fresh one"
        except OSError as exc:
            where = f"left in place, since it could not be renamed ({exc.strerror}): move it away before the next run"
        return None, (f"the response cache {path} is damaged (SQLite says: {reason}); this run asks the models "
                      f"again instead of reusing saved replies, and saves none. The damaged file was {where}.")

    def get(self, key: str) -> CachedReply | None:
        row = self.db.execute(
            "SELECT text, prompt_tokens, completion_tokens, cost, latency FROM responses WHERE key = ?", (key,)
        ).fetchone()
        return None if row is None else CachedReply(*row)

    def put(self, key: str, reply: CachedReply) -> None:
        # committed at once: a reply paid for is never lost to a crash
        self.db.execute(
            "INSERT OR REPLACE INTO responses (key, text, prompt_tokens, completion_tokens, at, cost, latency) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (key, reply.text, reply.prompt_tokens, reply.completion_tokens, time.time(), reply.cost, reply.latency),
        )

    def close(self) -> None:
        self.db.close()

    @contextmanager
    def closed(self) -> Iterator[None]:
        """Closed while the block runs, then opened again. SQLite keeps, per process, what it knows of
        each file it has open and the locks it holds; a process forked while this connection is open
        inherits that, and a connection it opens to the same file would trust locks it does not hold.
        Forked in the block, a worker starts knowing nothing of this file."""
        self.db.close()
        try:
            yield
        finally:
            self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
            self._tune()

    def _tune(self) -> None:
        self.db.execute("PRAGMA synchronous=NORMAL")  # a connection's own setting; WAL is the file's
