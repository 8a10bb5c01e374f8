"""Files: written whole or not at all; SQLite files looked at before SQLite is let near them.

Exports, reports, figures, annotation sheets and new run stores are written to a temporary file
beside their target and renamed over it once complete: a command that fails part way (a full
disk, a bug, a Ctrl-C, a kill) leaves the file that was there before as it was, and never a
half-written one that looks finished. (The ``atomicwrites`` package did this once; it is no
longer maintained.) A temporary file left by a writer that was killed is removed by the next write
of the same target; one whose writer is alive is not (the writer holds a lock on it).

An SQLite file (a run store, a response cache) is either whole or something else: an empty file,
a file cut short, one overwritten with something else. ``examine`` tells these apart from the
file's size and 100-byte header, so no command hands SQLite a file it would choke on, and none
writes to a file only to look at it. A damaged file is set aside (renamed, never deleted).
"""

from __future__ import annotations

import errno
import fcntl
import os
import re
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Literal, NamedTuple

from arena.contract.errors import ArenaError


SIDE_FILES = ("-wal", "-shm", "-journal")  # SQLite's companions of a database file, which go where it goes


class OutputError(ArenaError):
    """A file could not be written; whatever was there before is unchanged."""


DISK_FULL = "disk full: free space, then run again: nothing is lost"  # how every command says it


PARTIAL = ".partial"


def leftovers(target: str | Path) -> list[Path]:
    """Temporary files ``replacing`` left beside ``target`` when its process was killed mid-write."""
    target = Path(target)
    return sorted(target.parent.glob(f".{target.stem}.*{PARTIAL}{target.suffix}*"))


def _clear_leftovers(target: Path) -> None:
    """Remove the temporary files of earlier writes of ``target`` whose process died (a kill -9 leaves
    them: 4-16 MB for an export). A write in progress holds a lock on its file and is left alone."""
    name = re.compile(rf"\.{re.escape(target.stem)}\.[0-9a-f]{{8}}{re.escape(PARTIAL + target.suffix)}")
    for path in leftovers(target):
        if not name.fullmatch(path.name):  # another target's, or an SQLite side file: not ours to judge
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # its writer is alive
            continue
        else:
            for doomed in (path, *(path.with_name(path.name + s) for s in SIDE_FILES)):
                doomed.unlink(missing_ok=True)
        finally:
            os.close(fd)


@contextmanager
def replacing(target: str | Path) -> Iterator[Path]:
    """Yield a path to write the new contents of ``target`` to; it becomes ``target`` when the block
    ends without an error, and is removed otherwise. The temporary name keeps the target's suffix, so
    a writer that picks a format by suffix (matplotlib) picks the same one."""
    target = Path(target)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _clear_leftovers(target)
        partial = target.with_name(f".{target.stem}.{secrets.token_hex(4)}{PARTIAL}{target.suffix}")
        held = os.open(partial, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask decides, as for any file
        fcntl.flock(held, fcntl.LOCK_EX)  # while this is held, the file is a write in progress; the kernel lets go at death
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}") from None
    try:
        yield partial
        os.fsync(held)  # the contents reach the disk before the name does (the same file, whoever wrote it)
        os.replace(partial, target)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        kept = " (the file already there is unchanged)" if target.exists() else ""
        if exc.errno in (errno.ENOSPC, errno.EDQUOT):
            raise OutputError(f"{DISK_FULL} (cannot write {target}: {exc.strerror}{kept and '; ' + kept[2:-1]})") from None
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}{kept}") from None
    except BaseException:
        partial.unlink(missing_ok=True)
        raise
    finally:
        os.close(held)


def sqlite_damaged(exc: BaseException) -> bool:
    """Whether an SQLite error says a file's contents are broken (cut short, overwritten, not a database),
    as opposed to busy, read-only or missing."""
    if not isinstance(exc, sqlite3.DatabaseError):
        return False
    name = getattr(exc, "sqlite_errorname", "") or ""
    return name.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB")) or "malformed" in str(exc) or "not a database" in str(exc)


def set_aside(path: Path, label: str) -> Path:
    """Rename ``path`` (and its SQLite side files) to ``<name>.<label>-<time>``, never over anything;
    returns the new path. Nothing is deleted: what was there may be worth a look."""
    stamp = time.strftime("%Y%m%d-%H%M%S")
    n = 0
    while True:
        aside = path.with_name(f"{path.name}.{label}-{stamp}{'-' + str(n) if n else ''}")
        if not any(aside.with_name(aside.name + s).exists() for s in ("", *SIDE_FILES)):
            break
        n += 1
    for suffix in SIDE_FILES:  # the companions first: a database is never left in place without its journal
        side = path.with_name(path.name + suffix)
        if side.exists():
            side.rename(aside.with_name(aside.name + suffix))
    path.rename(aside)
    return aside


MAGIC = b"SQLite format 3\x00"

State = Literal["absent", "empty", "damaged", "present"]


class Found(NamedTuple):
    state: State
    reason: str = ""  # for a damaged file: what is wrong with it


def examine(path: Path) -> Found:
    """What the file at ``path`` is, from its size and header (the page count there is checked
    against the size, which tells a store cut short from a whole one). A file this user may not
    read raises PermissionError: it is none of these, and must never be set aside as damaged."""
    try:
        size = path.stat().st_size
    except FileNotFoundError:
        return Found("absent")
    wal = path.with_name(path.name + "-wal")
    logged = wal.exists() and wal.stat().st_size > 0
    if size == 0:  # a store made in place and never checkpointed may live in its log alone
        return Found("present" if logged else "empty")
    try:
        with path.open("rb") as handle:
            header = handle.read(100)
    except PermissionError:
        raise  # a file this user may not read is not damaged: the caller says whose it is to read
    except OSError as exc:
        return Found("damaged", f"it cannot be read: {exc.strerror}")
    if len(header) < 100 or not header.startswith(MAGIC):
        return Found("damaged", "it does not start as an SQLite database does")
    page_size = int.from_bytes(header[16:18], "big")
    page_size = 65536 if page_size == 1 else page_size
    if page_size < 512 or page_size & (page_size - 1):
        return Found("damaged", "its header names an impossible page size")
    pages = int.from_bytes(header[28:32], "big")
    counted = header[24:28] == header[92:96]  # SQLite trusts the page count only when these agree
    if logged:  # a checkpoint cut short leaves the file shorter than its header says until the log is
        return Found("present")  # replayed: only SQLite can tell, and a damaged file is reported when it does
    if size % page_size:
        return Found("damaged", f"it is cut short: {size} bytes is not a whole number of {page_size}-byte pages")
    if counted and pages and size < pages * page_size:
        return Found("damaged", f"it is cut short: {size} bytes of the {pages * page_size} its header counts")
    return Found("present")
