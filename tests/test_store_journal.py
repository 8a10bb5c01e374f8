"""A writer checks its store before it says how many matches finished: the count is what a new reader
finds in the files. When another program removes the store's journal (run.sqlite-wal) under a live
run, what the run committed since is in a file only the run's process can still reach: the run copies
it into the store, says what happened and what to do, and exits non-zero; the same command then
finds every match and replays nothing. It never says "3 of 3 finished" over a store that holds none."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import threading
from contextlib import contextmanager

import pytest

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import ROOT
from mock_llm import OpenAIMock
from store_kit import TINY, cli, one_line, write_scenario

HELD_AT = 5  # the model's fifth call waits: two matches of two rounds each are finished by then


@contextmanager
def run_held(tmp_path):
    """A run of three matches, one at a time, against a model whose fifth call waits for the test:
    yields (run directory, the waiting call, let it go, the run's process)."""
    asked, release, calls = threading.Event(), threading.Event(), []

    def answer(body):
        calls.append(body)
        if len(calls) == HELD_AT:
            asked.set()
            release.wait(300)
        return {"reason": "even", "coins": 4}

    with OpenAIMock(responder=answer) as mock:
        agents = {"model": {"backend": "openai", "model": "mock-model", "base_url": mock.base_url, "backoff": 0.01},
                  "keep": TINY["agents"]["keep"]}
        scenario = write_scenario(tmp_path, {**TINY, "agents": agents, "match": {"turn_timeout": 600},
                                             "tournament": {"repeats": 3}, "concurrency": 1})
        run_dir = tmp_path / "run"
        child = subprocess.Popen([sys.executable, "-m", "arena.cli", "run", scenario, "--quiet", "--run-dir", run_dir],
                                 cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env={**os.environ, "COLUMNS": "250"})
        try:
            assert asked.wait(120), "the run reaches the held call"
            yield scenario, run_dir, release, child
        finally:
            release.set()
            if child.poll() is None:
                child.kill()
            child.communicate()


def statuses(run_dir) -> list[str]:
    db = sqlite3.connect(f"file:{run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        return [s for (s,) in db.execute("SELECT status FROM matches ORDER BY position")]
    finally:
        db.close()


def test_a_journal_removed_under_the_run_is_said_and_what_was_committed_is_saved(tmp_path, capsys):
    with run_held(tmp_path) as (scenario, run_dir, release, child):
        other = sqlite3.connect(run_dir / "run.sqlite", isolation_level=None)  # another program with the store open
        try:
            os.unlink(run_dir / "run.sqlite-wal")
            with pytest.raises(sqlite3.OperationalError, match="disk I/O error"):  # it reads from the new, empty log
                other.execute("SELECT COUNT(*) FROM matches").fetchall()
            release.set()
            out, err = child.communicate(timeout=120)
        finally:
            other.close()
    assert child.returncode == 2, out + err
    said = one_line(err)
    assert said.count("error:") == 1 and "Traceback" not in err
    assert (f"error: {run_dir / 'run.sqlite'}-wal, the store's journal, was removed by another program while this run "
            f"wrote to it; every match was saved into {run_dir / 'run.sqlite'} all the same") in said
    assert "close them, then run the same command again to check" in said
    assert "3 of 3 matches finished" in one_line(out), "read back from the store"
    assert statuses(run_dir) == ["finished"] * 3
    code, out, err = cli(capsys, "show", run_dir, "--json")
    assert code == 0 and [m["status"] for m in json.loads(out)["matches"]] == ["finished"] * 3
    code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
    assert code == 0, err
    assert "3 of 3 matches finished, 3 from the earlier run" in one_line(out)


def test_a_run_that_cannot_read_back_what_it_wrote_says_so_and_the_same_command_plays_what_is_missing(tmp_path, capsys):
    with run_held(tmp_path) as (scenario, run_dir, release, child):
        other = sqlite3.connect(run_dir / "run.sqlite", isolation_level=None)
        try:
            other.execute("BEGIN")  # a reader in the middle of a read: the run cannot copy past what it sees
            seen = sorted(s for (s,) in other.execute("SELECT status FROM matches"))
            assert seen == ["finished", "finished", "running"]  # the order they are played in is the limiter's
            os.unlink(run_dir / "run.sqlite-wal")
            release.set()
            out, err = child.communicate(timeout=120)
        finally:
            other.close()  # the last to close: what it could still reach goes into the store then
    assert child.returncode == 2, out + err
    said = one_line(err)
    assert said.count("error:") == 1 and "Traceback" not in err
    assert f"error: {run_dir / 'run.sqlite'}-wal, the store's journal, was removed by another program" in said
    assert "3 of 3 matches finished" not in one_line(out), "never the run's own count over a store that lacks it"
    assert (f"close every program that has {run_dir / 'run.sqlite'} open (`arena watch`, an sqlite3 shell), then run "
            "the same command again: it plays what is missing") in said
    code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
    assert code == 0, err
    assert "3 of 3 matches finished" in one_line(out)
    assert statuses(run_dir) == ["finished"] * 3
