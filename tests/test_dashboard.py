"""The dashboard and `arena watch`, as a person following a run sees them; and Ctrl-C, then resuming."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from collections import defaultdict

import yaml
from rich.console import Console

from arena.cli.dashboard import Dashboard
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore

from helpers import ROOT

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ERASE_LINE = "\x1b[2K"  # rich's live display erases its previous frame line by line before drawing the next

AGENTS = {
    "giver": {"backend": "scripted", "strategy": "always_all"},
    "taker": {"backend": "scripted", "strategy": "free_rider"},
    "mirror": {"backend": "scripted", "strategy": "tit_for_tat"},
    "dice": {"backend": "scripted", "strategy": "random_contributor"},
}


def scenario_dict(delay: float = 0.0, rounds: int = 5, repeats: int = 2, concurrency: int = 4) -> dict:
    agents = {name: {**raw, "delay": delay} if delay else dict(raw) for name, raw in AGENTS.items()}
    return {
        "name": "dash",
        "seed": 11,
        "agents": agents,
        "games": [{"game": "public_goods", "seats": 3, "params": {"rounds": rounds}}],
        "tournament": {"format": "round_robin", "repeats": repeats},
        "concurrency": concurrency,
    }


def final_frame(output: str) -> str:
    """What stays on the screen once the live display has stopped: its last frame, as plain text."""
    return ANSI.sub("", output.split(ERASE_LINE)[-1])


def expected_means(records) -> dict[str, float]:
    payoffs = defaultdict(list)
    for record in records:
        for seat in record.seats:
            payoffs[seat.agent].append(record.payoffs[seat.label])
    return {agent: sum(v) / len(v) for agent, v in payoffs.items()}


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "arena.cli", *map(str, args)]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def finished_in_store(run_dir) -> int:
    if not (run_dir / "run.sqlite").exists():
        return 0
    store = RunStore.open(run_dir)
    try:
        return store.counts().get("finished", 0)
    except Exception:  # the run is still creating its tables
        return 0
    finally:
        store.close()


# -- the dashboard over a run in this process ---------------------------------------------------
async def test_dashboard_shows_progress_latest_messages_and_the_leaderboard():
    scenario = parse_scenario(scenario_dict())
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=140), "t") as view:
        result = await run_tournament(scenario, None, view)
    records = result.records
    n = len(records)
    assert n == 8  # 4 tables of 3 among 4 agents, 2 repeats
    screen = final_frame(buffer.getvalue())
    assert screen.splitlines()[0].strip() == "t"
    assert re.search(rf"matches .*\b{n}/{n}\b.*/s.*done", screen), screen
    # the leaderboard: every agent with its match count and its mean payoff over all finished matches
    assert f"public_goods · {n} matches" in screen
    for agent, mean in expected_means(records).items():
        count = sum(agent in [s.agent for s in r.seats] for r in records)
        assert re.search(rf"^\s*{agent}\s+{count}\s+{mean:.2f}\s*$", screen, re.M), (agent, mean, screen)
    # the latest messages name seats with the agent behind them: known to the watcher, never to the agents
    feed = screen[screen.index("latest messages"):screen.index("public_goods ·")]
    assert re.search(r"Player \d \((giver|taker|mirror|dice)\)\s+→ referee only\s+\{\"reason\"", feed), feed
    assert "Referee" in feed and "Round 5 is over" in feed


async def test_dashboard_flags_invalid_replies_and_counts_resumed_matches_as_done(tmp_path):
    raw = {
        "name": "noisy",
        "agents": {"giver": AGENTS["giver"], "noise": {"backend": "scripted", "strategy": "garbage"}},
        "games": [{"game": "public_goods", "params": {"rounds": 1}}],
        "match": {"max_retries": 1},
    }
    scenario = parse_scenario(raw)
    text = yaml.safe_dump(raw)
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, text, scenario.fingerprint())
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=140), "noisy") as view:
        await run_tournament(scenario, store, view)
    screen = final_frame(buffer.getvalue())
    assert re.search(r"r1\s+Player \d \(noise\)\s+.*INVALID \(attempt 2\)", screen), screen
    assert "1/1" in screen

    # played again, the run replays nothing: the match counts as done at once, and says so
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, text, scenario.fingerprint())
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=140), "noisy") as view:
        await run_tournament(scenario, store, view)
    screen = final_frame(buffer.getvalue())
    assert re.search(r"\b1/1\b.*—/s.*done · 1 done before", screen), screen
    assert re.search(r"^\s*giver\s+1\s+\d+\.\d\d\s*$", screen, re.M), screen
    store.close()


# -- arena watch: following a run another process plays ----------------------------------------
def test_watch_follows_a_run_in_another_process_and_ends_with_its_results(tmp_path):
    scenario_file = tmp_path / "dash.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario_dict(delay=0.05, rounds=10, concurrency=2)), encoding="utf-8")
    run_dir = tmp_path / "run"
    run_log, watch_log = tmp_path / "run.out", tmp_path / "watch.out"
    with open(run_log, "w") as run_out, open(watch_log, "w") as watch_out:
        run = subprocess.Popen(cli("run", scenario_file, "--run-dir", run_dir, "--plain"), cwd=ROOT,
                               stdout=run_out, stderr=subprocess.STDOUT)
        watch = None
        try:
            wait_for(lambda: (run_dir / "run.sqlite").exists(), 30, "the run to create its store")
            watch = subprocess.Popen(cli("watch", run_dir, "--interval", "0.1"), cwd=ROOT,
                                     stdout=watch_out, stderr=subprocess.PIPE, text=True)
            assert watch.wait(timeout=120) == 0, watch.stderr.read()
            assert run.wait(timeout=30) == 0, run_log.read_text()
        finally:
            stop(run)
            if watch is not None:
                stop(watch)
                watch.stderr.close()
    lines = watch_log.read_text(encoding="utf-8").splitlines()
    text = "\n".join(lines) + "\n"

    # it says what it is watching, then one line per message, seat labels beside agent names
    head = re.fullmatch(rf"Watching dash in {re.escape(str(run_dir))}: (\d+) of 8 matches done so far\.", lines[0])
    assert head, lines[0]
    already = int(head.group(1))
    assert already < 8  # it really did follow the run
    said = [l for l in lines if re.match(r"\[public_goods#\d:[a-z+]+\] r\d+ ", l)]
    assert any(re.match(r"\[public_goods#\d:[a-z+]+\] r\d+ Player \d \((giver|taker|mirror|dice)\) -> referee only: \{", l)
               for l in said), said[:5]
    assert any(re.match(r"\[public_goods#\d:[a-z+]+\] r\d+ Referee -> Player \d: Round \d+ is over", l) for l in said)

    # one line per match finished while it watched, with each seat's agent and payoff
    ended = [l for l in lines if re.match(r"\[public_goods#\d:[a-z+]+\] finished: ", l)]
    keys = [l[1:l.index("]")] for l in ended]
    assert len(keys) == len(set(keys)) == 8 - already
    assert all(re.search(r"finished: Player 1 \(\w+\)=[\d.]+, Player 2 \(\w+\)=[\d.]+, Player 3 \(\w+\)=[\d.]+$", l)
               for l in ended), ended

    # then the run's status and its results table: the same as `arena rank` prints
    status = next(i for i, l in enumerate(lines) if l.startswith("Run dash in "))
    assert lines[status] == f"Run dash in {run_dir}: finished — 8 finished, 0 failed, of 8 planned."
    results = "\n".join(lines[status + 1:]) + "\n"
    for agent in AGENTS:
        assert re.search(rf"│ {agent}\s+│\s+6 │", results), results
    rank = subprocess.run(cli("rank", run_dir), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert rank.returncode == 0
    assert results == rank.stdout
    assert text.endswith(rank.stdout)


def test_watching_a_finished_run_prints_its_status_and_results(run_cli, tmp_path):
    scenario_file = tmp_path / "dash.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario_dict()), encoding="utf-8")
    run_dir = tmp_path / "run"
    assert run_cli("run", scenario_file, "--run-dir", run_dir, "--quiet").returncode == 0
    watched = run_cli("watch", run_dir)
    assert watched.returncode == 0, watched.stderr
    first, rest = watched.stdout.split("\n", 1)
    assert first == f"Run dash in {run_dir}: finished — 8 finished, 0 failed, of 8 planned."
    assert rest == run_cli("rank", run_dir).stdout


# -- Ctrl-C, then the same command again ------------------------------------------------------
def test_ctrl_c_keeps_finished_matches_and_the_same_command_resumes_to_the_same_results(run_cli, tmp_path):
    scenario_file = tmp_path / "dash.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario_dict(delay=0.05, rounds=10, concurrency=2)), encoding="utf-8")
    runs = tmp_path / "runs"
    run_dir = runs / "dash"
    log = tmp_path / "first.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(cli("run", scenario_file, "--run-dir", run_dir, "--plain"), cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT)
        try:
            wait_for(lambda: finished_in_store(run_dir) >= 1, 60, "a first finished match")
            time.sleep(0.3)
            proc.send_signal(signal.SIGINT)
            assert proc.wait(timeout=30) == 130
        finally:
            stop(proc)
    first = log.read_text(encoding="utf-8")
    assert f"Interrupted. Finished matches are kept in {run_dir}; run the same command to resume." in first
    kept = finished_in_store(run_dir)
    assert 1 <= kept < 8

    listed = run_cli("runs", runs, env={**os.environ, "COLUMNS": "250"})
    assert listed.returncode == 0
    row = next(l for l in listed.stdout.splitlines() if str(run_dir) in l)
    assert re.search(rf"│ dash\s+│ interrupted\s+│ {kept}\s+│ 0\s+│ 8\s+│", row), row

    resumed = run_cli("run", scenario_file, "--run-dir", run_dir, "--plain")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"Resuming the run in {run_dir}: {kept} finished matches are kept." in resumed.stdout
    assert f"8 of 8 matches finished, {kept} from the earlier run." in " ".join(resumed.stdout.split())

    fresh_dir = tmp_path / "fresh"
    assert run_cli("run", scenario_file, "--run-dir", fresh_dir, "--quiet").returncode == 0

    def exported(d):
        out = run_cli("export", d, "--format", "jsonl")
        assert out.returncode == 0
        return sorted((json.loads(line) for line in out.stdout.splitlines()), key=lambda r: r["key"])

    after_resume, uninterrupted = exported(run_dir), exported(fresh_dir)
    assert len(after_resume) == 8 and all(r["status"] == "finished" for r in after_resume)
    assert after_resume == uninterrupted
