"""Readers never write: rank, show, export, report, plot, watch and runs open the store in SQLite's
read-only mode, change no byte of the run folder, and work where nobody may write.

Tests run as root here, and root ignores file modes; so the read-only folder test runs the commands in
a child process that has given up that privilege (CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH dropped from
its bounding set before Python starts), for which the kernel enforces the folder's modes as for anyone.
That a write really is refused is checked first, in the same kind of child."""

from __future__ import annotations

import json
import sqlite3

import pytest
import trio

from arena.contract import open_run
from arena.store import RunStore
from store_kit import (as_unprivileged, cli, copy_run, journal_mode, make_read_only, make_writable,
                       permissions_bind, snapshot, write_scenario)


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    from arena.cli.commands import main

    home = tmp_path_factory.mktemp("readers")
    scenario = write_scenario(home)
    assert main(["run", str(scenario), "--quiet", "--run-dir", str(home / "run")]) == 0
    return home / "run", scenario


def reading_commands(run_dir, out):
    return [["show", run_dir], ["export", run_dir], ["export", run_dir, "--format", "csv", "-o", out / "m.csv"],
            ["rank", run_dir], ["rank", run_dir, "--json"], ["report", run_dir, "-o", out / "report.html"],
            ["plot", run_dir, "--kind", "trend", "-o", out / "trend.png"], ["watch", run_dir, "--plain"],
            ["runs", run_dir.parent]]


def check_outputs(results, out) -> None:
    """What a user would look for in each command's output."""
    (show, jsonl, csv, rank, ranked, report, plot, watch, runs) = results
    for code, stdout, stderr in results:
        assert code == 0, stderr
    assert show[1].count("finished") == 2
    assert [json.loads(line)["status"] for line in jsonl[1].splitlines()] == ["finished", "finished"]
    assert len((out / "m.csv").read_text().splitlines()) == 1 + 2 * 2
    assert "public_goods: mean payoff per agent" in rank[1]
    assert json.loads(ranked[1])["run"]["finished"] == 2
    assert (out / "report.html").read_text().lower().startswith("<!doctype html>") and (out / "trend.png").stat().st_size
    assert "finished — 2 finished, 0 failed, of 2 planned" in watch[1]
    assert "tiny" in runs[1] and "finished" in runs[1]


def test_the_readers_leave_a_run_folder_exactly_as_they_found_it(finished_run, tmp_path, capsys):
    run_dir = copy_run(finished_run[0], tmp_path / "runs" / "run")
    before = snapshot(run_dir)
    assert journal_mode(run_dir / "run.sqlite") == "rollback", "a store at rest needs no side files to be read"
    out = tmp_path / "out"
    out.mkdir()
    check_outputs([cli(capsys, *command) for command in reading_commands(run_dir, out)], out)
    assert snapshot(run_dir) == before, "no byte changed, no file added (no -wal, no -shm), no time touched"


def test_report_and_plot_write_beside_the_user_by_default_never_into_the_run_folder(finished_run, tmp_path, capsys,
                                                                                   monkeypatch):
    run_dir = copy_run(finished_run[0], tmp_path / "runs" / "tiny-run")
    before = snapshot(run_dir)
    here = tmp_path / "here"
    here.mkdir()
    monkeypatch.chdir(here)
    report, plot = cli(capsys, "report", run_dir), cli(capsys, "plot", run_dir, "--kind", "trend")
    assert report[0] == plot[0] == 0, (report, plot)
    assert sorted(p.name for p in here.iterdir()) == ["tiny-run-report.html", "tiny-run-trend.png"]
    assert report[1].startswith("tiny-run-report.html: 2 matches") and plot[1].startswith("tiny-run-trend.png: ")
    assert (here / "tiny-run-report.html").read_text().lower().startswith("<!doctype html>")
    assert snapshot(run_dir) == before


def test_the_readers_work_in_a_folder_nobody_may_write_to(finished_run, tmp_path):
    run_dir = copy_run(finished_run[0], tmp_path / "runs" / "run")
    legacy = copy_run(finished_run[0], tmp_path / "runs" / "legacy")
    db = sqlite3.connect(legacy / "run.sqlite")  # as earlier versions left every store: in WAL mode, no log beside it
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    assert journal_mode(legacy / "run.sqlite") == "wal" and not (legacy / "run.sqlite-wal").exists()
    out = tmp_path / "out"
    out.mkdir()
    make_read_only(tmp_path / "runs")
    try:
        if not permissions_bind(run_dir):
            pytest.skip("this machine cannot make a folder read-only for a child process (no CAP_SETPCAP)")
        before = {d.name: snapshot(d) for d in (run_dir, legacy)}
        check_outputs(as_unprivileged(reading_commands(run_dir, out), cwd=tmp_path), out)
        results = as_unprivileged([["show", legacy], ["export", legacy], ["rank", legacy, "--json"]], cwd=tmp_path)
        assert [code for code, _, _ in results] == [0, 0, 0], results
        assert len(results[1][1].splitlines()) == 2 and json.loads(results[2][1])["run"]["finished"] == 2
        # the writer needs the folder: it says so in one sentence
        [(code, _, err)] = as_unprivileged([["run", finished_run[1], "--quiet", "--run-dir", run_dir]], cwd=tmp_path)
        assert code == 2 and "needs a run directory it may write to" in " ".join(err.split()), err
        assert {d.name: snapshot(d) for d in (run_dir, legacy)} == before
    finally:
        make_writable(tmp_path / "runs")


async def test_a_store_of_an_older_format_is_read_as_it_is_without_upgrading_it(tmp_path):
    """Format 2 (before referees reported metrics and before messages kept what others were shown): a reader
    sees the same records through temporary tables and views, and the file stays format 2, byte for byte."""
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario
    from store_kit import TINY, as_format7

    scenario = parse_scenario(TINY)
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    await run_tournament(scenario, store=store)
    store.close()
    as_format7(tmp_path / "run" / "run.sqlite")
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    db.executescript("DROP TABLE metrics; ALTER TABLE messages DROP COLUMN shown; PRAGMA user_version = 2;")
    db.close()
    before = snapshot(tmp_path / "run")

    store = open_run(tmp_path / "run")
    records = list(store.records())
    assert [r.payoffs for r in records] == [{"Player 1": 15.0, "Player 2": 35.0}, {"Player 1": 35.0, "Player 2": 15.0}]
    assert all(r.metrics == {} for r in records) and all(m.shown is None for r in records for m in r.messages)
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == 2
    store.close()
    assert snapshot(tmp_path / "run") == before
    await trio.sleep(0)
