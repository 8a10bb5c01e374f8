"""The Ray executor against the run's own process and forked workers, measured in one run.

Three figures. (1) What a Ray call costs: the round trip of an empty actor method, against the
time a scripted match takes; it is why a worker plays many matches over one socket, never one
Ray task per match. (2) A CPU-bound tournament (public goods, 4 scripted seats that answer at
once, 20 rounds, 16 matches at once, the store on): local, 2 forked processes, then 1 and 2 Ray
actors; wall seconds include placing the actors (measured apart: "start s"). (3) An I/O-bound
one: 5-round matches of agents that wait 100 ms a turn, 128 at once, whose ideal wall time is
matches / 128 × 5 × 0.1 s; local against 2 Ray actors (the overhead) and wall / ideal.

A local Ray instance is started once for all of it (its start is printed, not counted). On a
machine with 2 cores the run's process, the actors and Ray's own daemons share them, so the
CPU-bound speed-up is bounded by the cores, not the executor.

    python bench/distributed.py            # 200 CPU-bound matches, 1,000 I/O-bound
    python bench/distributed.py --quick    # 60 and 256
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import time
from pathlib import Path

import trio
import yaml

from arena.run import ray_workers
from arena.run.runner import run_tournament
from arena.run.scenario import Execution, parse_scenario
from arena.store import RunStore
from machine import load, machine_speed  # bench/machine.py: the load and a reference loop's speed

STRATEGIES = ("tit_for_tat", "free_rider", "always_all", "conditional_cooperator")
PLACED: list[float] = []  # seconds each RayWorkers.start took


def scenario_dict(matches: int, rounds: int, at_once: int, delay: float) -> dict:
    return {
        "name": "bench-distributed", "seed": 2,
        "agents": {f"p{i}": {"backend": "scripted", "strategy": s, "delay": delay} for i, s in enumerate(STRATEGIES)},
        "games": [{"game": "public_goods", "params": {"rounds": rounds}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},
    }


def play(raw: dict, execution: Execution) -> float:
    scenario = parse_scenario(raw)
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = RunStore.create_or_resume(Path(tmp) / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        try:
            start = time.perf_counter()
            result = trio.run(run_tournament, scenario, store, None, None, True, None, None, execution)
            seconds = time.perf_counter() - start
        finally:
            store.close()
    matches = raw["tournament"]["repeats"]
    if result.count("finished") != matches:
        raise SystemExit(f"only {result.count('finished')} of {matches} matches finished")
    return seconds


def timed_start() -> None:
    original = ray_workers.RayWorkers.start.__func__

    def start(cls, ray, job):
        begun = time.perf_counter()
        try:
            return original(cls, ray, job)
        finally:
            PLACED.append(time.perf_counter() - begun)

    ray_workers.RayWorkers.start = classmethod(start)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 CPU-bound matches, 256 I/O-bound")
    args = parser.parse_args()
    cpu_matches, io_matches = (60, 256) if args.quick else (200, 1000)
    import ray

    print(f"Python {sys.version.split()[0]}; Ray {ray.__version__}; {os.cpu_count()} cores; {load()}; "
          f"reference loop {machine_speed():.0f} ms")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    begun = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             logging_level=logging.WARNING)
    print(f"a local Ray instance started in {time.perf_counter() - begun:.1f} s (not counted below)\n")
    timed_start()
    try:
        echo = ray.remote(num_cpus=0)(Echo).remote()
        ray.get(echo.ping.remote())
        begun = time.perf_counter()
        for _ in range(200):
            ray.get(echo.ping.remote())
        round_trip = (time.perf_counter() - begun) / 200 * 1000
        ray.kill(echo)
        raw = scenario_dict(cpu_matches, 20, 16, 0.0)
        play(scenario_dict(4, 20, 16, 0.0), Execution())  # imports, plugin loading, pydantic caches
        local = play(raw, Execution())
        print(f"(1) a Ray actor call's round trip: {round_trip:.2f} ms; a scripted 20-round match in the run's own "
              f"process: {local / cpu_matches * 1000 * 16:.1f} ms of wall at 16 at once, "
              f"{local / cpu_matches * 1000:.2f} ms of the run's time\n")
        print(f"(2) CPU-bound: {cpu_matches} matches, 4 scripted seats, 20 rounds, 16 at once, store on")
        header = f"{'executor':>12} {'wall s':>7} {'start s':>7} {'matches/s':>9} {'speed-up':>8}"
        print(header + "\n" + "-" * len(header))
        print(f"{'local':>12} {local:>7.2f} {0:>7.2f} {cpu_matches / local:>9.1f} {1:>7.2f}×")
        for name, execution in (("processes 2", Execution(executor="processes", workers=2)),
                                ("ray 1", Execution(executor="ray", workers=1)),
                                ("ray 2", Execution(executor="ray", workers=2))):
            PLACED.clear()
            seconds = play(raw, execution)
            placed = sum(PLACED)
            print(f"{name:>12} {seconds:>7.2f} {placed:>7.2f} {cpu_matches / seconds:>9.1f} {local / seconds:>7.2f}×")
        raw = scenario_dict(io_matches, 5, 128, 0.1)
        ideal = io_matches / 128 * 5 * 0.1
        print(f"\n(3) I/O-bound: {io_matches} matches of 5 rounds, agents waiting 100 ms a turn, 128 at once; "
              f"ideal {ideal:.2f} s")
        header = f"{'executor':>12} {'wall s':>7} {'start s':>7} {'wall/ideal':>10} {'vs local':>8}"
        print(header + "\n" + "-" * len(header))
        local = play(raw, Execution())
        print(f"{'local':>12} {local:>7.2f} {0:>7.2f} {local / ideal:>10.2f} {1:>7.2f}×")
        PLACED.clear()
        seconds = play(raw, Execution(executor="ray", workers=2))
        placed = sum(PLACED)
        print(f"{'ray 2':>12} {seconds:>7.2f} {placed:>7.2f} {seconds / ideal:>10.2f} {seconds / local:>7.2f}×")
        print(f"{'ray 2 − start':>12} {seconds - placed:>7.2f} {'':>7} {(seconds - placed) / ideal:>10.2f} "
              f"{(seconds - placed) / local:>7.2f}×")
    finally:
        ray.shutdown()
    print("\n" + load())
    return 0


class Echo:
    def ping(self) -> int:
        return 0


if __name__ == "__main__":
    sys.exit(main())
