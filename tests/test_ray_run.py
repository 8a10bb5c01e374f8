"""A run played by Ray actors is followed, stopped and resumed as one played by the run's own process:
its events reach the store and the live dashboard as its matches go (so `arena watch` follows it), a
model server that goes down mid-run stops it as it stops a local run (nothing scored from the failed
calls) and `arena run` again finishes it to the export of an uninterrupted run, and until_stable and
an adaptive schedule stop where a local run stops, with the same export byte for byte.

The budget under Ray is tests/test_ray_global.py's; the driver's memory is bench/memory.py's
(``--executor ray``). One local Ray instance (127.0.0.1, no dashboard, 2 CPUs) serves the module.
Nothing leaves 127.0.0.1."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import threading
import time
from collections import defaultdict
from pathlib import Path

import pytest
import trio
import yaml
from rich.console import Console

from arena.cli.dashboard import Dashboard
from arena.contract import open_run
from arena.run.runner import Observer, run_tournament
from arena.run.scenario import Execution, parse_scenario
from arena.store import RunStore
from arena.store.follower import Follower

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import ROOT
from mock_llm import OpenAIMock
from test_dashboard import figures, scenario_dict
from test_outage import a_server_killed_mid_run, environment
from test_ray_executor import cli, cluster, exported, needs_ray, no_workers_left, write  # noqa: F401

pytestmark = needs_ray

RAY = ("--executor", "ray", "--workers", "2")


# -- the live dashboard and `arena watch` ---------------------------------------------------------


class Feeds(Observer):
    """Hands everything to the run's dashboard, as `arena run` does, and keeps what each match said to it,
    in order; ``one_finished`` is set when the first match is reported over."""

    def __init__(self, dashboard: Dashboard):
        self.dashboard = dashboard
        self.said: dict[str, list[str]] = defaultdict(list)
        self.ended: list[str] = []
        self.one_finished = threading.Event()
        self.planned, self.call_started, self.call, self.note = (dashboard.planned, dashboard.call_started,
                                                                  dashboard.call, dashboard.note)

    def event(self, event) -> None:
        self.said[event.match].append(event.type)
        self.dashboard.event(event)

    def finished(self, record, resumed) -> None:
        self.ended.append(record.key)
        self.dashboard.finished(record, resumed)
        self.one_finished.set()


def watched_scenario(url: str) -> dict:
    """test_dashboard's run that `arena watch` follows: four agents, one of them a model, at tables of
    three, twice: 8 matches, 6 of them with the model."""
    raw = scenario_dict(rounds=3, concurrency=2)
    del raw["agents"]["dice"]
    raw["agents"]["model"] = {"backend": "openai", "model": "mock-model", "base_url": url, "timeout": 600}
    raw["match"] = {"turn_timeout": 600}
    return raw


async def _play(tmp_path: Path, name: str, raw: dict, observer: Observer, execution: Execution | None):
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / name, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
    try:
        return await run_tournament(scenario, store, observer, execution=execution)
    finally:
        store.close()


def _dashboard(specs) -> Dashboard:
    return Dashboard(Console(file=io.StringIO(), width=160), "live", specs=specs)


async def test_arena_watch_and_the_dashboard_follow_a_ray_run_as_its_matches_go(tmp_path, capsys, monkeypatch, cluster):
    """The model's first request is held until `arena watch`, in another process, has shown it in flight
    and a match finished: the watcher sees the run's matches start and end while it plays (not all at
    its end), whatever the machine's load. The run's own dashboard is fed what a local run feeds it."""
    monkeypatch.setenv("COLUMNS", "200")  # `arena rank` here prints its table as wide as the watcher's
    shown, released = threading.Event(), threading.Event()
    first = threading.Lock()
    held = [False]
    watch_lines: list[str] = []

    def responder(body):
        with first:
            hold, held[0] = not held[0], True
        if hold:  # the first request of the run, wherever it comes from: held until the watcher has looked
            released.wait(120)
        return {"reason": "a few", "coins": 3}

    def read(stream) -> None:
        seen_call = seen_end = False
        for line in stream:
            watch_lines.append(line.rstrip("\n"))
            seen_call |= "is asked: model call in flight" in line
            seen_end |= bool(re.match(r"\[public_goods#\d:Player=[0-9+]+\] finished: ", line))
            if seen_call and seen_end:
                shown.set()

    with OpenAIMock(responder=responder) as mock:
        raw = watched_scenario(mock.base_url)
        local = Feeds(_dashboard(None))
        held[0] = True  # the local run, for reference: nothing held
        assert (await _play(tmp_path, "local", raw, local, None)).count("finished") == 8
        held[0] = False

        run_dir = tmp_path / "ray"
        scenario = parse_scenario(raw)
        store = RunStore.create_or_resume(run_dir, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        runner = Feeds(_dashboard(store.spec))
        watch = subprocess.Popen([sys.executable, "-m", "arena.cli", "watch", str(run_dir), "--interval", "0.1"],
                                 cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                 env=environment())
        reader = threading.Thread(target=read, args=(watch.stdout,), daemon=True)
        reader.start()
        try:
            result = None

            async def play():
                nonlocal result
                result = await run_tournament(scenario, store, runner, execution=Execution(executor="ray", workers=2))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(play)
                try:
                    assert await trio.to_thread.run_sync(shown.wait, 120), "\n".join(watch_lines)
                    during = list(watch_lines)  # what the watcher had said while the run played
                    # the match the watcher saw end is told to the dashboard just after its commit
                    assert await trio.to_thread.run_sync(runner.one_finished.wait, 60)
                    ended_during = list(runner.ended)
                finally:
                    released.set()
            assert await trio.to_thread.run_sync(lambda: watch.wait(timeout=120)) == 0, watch.stderr.read()
            await trio.to_thread.run_sync(reader.join, 30)
        finally:
            released.set()
            if watch.poll() is None:
                watch.kill()
            watch.wait(timeout=10)
            watch.stdout.close()
            watch.stderr.close()
            store.close()

    assert result.count("finished") == 8
    head = re.fullmatch(rf"Watching dash in {re.escape(str(run_dir))}: (\d+) of 8 matches done so far\.", watch_lines[0])
    assert head and int(head.group(1)) < 8, watch_lines[0]  # it joined a run under way
    # while the model's first request was held, the watcher had seen the match that asked it and another one end,
    # and the run's dashboard had been told of a match over: events travelled as they happened, not at the end
    assert any(re.fullmatch(r"\[public_goods#\d:Player=[0-9+]+\] r1 Player \d \(model\) is asked: model call in flight",
                            line) for line in during), during
    assert any(" finished: " in line for line in during) and 1 <= len(ended_during) < 8
    ended = [line for line in watch_lines if re.match(r"\[public_goods#\d:Player=[0-9+]+\] finished: ", line)]
    assert len(ended) == len({line.split("]")[0] for line in ended}) == 8 - int(head.group(1))
    status = next(i for i, line in enumerate(watch_lines) if line.startswith("Run dash in "))
    assert watch_lines[status] == f"Run dash in {run_dir}: finished — 8 finished, 0 failed, of 8 planned."
    capsys.readouterr()
    assert cli("rank", run_dir) == 0
    assert "\n".join(watch_lines[status + 1:]) + "\n" == capsys.readouterr().out  # the results `arena rank` prints

    # the run's dashboard was told each match's events in the order a local run tells them, and the same calls
    assert dict(runner.said) == dict(local.said) and sorted(runner.ended) == sorted(local.ended)
    end = runner.dashboard.snapshot()
    assert (end.planned, end.done, end.failed, end.in_flight) == (8, 8, 0, 0)
    assert end.agents["model"].calls == local.dashboard.snapshot().agents["model"].calls == 6 * 3
    # and it shows what `arena watch`'s reader of the store shows, figure for figure
    reading = open_run(run_dir)
    try:
        watcher = _dashboard(reading.spec)
        watcher.follow(Follower(reading).poll(), time.time())
        now = time.time()
        assert figures(runner.dashboard.snapshot(now)) == figures(watcher.snapshot(now))
    finally:
        reading.close()
    assert exported(run_dir, capsys) == exported(tmp_path / "local", capsys)
    assert no_workers_left()


# -- a model server that goes down mid-run ----------------------------------------------------------


def test_a_server_killed_mid_ray_run_stops_it_and_a_rerun_gives_the_uninterrupted_results(tmp_path, capsys, cluster):
    """tests/test_outage.py's first case, played by two Ray actors: the actors call the server, the run's
    process hears of the outage, waits outage_wait, stops with status 4 and scores nothing of the failed
    calls; `arena run` again on the cluster plays what is missing, asks only what was never answered, and
    exports what a local run that saw no outage exports."""
    def on_the_cluster(path: Path, run_dir: Path, view: str):  # in this process, the cluster's driver
        capsys.readouterr()
        code = []
        run = threading.Thread(target=lambda: code.append(cli("run", path, view, "--run-dir", run_dir, *RAY)))
        run.start()

        def ended() -> tuple[int, str]:
            run.join(timeout=180)
            assert not run.is_alive(), "the run did not end"
            captured = capsys.readouterr()
            return code[0], captured.out + captured.err
        return ended

    a_server_killed_mid_run(tmp_path, capsys, on_the_cluster)
    assert no_workers_left()


# -- until_stable and an adaptive schedule -------------------------------------------------------------


def until_stable() -> dict:
    """Two coin-flipping contributors: until_stable adds blocks of 4 repeats, judging after each."""
    return {"name": "stable", "seed": 3,
            "agents": {"x": {"backend": "scripted", "strategy": "random_contributor"},
                       "y": {"backend": "scripted", "strategy": "random_contributor"},
                       "z": {"backend": "scripted", "strategy": "tit_for_tat"}},
            "games": [{"game": "public_goods", "params": {"rounds": 3}}],
            "tournament": {"repeats": {"block": 4, "min": 8, "max": 24, "tau": 0.9, "width_abs": 2.0}},
            "concurrency": 4}


def adaptive() -> dict:
    """scenarios/pairwise-review-adaptive.yaml: three synthetic judges, blocks of 20 comparisons chosen by
    the outcomes so far, until the ranking is stable or 200 comparisons are spent."""
    raw = yaml.safe_load((ROOT / "scenarios" / "pairwise-review-adaptive.yaml").read_text(encoding="utf-8"))
    params = raw["games"][0]["params"]
    params["questions"] = str(ROOT / "scenarios" / params["questions"])
    params["answers"] = [str(ROOT / "scenarios" / answer) for answer in params["answers"]]
    return raw


def stopped(run_dir: Path) -> tuple:
    """Where and why a run stopped adding matches: its stability checks, its notes and its status."""
    reading = open_run(run_dir)
    try:
        return (reading.stability(), [(n["topic"], n["agent"], n["text"]) for n in reading.notes()],
                reading.status(), reading.counts())
    finally:
        reading.close()


@pytest.mark.parametrize("scenario", [until_stable, adaptive], ids=["until-stable", "adaptive"])
def test_blocks_added_by_results_stop_under_ray_where_they_stop_locally(tmp_path, capsys, cluster, scenario):
    path = write(tmp_path / "s.yaml", scenario())
    assert cli("run", path, "--quiet", "--run-dir", tmp_path / "local") == 0
    assert cli("run", path, "--quiet", "--run-dir", tmp_path / "ray", *RAY) == 0
    local = stopped(tmp_path / "local")
    assert stopped(tmp_path / "ray") == local
    if scenario is until_stable:  # judged after each block, more than once
        assert len(local[0]) >= 2 and local[0][-1]["done"]
    else:  # the schedule said once why it stopped, before its last comparison
        assert [topic for topic, _, _ in local[1]].count("schedule") == 1
        assert local[3]["finished"] < 360
    assert exported(tmp_path / "ray", capsys) == exported(tmp_path / "local", capsys)  # the same matches, byte for byte
