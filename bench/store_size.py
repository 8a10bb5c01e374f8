"""How many bytes a run's store takes per match, before and after each distinct text and name was
stored once (store formats 8 and 9), and that `arena export` is byte for byte the same either way.

Three offline scenarios are played (`arena run`, in a child process): the quickstart's public goods
tournament, the pairwise review and the peer discussion. For each:

- after: the store as the run left it (format 9), and compacted (`VACUUM INTO`);
- before: the same rows laid out as format 7 kept them (messages and events in tables of their own,
  each row holding its texts), in a fresh file, compacted the same way; compacted against compacted
  is the fair ratio, since a store written as a run goes leaves some pages part full either way;
- the export (JSON lines and CSV) of the format 9 store, of the format 7 copy (read as it is), and of
  that copy once a writer has upgraded it in place to format 9: all three must be equal;
- where the compacted store's bytes go, by table with its indexes (SQLite's `dbstat`), for the public
  goods run.

Goal (issue 38): the public goods run at most a quarter of its bytes per match before.

    python bench/store_size.py
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SCENARIOS = ("quickstart", "pairwise-review-synthetic", "peer-discussion-synthetic")
GOAL = 0.25  # public goods, after / before


def run_arena(*args: str) -> bytes:
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], check=True, capture_output=True, cwd=ROOT).stdout


def compacted(store: Path, into: Path) -> int:
    db = sqlite3.connect(store)
    try:
        db.execute("VACUUM INTO ?", (str(into),))
    finally:
        db.close()
    return into.stat().st_size


def as_format7(store: Path, into: Path) -> None:
    """A fresh file holding the store's rows as format 7 laid them out."""
    from arena.contract.runs.schema import OLD_TABLES, SCHEMA

    moved = ("matches", "messages", "events", "outcomes", "metrics")  # views now, tables in format 7
    numbered = ("match_rows", "texts", "match_ids", "posted", "happened", "seat_outcomes", "seat_metrics")
    src = sqlite3.connect(store)
    out = sqlite3.connect(into, isolation_level=None)
    try:
        out.execute("BEGIN")
        for statement in (SCHEMA + OLD_TABLES).split(";"):
            name = statement.split("EXISTS", 1)[-1].split("(", 1)[0].strip()
            if statement.strip() and name not in numbered and "INDEX" not in statement:
                out.execute(statement)
        out.execute("CREATE INDEX matches_status ON matches (status)")
        tables = [t for (t,) in src.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                  if t not in numbered and not t.startswith("sqlite_")]
        for table in [*tables, *moved]:  # in row id order: as they were written
            rows = src.execute(f"SELECT * FROM {table} ORDER BY rowid").fetchall()
            if table in moved:
                rows = [row[1:] for row in rows]  # the views give the row id first
            if rows:
                out.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * len(rows[0]))})", rows)
        out.execute("PRAGMA user_version = 7")
        out.execute("COMMIT")
    finally:
        src.close()
        out.close()


def where_bytes_go(compacted_store: Path) -> list[tuple[str, int]]:
    """Bytes by table, each with its indexes (SQLite's own autoindexes and those named after it)."""
    db = sqlite3.connect(compacted_store)
    try:
        owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_master"))
        sizes: dict[str, int] = {}
        for name, size in db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name"):
            table = owner.get(name, name)
            sizes[table] = sizes.get(table, 0) + size
    except sqlite3.OperationalError:  # an SQLite built without dbstat
        return []
    finally:
        db.close()
    return sorted(sizes.items(), key=lambda item: -item[1])


def exports(run_dir: Path) -> tuple[bytes, bytes]:
    return run_arena("export", str(run_dir)), run_arena("export", str(run_dir), "--format", "csv")


def measure(name: str, tmp: Path) -> dict:
    run_dir = tmp / name
    run_arena("run", str(ROOT / "scenarios" / f"{name}.yaml"), "--run-dir", str(run_dir))
    store = run_dir / "run.sqlite"
    db = sqlite3.connect(store)
    try:
        matches = db.execute("SELECT COUNT(*) FROM matches").fetchone()[0]
        messages, distinct = db.execute("SELECT COUNT(*), COUNT(DISTINCT content) FROM messages").fetchone()
        texts = db.execute("SELECT COUNT(*) FROM texts").fetchone()[0]
    finally:
        db.close()
    written = exports(run_dir)
    old_dir = tmp / f"{name}-format7"
    old_dir.mkdir()
    (old_dir / "scenario.yaml").write_bytes((run_dir / "scenario.yaml").read_bytes())
    as_format7(store, old_dir / "run.sqlite")
    before = compacted(old_dir / "run.sqlite", tmp / f"{name}-7.sqlite")
    same_as_7 = exports(old_dir) == written
    from arena.store import RunStore

    RunStore.open(old_dir).close()  # a writer upgrades it in place
    same_upgraded = exports(old_dir) == written
    after = compacted(store, tmp / f"{name}-9.sqlite")
    return {"name": name, "matches": matches, "messages": messages, "distinct": distinct, "texts": texts,
            "live": store.stat().st_size, "after": after, "before": before,
            "upgraded": (old_dir / "run.sqlite").stat().st_size, "same": same_as_7 and same_upgraded,
            "tables": where_bytes_go(tmp / f"{name}-9.sqlite")}


def main() -> int:
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} CPUs")
    with tempfile.TemporaryDirectory() as tmp:
        rows = [measure(name, Path(tmp)) for name in SCENARIOS]
    print(f"{'scenario':<27} {'matches':>7} {'messages':>8} {'distinct':>8} {'before B/match':>14} "
          f"{'after B/match':>13} {'after/before':>12} {'as written':>10} {'upgraded':>9} {'export equal':>12}")
    for r in rows:
        per = r["matches"]
        print(f"{r['name']:<27} {per:>7} {r['messages']:>8} {r['distinct']:>8} {r['before'] / per:>14,.0f} "
              f"{r['after'] / per:>13,.0f} {r['after'] / r['before']:>12.3f} {r['live'] / per:>10,.0f} "
              f"{r['upgraded'] / per:>9,.0f} {'yes' if r['same'] else 'NO':>12}")
    public_goods = rows[0]
    if public_goods["tables"]:
        print(f"where the public goods store's {public_goods['after'] / public_goods['matches']:,.0f} B/match go "
              "(compacted, each table with its indexes):")
        for table, size in public_goods["tables"]:
            if size * 100 >= public_goods["after"]:  # 1 % and more
                print(f"  {table:<16} {size / public_goods['matches']:>7,.0f} B/match {size / public_goods['after']:>6.1%}")
    ratio = public_goods["after"] / public_goods["before"]
    met = ratio <= GOAL and all(r["same"] for r in rows)
    print(f"goal: public goods at most {GOAL:g} of before, exports equal: {ratio:.3f}: {'PASS' if met else 'FAIL'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
