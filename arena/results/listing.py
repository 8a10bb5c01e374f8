"""The rows of `arena runs` and `arena show`: computed once, printed as a table, as tab-separated
values or as JSON, so that every form carries the same numbers."""

from __future__ import annotations

import sqlite3
from datetime import datetime
from pathlib import Path

import yaml
from pydantic import BaseModel

from collections.abc import Iterable

from arena.contract.records import MatchRecord
from arena.contract.files import sqlite_damaged
from arena.contract.runs import STORE_FILE, DamagedStore, NoRunYet, NotPermitted, OtherFormat, RunReader, StoreError, open_run
from arena.contract.runs import MatchRow as StoredMatch
from arena.store import run_dirs


class RunRow(BaseModel):
    run_dir: str
    name: str | None
    status: str  # for a store that cannot be read: damaged, empty or of another format, and why
    finished: int
    failed: int
    interrupted: int
    truncated: int
    planned: int
    updated: str | None  # ISO 8601, local time with its offset
    readable: bool = True
    rescored_from: str | None = None  # the run this one rescores (`arena rescore`)


def rescored_from(info: dict) -> str | None:
    """The run a run rescores, from its scenario's ``rescored_from`` (None: it rescores nothing)."""
    try:
        raw = yaml.safe_load(info.get("scenario") or "")
    except yaml.YAMLError:
        return None
    found = raw.get("rescored_from") if isinstance(raw, dict) else None
    return str(found) if found else None


def run_rows(output: str | Path) -> list[RunRow]:
    """One row per run directory under ``output``; a folder whose store cannot be read says why, and
    the listing goes on."""
    return [run_row(run_dir) for run_dir in run_dirs(output)]


def _iso(seconds: float | None) -> str | None:
    return None if not seconds else datetime.fromtimestamp(seconds).astimezone().isoformat(timespec="seconds")


def run_row(run_dir: Path) -> RunRow:
    try:
        changed = (run_dir / STORE_FILE).stat().st_mtime
    except OSError:
        changed = None

    def unusable(status: str) -> RunRow:
        return RunRow(run_dir=str(run_dir), name=None, status=status, finished=0, failed=0, interrupted=0,
                      truncated=0, planned=0, updated=_iso(changed), readable=False)

    def sqlite_problem(exc: Exception) -> RunRow:
        return unusable(f"damaged: SQLite says: {exc}" if sqlite_damaged(exc) else f"unreadable: {exc}")

    try:
        store = open_run(run_dir)
    except DamagedStore as exc:
        return unusable(f"damaged: {exc.reason}")
    except NoRunYet:
        return unusable("empty: never started")
    except OtherFormat as exc:
        return unusable(f"store format {exc.version}: another version of Arena")
    except NotPermitted:
        return unusable("not permitted: this user may not read it")
    except (StoreError, sqlite3.Error) as exc:
        return sqlite_problem(exc)
    try:
        info, counts, status = store.run_info(), store.counts(), store.status()
    except sqlite3.Error as exc:
        return sqlite_problem(exc)
    finally:
        store.close()
    return RunRow(run_dir=str(run_dir), name=info.get("name"), status=status, finished=counts.get("finished", 0),
                  failed=counts.get("failed", 0), interrupted=counts.get("interrupted", 0),
                  truncated=counts.get("truncated", 0), planned=info.get("planned") or 0,
                  updated=_iso(info.get("updated") or changed), rescored_from=rescored_from(info))


class SeatRow(BaseModel):
    label: str
    agent: str
    role: str


class MatchRow(BaseModel):
    key: str
    group: str
    repeat: int
    game: str
    status: str
    seats: list[SeatRow]
    rounds: int  # rounds played (where a truncated match was cut)
    payoffs: dict[str, float]  # by seat label; empty unless finished
    error: str | None  # why a match failed or was interrupted, its first line


def match_rows(records: Iterable[MatchRecord | StoredMatch], stored: dict[str, str] | None = None) -> list[MatchRow]:
    """``records``: match records, or the store's rows of them (``RunReader.matches()``: no transcript
    is read). ``stored``: each match's status in the store, where a match being played is 'pending' or
    'running' while its record (what a crash would leave) says interrupted."""
    stored = stored or {}

    def status(r: MatchRecord | StoredMatch) -> str:
        return stored[r.key] if stored.get(r.key) in ("pending", "running") else r.status

    return [MatchRow(key=r.key, group=r.group, repeat=r.repeat, game=r.game, status=status(r),
                     seats=[SeatRow(label=s.label, agent=s.agent, role=s.role) for s in r.seats], rounds=r.rounds,
                     payoffs=dict(r.payoffs), error=(r.error or "").splitlines()[0] if r.error else None)
            for r in records]


def sessions_json(store: RunReader) -> list[dict]:
    """Each `arena run` of the run: when it started, its --set overrides and its --limit."""
    return [{**s, "started": datetime.fromtimestamp(s["started"]).astimezone().isoformat(timespec="seconds")}
            for s in store.sessions()]
