"""Putting a store back at rest: one file, no SQLite side files, once nobody writes to it.

The writer leaves WAL mode when it closes, but only if no other process has the store open at that
moment: a reader attached at the end (`arena watch`) keeps the writer from switching, and a read-only
connection may not fold the log into the store itself. Whoever closes last after the writer is gone
settles it: copies the log into ``run.sqlite`` and leaves WAL mode, which removes ``-wal`` and ``-shm``.
"""

from __future__ import annotations

import fcntl
import os
import sqlite3
import time
from pathlib import Path

from arena.store.lock import LOCK_FILE
from arena.store.writer import STORE_FILE

SIDES = ("-wal", "-shm")


def settle(run_dir: str | Path, wait: float = 5.0) -> bool:
    """Fold a store's write-ahead log into it and leave WAL mode, if it has side files and no writer holds
    the run; a writer still holding it is waited for up to ``wait`` seconds (a run that has just ended is
    on its way out). Whether the store is now a single file. Never raises: a folder this process may not
    write to, or another process that has the store open, leaves it as it is, for the next writer."""
    run_dir = Path(run_dir)
    store = run_dir / STORE_FILE
    if not any(store.with_name(store.name + side).exists() for side in SIDES):
        return True  # at rest already: nothing is opened, nothing touched
    try:
        fd = os.open(run_dir / LOCK_FILE, os.O_RDONLY)
    except OSError:
        return False  # no lock file: not a run this command knows how to settle safely
    try:
        if not _free(fd, wait):
            return False  # a writer is at work: it settles the store itself when it closes
        # a writer that starts from here on is not kept out: SQLite refuses the switch below while it has
        # the store open, and the writer switches the store back to WAL when it opens it
        try:
            db = sqlite3.connect(store, isolation_level=None, timeout=0)
            try:
                db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                db.execute("PRAGMA journal_mode=DELETE")  # refused (busy) while another process has it open
            finally:
                db.close()
        except sqlite3.Error:
            return False
    finally:
        os.close(fd)
    return not any(store.with_name(store.name + side).exists() for side in SIDES)


def _free(fd: int, wait: float) -> bool:
    """Whether no writer holds the run's lock (taken shared for an instant to see, then let go)."""
    deadline = time.monotonic() + wait
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            fcntl.flock(fd, fcntl.LOCK_UN)
            return True
        except BlockingIOError:
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.05)
