"""Opening a run store to read it: a run folder or its run.sqlite, looked at before SQLite is let near
it, then opened in SQLite's read-only mode. A folder that holds no run, a damaged file, a store of a
newer format or one this user may not read is said in a sentence (an error of ``schema``), and
nothing is written: not the store, not SQLite's side files, so reading works beside a run being
written and in a folder nobody may write to.
"""

from __future__ import annotations

import sqlite3
import stat
from collections.abc import Callable, Iterator
from pathlib import Path

from arena.contract.files import Found, examine, sqlite_damaged
from arena.contract.runs.schema import (ADDED_COLUMNS, SCHEMA_VERSION, STORE_FILE, TABLES, UPGRADABLE, DamagedStore,
                                        NoRunYet, NotAFolder, NotPermitted, OtherFormat, StoreError)


def sqlite_reason(exc: sqlite3.Error) -> str:
    return f"SQLite says: {exc}"


# What SQLite answers when the operating system refuses it a file: a matter of permissions, never damage.
_REFUSED = ("SQLITE_READONLY", "SQLITE_CANTOPEN", "SQLITE_PERM", "SQLITE_AUTH")


def sqlite_refused(exc: BaseException) -> bool:
    return isinstance(exc, sqlite3.Error) and (getattr(exc, "sqlite_errorname", "") or "").startswith(_REFUSED)


def file_part(path: Path) -> Path:
    """The first part of ``path`` that is a file, for a path that goes through one."""
    for part in reversed((path, *path.parents)):
        if part.is_file():
            return part
    return path


def check_folder(run_dir: Path) -> None:
    """A run directory that is a file (the scenario, most often), or one this user may not enter, is said
    in a sentence before anything looks inside it; one that does not exist is left to the caller."""
    try:
        mode = run_dir.stat().st_mode
        if stat.S_ISDIR(mode):
            (run_dir / STORE_FILE).stat()  # may this user look inside?
    except FileNotFoundError:
        return
    except NotADirectoryError:
        raise NotAFolder(file_part(run_dir)) from None
    except PermissionError:
        raise NotPermitted(run_dir, "enter") from None
    if not stat.S_ISDIR(mode):
        raise NotAFolder(run_dir)


def examine_store(path: Path) -> Found:
    """``examine``, with a store this user may not read said as such (never as damaged)."""
    try:
        return examine(path)
    except PermissionError:
        raise NotPermitted(path, "read") from None


def store_path(where: str | Path) -> tuple[Path, Path]:
    """(run folder, store file) for a run folder or the store file in one."""
    where = Path(where)
    if where.name == STORE_FILE and where.is_file():
        return where.parent, where
    check_folder(where)
    return where, where / STORE_FILE


def open_readonly(where: str | Path) -> tuple[Path, sqlite3.Connection]:
    """(run folder, a read-only connection) to the run at ``where``, or a clear error."""
    run_dir, path = store_path(where)
    return run_dir, open_begun(run_dir, path, connect_readonly, "read")


def open_begun(run_dir: Path, path: Path, connect: Callable[[Path], sqlite3.Connection],
               doing: str) -> sqlite3.Connection:
    """``connect(path)`` to the store of the run in ``run_dir``, or the clear error: no store there,
    a damaged one, one no run has begun to write, or a file this user may not ``doing`` ("read")."""
    found = examine_store(path)
    if found.state == "absent":
        raise StoreError(f"{run_dir} is not a run directory (no {STORE_FILE} in it)")
    if found.state == "damaged":
        raise DamagedStore(path, found.reason)
    if found.state == "empty":
        raise NoRunYet(path)
    db = connect_or_say(path, connect, doing)
    if not db.execute("SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]:
        db.close()
        raise NoRunYet(path)
    return db


def connect_or_say(path: Path, connect: Callable[[Path], sqlite3.Connection], doing: str) -> sqlite3.Connection:
    """``connect(path)``, with a file this user may not ``doing`` said as such (NotPermitted)."""
    try:
        return connect(path)
    except sqlite3.DatabaseError as exc:
        if sqlite_refused(exc):
            raise NotPermitted(path, doing) from None
        raise


def connect_readonly(path: Path) -> sqlite3.Connection:
    """A reader's connection: SQLite's read-only mode, no switch of journal mode, no upgrade, so that
    reading works in a folder nobody may write to and beside a run being written, and changes nothing.
    An older format is read through temporary tables and views that make it look current."""
    uri = path.absolute().as_uri()
    try:
        db = _probe(f"{uri}?mode=ro")
    except sqlite3.OperationalError:
        if path.with_name(path.name + "-wal").exists():
            raise
        # a WAL store with no log beside it, in a folder this process cannot write to: SQLite would create
        # the log's index even to read. Without a log the file alone is the whole store, and no writer can
        # be at work in such a folder; so it is read as a file that does not change.
        db = _probe(f"{uri}?mode=ro&immutable=1")
    try:
        version = db.execute("PRAGMA user_version").fetchone()[0]
        # views too: format 8's messages and events are views, which an older format's tables stand in for
        tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master WHERE type IN ('table', 'view')")}
        if tables and version in UPGRADABLE:
            _read_as_current(db, tables)
        elif tables and version != SCHEMA_VERSION:
            raise OtherFormat(path, version, SCHEMA_VERSION)
    except sqlite3.DatabaseError as exc:
        db.close()
        if sqlite_damaged(exc):
            raise DamagedStore(path, sqlite_reason(exc)) from None
        raise
    except BaseException:
        db.close()
        raise
    return db


def _probe(uri: str) -> sqlite3.Connection:
    db = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=30)
    try:
        db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()  # opening is lazy: make it happen here
    except BaseException:
        db.close()
        raise
    return db


def _read_as_current(db: sqlite3.Connection, tables: set[str]) -> None:
    """Make an older store read like the current format without writing to it: a table it lacks is an
    empty temporary one, a column it lacks is NULL in a temporary view (temporary names come first)."""
    for table, statement in TABLES.items():
        if table not in tables:
            db.execute(statement.replace("CREATE TABLE", "CREATE TEMP TABLE", 1))
    for table, columns in ADDED_COLUMNS.items():
        present = {row[1] for row in db.execute(f"PRAGMA main.table_info({table})")}
        missing = [c for c in columns if c not in present]
        if table in tables and missing:
            nulls = "".join(f", NULL AS {c}" for c in missing)
            db.execute(f"CREATE TEMP VIEW {table} AS SELECT rowid AS rowid, *{nulls} FROM main.{table}")


def run_dirs(output: str | Path) -> Iterator[Path]:
    """``output`` itself if it is a run directory, and every run directory in it. A folder this user may
    not enter is yielded too: whether it holds a run is unknown, and the listing says it cannot tell."""
    root = Path(output)
    check_folder(root)

    def holds_a_run(folder: Path) -> bool:
        try:
            return (folder / STORE_FILE).exists()
        except PermissionError:
            return True

    if holds_a_run(root):
        yield root
    if root.is_dir():
        for child in sorted(root.iterdir()):
            if child.is_dir() and holds_a_run(child):
                yield child
