"""Chaos: a run killed with SIGKILL at ten chosen points, from before its store exists to the
middle of an export, resumes each time and ends with exactly the files of a run never stopped."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from helpers import ROOT

LAUNCH = Path(__file__).with_name("chaos_launch.py")
SCENARIO = """
name: chaos
seed: 5
agents:
  give: {backend: scripted, strategy: always_all}
  keep: {backend: scripted, strategy: free_rider}
  copy: {backend: scripted, strategy: tit_for_tat}
  dice: {backend: scripted, strategy: random_contributor}
games:
  - game: public_goods
    label: pairs
    seats: 2
    params: {rounds: 4}
  - game: public_goods
    label: coin
    agents: [dice, copy]
    params: {rounds: 3, mode: 2}
    tournament: {repeats: {block: 2, min: 4, max: 6, width: 0.01}}
tournament: {format: round_robin, repeats: 3}
concurrency: 2
"""
W = "arena.store.writer:RunStore."
# (function, which call, before or after it), in the order they strike one run folder
POINTS = [
    ("arena.store.lock:RunLock.acquire", 1, "after"),  # the lock is held and no store exists yet
    ("arena.store.writer:_build", 1, "after"),  # a new store made whole aside, not yet renamed in
    (W + "set_planned", 1, "before"),  # the store is in place, nothing planned
    (W + "prepare", 3, "after"),  # matches under way, none finished
    (W + "record_event", 30, "after"),  # between two events of a match
    (W + "_commit", 3, "before"),  # writes pending inside a transaction
    (W + "finish", 4, "after"),  # a match just stored
    (W + "finish", 2, "before"),  # a match played, not yet stored
    (W + "set_status", 1, "before"),  # every match played, the run not yet marked finished
]


def cli(*args, launch=None, timeout=180):
    prefix = [sys.executable, "-m", "arena.cli"] if launch is None else \
        [sys.executable, str(LAUNCH), launch[0], str(launch[1]), launch[2], "--"]
    env = {**os.environ, "COLUMNS": "200"}
    return subprocess.run([*prefix, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout, env=env)


def finished(run_dir: Path) -> int:
    path = run_dir / "run.sqlite"
    if not path.exists():
        return 0
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute("SELECT COUNT(*) FROM matches WHERE status = 'finished'").fetchone()[0]
    finally:
        db.close()


def exports(run_dir: Path) -> tuple[str, str]:
    out = []
    for fmt in ("jsonl", "csv"):
        result = cli("export", run_dir, "--format", fmt)
        assert result.returncode == 0, result.stderr
        out.append(result.stdout)
    return out[0], out[1]


def test_a_run_killed_at_ten_points_resumes_to_the_files_of_an_unbroken_run(tmp_path):
    scenario = tmp_path / "chaos.yaml"
    scenario.write_text(SCENARIO)
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    done = cli("run", scenario, "--quiet", "--run-dir", reference)
    assert done.returncode == 0, done.stderr
    expected = exports(reference)
    total = len(expected[0].splitlines())
    assert total == 6 * 3 + 6  # C(4,2) tables x 3 repeats, and the coin entry runs to its cap

    progress = []
    for point in POINTS:
        killed = cli("run", scenario, "--quiet", "--run-dir", crashed, launch=point)
        assert killed.returncode == -9, (point, killed.returncode, killed.stderr)  # the kill struck where aimed
        progress.append(finished(crashed))
        if point[0].endswith("RunLock.acquire"):  # before any store: the folder is still listed, and usable
            assert not (crashed / "run.sqlite").exists()
            listed = cli("runs", tmp_path)
            assert listed.returncode == 0 and "1970" not in listed.stdout, listed.stdout + listed.stderr
    assert progress == sorted(progress), f"finished matches are never lost: {progress}"
    assert progress[0] == 0 and progress[6] >= 4 and progress[7] < total and progress[-1] == total, progress

    resumed = cli("run", scenario, "--quiet", "--run-dir", crashed)
    assert resumed.returncode == 0, resumed.stderr
    assert exports(crashed) == expected  # byte for byte: none lost, none twice, none changed

    # the tenth: an export killed as it makes its file whole leaves no file, and a retry writes the same
    target = tmp_path / "out.jsonl"
    killed = cli("export", crashed, "--format", "jsonl", "-o", target, launch=("os:fsync", 1, "before"))
    assert killed.returncode == -9 and not target.exists()
    again = cli("export", crashed, "--format", "jsonl", "-o", target)
    assert again.returncode == 0 and target.read_text() == expected[0]
    rank = lambda d: json.loads(cli("rank", d, "--json").stdout)
    assert rank(crashed)["payoffs"] == rank(reference)["payoffs"]


def _processes_running(marker: str) -> list[int]:
    """The processes whose command line names ``marker`` (the run and any worker it forked)."""
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker in (entry / "cmdline").read_bytes().decode(errors="replace"):
                    found.append(int(entry.name))
            except OSError:
                pass  # gone meanwhile
    return found


def _gone(marker: str) -> bool:
    """Whether every process naming ``marker`` has exited: a worker does once it sees its run's socket close."""
    deadline = time.monotonic() + 30
    while _processes_running(marker):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.05)
    return True


WORKER_POINTS = [
    (W + "prepare", 3, "after"),  # matches under way in the workers, none finished
    (W + "add_rows", 30, "after"),  # between two events a worker sent
    (W + "_commit", 3, "before"),  # rows from the workers pending inside a transaction
    (W + "finish", 4, "after"),
    (W + "set_status", 1, "before"),
]


def test_a_run_with_worker_processes_killed_leaves_no_worker_behind_and_resumes_to_the_same_files(tmp_path):
    scenario = tmp_path / "chaos-workers.yaml"
    scenario.write_text(SCENARIO.replace("concurrency: 2", "concurrency: {matches: 4, processes: 2}"))
    reference, crashed = tmp_path / "reference", tmp_path / "crashed"
    done = cli("run", scenario, "--quiet", "--processes", 1, "--run-dir", reference)
    assert done.returncode == 0, done.stderr
    expected = exports(reference)
    progress = []
    for point in WORKER_POINTS:
        killed = cli("run", scenario, "--quiet", "--run-dir", crashed, launch=point)
        assert killed.returncode == -9, (point, killed.returncode, killed.stderr)
        assert _gone(str(scenario)), f"a worker outlived its run killed at {point}"
        progress.append(finished(crashed))
    assert progress == sorted(progress) and progress[0] == 0 and progress[-1] == len(expected[0].splitlines()), progress
    resumed = cli("run", scenario, "--quiet", "--run-dir", crashed)
    assert resumed.returncode == 0, resumed.stderr
    assert exports(crashed) == expected  # byte for byte, whoever played which match
