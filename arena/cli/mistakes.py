"""What went wrong, in one sentence with its own advice: the errors a person can fix (a full disk, a file
they may not touch, a store SQLite refuses), found however deep a run's task groups wrapped them."""

from __future__ import annotations

import errno
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from arena.contract.files import DISK_FULL, sqlite_damaged

FULL = (errno.ENOSPC, errno.EDQUOT)


def leaves(exc: BaseException, contexts: bool = True, depth: int = 0) -> Iterator[BaseException]:
    """The errors inside ``exc``'s groups, and (``contexts``) those each was raised from or while
    handling: a clean-up that failed hides the error that made it clean up."""
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from leaves(inner, contexts, depth)
        return
    yield exc
    earlier = exc.__cause__ or exc.__context__
    if contexts and earlier is not None and depth < 3:
        yield from leaves(earlier, contexts, depth + 1)


def disk_full(exc: BaseException) -> bool:
    if isinstance(exc, OSError):
        return exc.errno in FULL
    if isinstance(exc, sqlite3.Error):
        name = getattr(exc, "sqlite_errorname", "") or ""
        return name.startswith("SQLITE_FULL") or "database or disk is full" in str(exc)
    return False


def said(exc: BaseException, run_dir: Path | None, user_errors: tuple[type[BaseException], ...],
         run: bool = False) -> str | None:
    """The sentence for ``exc``, or None when it is not a mistake a person can fix (a bug: let it show).
    ``run``: the command was `arena run`, whose store keeps what it finished."""
    if isinstance(exc, user_errors) and str(exc).startswith(DISK_FULL):  # said already, with the file it was for
        return str(exc)
    full = next((e for e in leaves(exc) if disk_full(e)), None)
    if full is not None:  # whatever else failed, failed because of it
        return _disk_full(full, run_dir if run else None)
    found = list(leaves(exc, contexts=False))
    if len(found) != 1:
        return None
    only = found[0]
    if isinstance(only, user_errors):
        return str(only)
    if isinstance(only, sqlite3.DatabaseError):
        return store_problem(only, run_dir)
    if isinstance(only, PermissionError):
        return (f"{only.filename or 'a file it needs'}: not permitted: this user may not open it; run the command as "
                "a user who may, or ask its owner to grant access")
    return None


def _disk_full(exc: BaseException, run_dir: Path | None) -> str:
    """``run_dir``: the run that was being played, whose finished matches its store keeps."""
    if isinstance(exc, OSError):
        detail = f"cannot write {exc.filename}: {exc.strerror}" if exc.filename else exc.strerror or str(exc)
    else:
        detail = f"SQLite says: {exc}"
    if run_dir is not None:
        detail += f"; the finished matches are kept in {run_dir}, and the same command plays the rest"
    return f"{DISK_FULL} ({detail})"


def store_problem(exc: sqlite3.DatabaseError, run_dir: Path | None) -> str:
    from arena.store import STORE_FILE, DamagedStore, NotPermitted
    from arena.contract.runs.opening import sqlite_refused

    path = Path(run_dir) / STORE_FILE if run_dir is not None else Path(STORE_FILE)
    if disk_full(exc):
        return _disk_full(exc, run_dir)
    if sqlite_refused(exc):
        return str(NotPermitted(path, "read or write"))
    if sqlite_damaged(exc):
        return str(DamagedStore(path, f"SQLite says: {exc}"))
    return (f"{path} could not be read (SQLite says: {exc}); if another program has it open or removed one of its "
            f"files ({path.name}-wal, {path.name}-shm), close that program, then run `arena run` on it again: it "
            "repairs the store and plays what is missing")
