"""The rows of `arena runs` and `arena show`: computed once, printed as a table, as tab-separated
values or as JSON, so that every form carries the same numbers."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

from pydantic import BaseModel

from arena.contract.records import MatchRecord
from arena.store import RunStore, run_dirs


class RunRow(BaseModel):
    run_dir: str
    name: str | None
    status: str
    finished: int
    failed: int
    interrupted: int
    planned: int
    updated: str | None  # ISO 8601, local time with its offset


def run_rows(output: str | Path) -> list[RunRow]:
    rows = []
    for run_dir in run_dirs(output):
        store = RunStore.open(run_dir)
        try:
            rows.append(run_row(run_dir, store))
        finally:
            store.close()
    return rows


def run_row(run_dir: Path, store: RunStore) -> RunRow:
    info, counts = store.run_info(), store.counts()
    updated = info.get("updated")
    return RunRow(run_dir=str(run_dir), name=info.get("name"), status=store.status(),
                  finished=counts.get("finished", 0), failed=counts.get("failed", 0),
                  interrupted=counts.get("interrupted", 0), planned=info.get("planned") or 0,
                  updated=None if updated is None else datetime.fromtimestamp(updated).astimezone().isoformat(timespec="seconds"))


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
    payoffs: dict[str, float]  # by seat label; empty unless finished
    error: str | None  # why a match failed or was interrupted, its first line


def match_rows(records: list[MatchRecord]) -> list[MatchRow]:
    return [MatchRow(key=r.key, group=r.group, repeat=r.repeat, game=r.game, status=r.status,
                     seats=[SeatRow(label=s.label, agent=s.agent, role=s.role) for s in r.seats],
                     payoffs=dict(r.payoffs), error=(r.error or "").splitlines()[0] if r.error else None)
            for r in records]


def sessions_json(store: RunStore) -> list[dict]:
    """Each `arena run` of the run: when it started, its --set overrides and its --limit."""
    return [{**s, "started": datetime.fromtimestamp(s["started"]).astimezone().isoformat(timespec="seconds")}
            for s in store.sessions()]
