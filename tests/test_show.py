"""`arena show` as a user reads it: a killed run's matches, and a match's turns in the order they happened."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import time

import yaml

from arena.contract import open_run

WIDE = {**os.environ, "COLUMNS": "250"}


def scenario(**top) -> dict:
    slow = {"delay": 0.05}  # 10 rounds of 50 ms: a match is under way long enough to be killed in it
    return {"name": "killed", "seed": 4,
            "agents": {"giver": {"backend": "scripted", "strategy": "always_all", **slow},
                       "taker": {"backend": "scripted", "strategy": "free_rider", **slow}},
            "games": [{"game": "public_goods", "params": {"rounds": 10}}],
            "tournament": {"format": "round_robin", "repeats": 4}, "concurrency": 1, **top}


def running_in_store(run_dir) -> int:
    if not (run_dir / "run.sqlite").exists():
        return 0
    try:
        store = open_run(run_dir)
    except Exception:  # the run is still creating its store
        return 0
    try:
        return [status for _, status in store.match_keys()].count("running")
    except Exception:
        return 0
    finally:
        store.close()


def state(pid: int) -> str:
    with open(f"/proc/{pid}/status") as status:
        return next(line.split()[1] for line in status if line.startswith("State:"))


def wait_for(condition, what: str, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.02)


def test_show_lists_the_match_a_killed_run_was_playing_as_interrupted_while_its_process_is_a_zombie(run_cli, tmp_path):
    scenario_file = tmp_path / "killed.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario()), encoding="utf-8")
    run_dir = tmp_path / "run"
    run = subprocess.Popen([sys.executable, "-m", "arena.cli", "run", scenario_file, "--run-dir", run_dir, "--quiet"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for(lambda: running_in_store(run_dir) == 1, "a match under way")
        run.kill()  # and not collected yet: the process is a zombie, its pid still taken
        wait_for(lambda: state(run.pid) == "Z", "the killed run to be a zombie")
        shown = run_cli("show", run_dir, env=WIDE)
        runs = run_cli("runs", tmp_path, env=WIDE)
    finally:
        run.kill()
        run.wait()
    assert shown.returncode == 0, shown.stderr
    statuses = re.findall(r"^│ public_goods#\S+\s+│ (\w+)\s+│", shown.stdout, re.M)
    assert statuses.count("interrupted") == 1 and "running" not in statuses, shown.stdout
    assert runs.returncode == 0 and "stopped (resumable)" in runs.stdout, runs.stdout


def test_show_prints_a_matchs_turns_in_the_order_they_happened(run_cli, tmp_path):
    """A reply refused, then asked again: the prompt, the failed attempt, the re-ask, the default, in that order."""
    raw = {"name": "noisy", "seed": 2,
           "agents": {"giver": {"backend": "scripted", "strategy": "always_all"},
                      "noise": {"backend": "scripted", "strategy": "garbage"}},
           "games": [{"game": "public_goods", "params": {"rounds": 1}}], "tournament": {"format": "fixed"},
           "match": {"max_retries": 1}}
    scenario_file = tmp_path / "noisy.yaml"
    scenario_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
    run_dir = tmp_path / "run"
    assert run_cli("run", scenario_file, "--run-dir", run_dir, "--quiet").returncode == 0
    store = open_run(run_dir)
    [record] = store.records()
    store.close()
    noise = next(s.label for s in record.seats if s.agent == "noise")
    shown = run_cli("show", run_dir, "--match", record.key, env=WIDE)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()

    def first(pattern: str, after: int = -1) -> int:
        return next(i for i, line in enumerate(lines) if i > after and re.search(pattern, line))

    prompt = first(rf"^  Referee \[prompt; to {noise}\]")
    failed = first(rf"^  ✗ {noise} \(noise\) attempt 1: invalid", prompt)
    again = first(rf"^  ✗ {noise} \(noise\) attempt 2: invalid", failed)
    default = first(rf"^  → {noise} action: .* \(default\) — no valid reply in 2 attempts", again)
    assert prompt < failed < again < default, shown.stdout
