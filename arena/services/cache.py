"""The response cache: the same request, asked again, is answered from disk.

The key holds everything that shapes a reply: backend, model, endpoint,
parameters, the exact messages and a sample index, so k samples of one prompt
at a temperature above zero are k entries, not one.
"""

from __future__ import annotations

import hashlib
import json
import sqlite3
import time
from pathlib import Path
from typing import Any


def cache_key(**parts: Any) -> str:
    return hashlib.sha256(json.dumps(parts, sort_keys=True, ensure_ascii=False, default=str).encode()).hexdigest()


class ResponseCache:
    def __init__(self, path: str | Path):
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.db = sqlite3.connect(self.path, isolation_level=None, timeout=30)
        self.db.execute("PRAGMA journal_mode=WAL")
        self.db.execute("PRAGMA synchronous=NORMAL")
        self.db.execute(
            "CREATE TABLE IF NOT EXISTS responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, "
            "prompt_tokens INTEGER, completion_tokens INTEGER, at REAL)"
        )

    def get(self, key: str) -> tuple[str, int | None, int | None] | None:
        return self.db.execute(
            "SELECT text, prompt_tokens, completion_tokens FROM responses WHERE key = ?", (key,)
        ).fetchone()

    def put(self, key: str, text: str, prompt_tokens: int | None, completion_tokens: int | None) -> None:
        # committed at once: a reply paid for is never lost to a crash
        self.db.execute(
            "INSERT OR REPLACE INTO responses VALUES (?, ?, ?, ?, ?)", (key, text, prompt_tokens, completion_tokens, time.time())
        )

    def close(self) -> None:
        self.db.close()
