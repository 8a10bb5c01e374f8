"""A store always has a way out: it is made whole or not at all, a damaged or empty one is named in one
sentence (exit 2) by every command, --force-new sets any of them aside (renamed, never deleted), `arena
runs` lists a damaged run and goes on, and a damaged response cache costs the run its cache, not the run."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time

import pytest
import yaml

from mock_llm import OpenAIMock
from store_kit import DAMAGE, TINY, cli, copy_run, damage, one_line, stored_notes, write_scenario


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A run of two matches, played to the end, and its scenario."""
    from arena.cli.commands import main

    home = tmp_path_factory.mktemp("finished")
    scenario = write_scenario(home)
    assert main(["run", str(scenario), "--quiet", "--run-dir", str(home / "run")]) == 0
    return home / "run", scenario


# -- creation --------------------------------------------------------------------------------------
KILLED_AT_RENAME = textwrap.dedent("""
    import os, sys, threading
    from pathlib import Path
    real = os.replace
    def replace(src, dst, *args, **kwargs):
        if Path(dst).name == "run.sqlite":  # the new store is whole beside its place: stop here for the kill
            said = Path(sys.argv[1] + ".tmp")  # renamed into place whole: the test never reads it half written
            said.write_text(str(Path(src).name))
            real(said, sys.argv[1])
            threading.Event().wait()
        return real(src, dst, *args, **kwargs)
    os.replace = replace
    from arena.cli.commands import main
    sys.exit(main(sys.argv[2:]))
""")


def test_a_kill_between_making_the_store_and_renaming_it_leaves_no_store_and_the_next_run_starts_clean(tmp_path, capsys):
    scenario, run_dir, ready = write_scenario(tmp_path), tmp_path / "run", tmp_path / "at-rename"
    child = subprocess.Popen([sys.executable, "-c", KILLED_AT_RENAME, str(ready), "run", str(scenario), "--quiet",
                              "--run-dir", str(run_dir)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        while not ready.exists() and child.poll() is None:  # the child says when it has reached the rename
            time.sleep(0.01)
        assert child.poll() is None, child.stderr.read().decode()
        child.send_signal(signal.SIGKILL)
    finally:
        child.wait(timeout=60)
    partial = run_dir / ready.read_text()
    assert partial.exists() and partial.stat().st_size > 0, "the store was made in a file of its own"
    assert not (run_dir / "run.sqlite").exists(), "and never put in place half made"
    # the folder is no run yet: the readers say so, the listing has nothing stuck 'starting' in 1970
    code, _, err = cli(capsys, "show", run_dir)
    assert code == 2 and "is not a run directory" in err
    code, out, _ = cli(capsys, "runs", tmp_path)
    assert code == 0 and "1970" not in out and "starting" not in out
    # the next run clears what the killed one left and plays everything
    code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
    assert code == 0, err
    assert "2 of 2 matches finished" in one_line(out)
    assert not partial.exists() and not list(run_dir.glob(".run.*"))
    assert "ended without letting go" in one_line(out)  # the killed run held the lock; the kernel let it go


def test_an_empty_or_tableless_store_left_by_an_older_version_is_treated_as_absent(tmp_path, capsys):
    scenario = write_scenario(tmp_path)
    empty, tableless = tmp_path / "runs" / "empty", tmp_path / "runs" / "tableless"
    empty.mkdir(parents=True)
    (empty / "run.sqlite").write_bytes(b"")
    tableless.mkdir()
    db = sqlite3.connect(tableless / "run.sqlite")  # what a kill before the tables were made used to leave
    db.execute("PRAGMA journal_mode=WAL")
    db.close()
    left = (tableless / "run.sqlite").read_bytes()
    assert left  # not empty: a database with no tables

    code, out, _ = cli(capsys, "runs", tmp_path / "runs")
    assert code == 0
    assert out.count("empty: never started") == 2 and "1970" not in out
    code, _, err = cli(capsys, "show", empty)
    assert code == 2 and "holds no run yet" in one_line(err) and "arena run" in err

    for run_dir in (empty, tableless):
        code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
        assert code == 0, err
        assert "2 of 2 matches finished" in one_line(out)
    aside = [p for p in tableless.glob("run.sqlite.unfinished-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(aside) == 1 and aside[0].read_bytes() == left, "a store that is not empty is set aside, not deleted"
    assert f"set aside as {aside[0].name}" in one_line(out)
    code, out, _ = cli(capsys, "runs", tmp_path / "runs")
    assert out.count("finished") >= 2 and "never started" not in out


# -- damage ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_a_damaged_store_gets_one_sentence_and_exit_2_and_force_new_sets_it_aside(finished_run, tmp_path, capsys, kind):
    source, scenario = finished_run
    runs = tmp_path / "runs"
    healthy, broken = copy_run(source, runs / "healthy"), copy_run(source, runs / "broken")
    store = broken / "run.sqlite"
    damaged = damage(store, kind)

    for command in (["run", scenario, "--quiet", "--run-dir", broken], ["rank", broken], ["rank", broken, "--json"],
                    ["show", broken], ["export", broken], ["export", broken, "--format", "csv", "-o", tmp_path / "x.csv"],
                    ["report", broken, "-o", tmp_path / "r.html"], ["watch", broken, "--plain"]):
        code, out, err = cli(capsys, *command)
        said = one_line(err)
        assert code == 2, (command, out, err)
        assert f"{store} is damaged" in said and "--force-new" in said and "sets it aside" in said, (command, said)
        assert said.count("error:") == 1 and "Traceback" not in said
        assert store.read_bytes() == damaged, "a reader changes nothing, and the damage is kept for a look"
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "r.html").exists()

    # one damaged folder does not stop the listing of the others
    code, out, err = cli(capsys, "runs", runs)
    assert code == 0, err
    lines = {line.split("│")[1].strip(): line for line in out.splitlines() if "│" in line and str(runs) in line}
    assert "damaged" in lines[str(broken)] and "finished" in lines[str(healthy)]

    # --force-new always has a way out: the damaged file is renamed, never deleted, and a new run starts
    code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", broken, "--force-new")
    assert code == 0, err
    aside = list(broken.glob("run.sqlite.damaged-*"))
    assert [p.read_bytes() for p in aside] == [damaged]
    assert f"set aside as {aside[0].name}" in one_line(out) and "2 of 2 matches finished" in one_line(out)
    code, out, _ = cli(capsys, "export", broken)
    assert code == 0 and len(out.splitlines()) == 2


def test_force_new_sets_aside_a_store_of_another_format_and_a_changed_scenario(finished_run, tmp_path, capsys):
    source, scenario = finished_run
    other = copy_run(source, tmp_path / "other")
    db = sqlite3.connect(other / "run.sqlite")
    db.execute("PRAGMA user_version = 99")
    db.close()
    code, _, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", other)
    assert code == 2 and "store format 99" in err and "--force-new" in err
    code, out, _ = cli(capsys, "runs", tmp_path)
    assert "store format 99" in one_line(out)
    code, _, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", other, "--force-new")
    assert code == 0, err
    assert len(list(other.glob("run.sqlite.old-*"))) == 1


# -- the response cache -----------------------------------------------------------------------------
def test_a_damaged_response_cache_is_set_aside_and_the_run_goes_on_without_one(tmp_path, capsys):
    with OpenAIMock() as mock:
        raw = {**TINY, "agents": {"model": {"backend": "openai", "model": "mock-model", "base_url": mock.base_url},
                                  "keep": TINY["agents"]["keep"]}}
        scenario = write_scenario(tmp_path, raw)
        run_dir = tmp_path / "run"
        code, _, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
        assert code == 0, err
        asked = mock.count
        assert asked == 4  # two matches of two rounds: the model is asked once a round
        cache = run_dir / "responses.sqlite"
        broken = damage(cache, "garbage header")

        code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir, "--force-new")
        assert code == 0, err
        said = one_line(err)
        assert said.count("warning:") == 1
        assert f"the response cache {cache} is damaged" in said and "asks the models again" in said
        assert mock.count == 2 * asked, "no cache: every reply is asked for again, and the run goes on"
        assert "2 of 2 matches finished" in one_line(out)
    aside = list(run_dir.glob("responses.sqlite.damaged-*"))
    assert [p.read_bytes() for p in aside] == [broken]
    assert not cache.exists(), "this run saved nothing; the next one starts a fresh cache"
    assert any("is damaged" in note for note in stored_notes(run_dir)), "the run's notes keep what was said"
