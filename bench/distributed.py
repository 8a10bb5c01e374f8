"""The Ray executor against the run's own process and forked workers, measured in one run.

Four figures. (1) What a Ray call costs: the round trip of an empty actor method, against the
time a scripted match takes; it is why a worker plays many matches over one socket, never one
Ray task per match. (2) A CPU-bound tournament whose work is the workers': code review with
sandboxed tests (scripted programmer, reviewer and judge; each match runs the final program
against its HumanEval tests in the sandbox), one match per worker at a time, on 1 and on 2 Ray
actors: the speed-up of the second worker (goal >= 1.7x), and how busy the machine was. (3) A
CPU-bound tournament whose work is the run's own process's: public goods, 4 scripted seats that
answer at once, 20 rounds, 16 at once, the store on, so the run's process, the one writer,
stores 346 rows a match (244 messages, 102 events): local, 2 forked processes, 1 and 2 Ray
actors. "run ms/m" is the CPU the run's own process spent per match (all its threads, Ray's
client included): under Ray, the one writer's cost of a match, which bounds how many matches a
second one run can take in, however many workers it has. (4) An I/O-bound one in
`bench/concurrency.py`'s shape: 1,000 one-round matches of two agents that wait 100 ms, 128 at
once, ideal ceil(1000 / 128) x 0.1 s: local against 2 Ray actors (goals: overhead <= 1.15x,
wall/ideal <= 1.30 with 2 workers), and the least wall time the CPU the machine spent allows on
its cores. Wall seconds include placing the actors; "start s" is that part, measured apart, and
"- start" lines take it out.

A local Ray instance is started once for all of it (its start is printed, not counted). On a
machine with 2 cores the run's process, the actors and Ray's own daemons share them, so a
speed-up is bounded by the cores, not the executor.

    python bench/distributed.py            # 120 code review matches, 200 public goods, 1,000 I/O-bound
    python bench/distributed.py --quick    # 36, 60 and 256
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
from arena.run.tournament import count
from arena.store import RunStore
from machine import load, machine_speed  # bench/machine.py: the load and a reference loop's speed

ROOT = Path(__file__).resolve().parent.parent
CORES = os.cpu_count() or 1
STRATEGIES = ("tit_for_tat", "free_rider", "always_all", "conditional_cooperator")
PLACED: list[float] = []  # seconds each RayWorkers.start took
PLACED_CPU: list[float] = []  # the machine's CPU seconds in each RayWorkers.start (new processes importing Arena)
RUN_CPU: list[float] = []  # CPU seconds of the run's own process (all its threads) in each play()
BUSY: list[float] = []  # CPU seconds of the whole machine (every process: workers, Ray's daemons) in each play()


def machine_cpu() -> float:
    """Seconds of CPU the machine has spent, all cores, since it started (Linux's /proc/stat)."""
    with open("/proc/stat", encoding="ascii") as stat:
        ticks = [int(x) for x in stat.readline().split()[1:]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")  # less idle and I/O wait


def scenario_dict(matches: int, rounds: int, at_once: int, delay: float) -> dict:
    return {
        "name": "bench-distributed", "seed": 2,
        "agents": {f"p{i}": {"backend": "scripted", "strategy": s, "delay": delay} for i, s in enumerate(STRATEGIES)},
        "games": [{"game": "public_goods", "params": {"rounds": rounds}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},
    }


def waiting_dict(matches: int, at_once: int) -> dict:
    """`bench/concurrency.py`'s matches: two seats that wait 100 ms, one round."""
    return {
        "name": "bench-distributed-io", "seed": 11,
        "agents": {"left": {"backend": "scripted", "strategy": "tit_for_tat", "delay": 0.1},
                   "right": {"backend": "scripted", "strategy": "free_rider", "delay": 0.1}},
        "games": [{"game": "public_goods", "params": {"rounds": 1, "mode": 2}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},
    }


def code_review_dict(problems: int, at_once: int) -> dict:
    """The offline code review scenario on its first ``problems`` HumanEval problems: 6 matches each."""
    raw = yaml.safe_load((ROOT / "scenarios" / "code-review.yaml").read_text(encoding="utf-8"))
    raw["games"][0]["params"]["limit"] = problems
    raw["concurrency"] = {"matches": at_once}
    return raw


def play(raw: dict, execution: Execution) -> float:
    scenario = parse_scenario(raw)
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = RunStore.create_or_resume(Path(tmp) / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        try:
            start, cpu, busy = time.perf_counter(), time.process_time(), machine_cpu()
            result = trio.run(run_tournament, scenario, store, None, None, True, None, None, execution)
            seconds = time.perf_counter() - start
            RUN_CPU.append(time.process_time() - cpu)
            BUSY.append(machine_cpu() - busy)
        finally:
            store.close()
    matches = count(scenario)
    if result.count("finished") != matches:
        raise SystemExit(f"only {result.count('finished')} of {matches} matches finished")
    return seconds


def timed_start() -> None:
    original = ray_workers.RayWorkers.start.__func__

    def start(cls, ray, job, *rest):
        begun, busy = time.perf_counter(), machine_cpu()
        try:
            return original(cls, ray, job, *rest)
        finally:
            PLACED.append(time.perf_counter() - begun)
            PLACED_CPU.append(machine_cpu() - busy)

    ray_workers.RayWorkers.start = classmethod(start)


def row(name: str, seconds: float, placed: float, matches: int, base: float, cpu: float | None = None) -> str:
    """A line of a table; ``cpu``: the run's CPU seconds (default: the last play's)."""
    cpu = RUN_CPU[-1] if cpu is None else cpu
    return (f"{name:>14} {seconds:>7.2f} {placed:>7.2f} {matches / seconds:>9.1f} {base / seconds:>7.2f}× "
            f"{cpu / matches * 1000:>9.2f}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="36 code review matches, 60 public goods, 256 I/O-bound")
    args = parser.parse_args()
    problems, cpu_matches, io_matches = (6, 60, 256) if args.quick else (20, 200, 1000)
    import ray

    print(f"Python {sys.version.split()[0]}; Ray {ray.__version__}; {os.cpu_count()} cores; {load()}; "
          f"reference loop {machine_speed():.0f} ms")
    os.environ["RAY_USAGE_STATS_ENABLED"] = "0"
    begun = time.perf_counter()
    ray.init(num_cpus=os.cpu_count(), include_dashboard=False, _node_ip_address="127.0.0.1", log_to_driver=False,
             logging_level=logging.WARNING)
    print(f"a local Ray instance started in {time.perf_counter() - begun:.1f} s (not counted below)\n")
    timed_start()
    header = f"{'executor':>14} {'wall s':>7} {'start s':>7} {'matches/s':>9} {'speed-up':>8} {'run ms/m':>9}"
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
        local, local_cpu = play(raw, Execution()), RUN_CPU[-1]
        print(f"(1) a Ray actor call's round trip: {round_trip:.2f} ms; a scripted 20-round match in the run's own "
              f"process: {local / cpu_matches * 1000 * 16:.1f} ms of wall at 16 at once, "
              f"{local / cpu_matches * 1000:.2f} ms of the run's time\n")

        matches = problems * 6
        print(f"(2) CPU-bound in the workers: {matches} code review matches with sandboxed tests, one match per "
              f"worker at a time")
        print(header + "\n" + "-" * len(header))
        alone = play(code_review_dict(problems, 1), Execution())
        print(row("local", alone, 0, matches, alone))
        walls, busy = {}, {}
        for workers in (1, 2):
            PLACED.clear()
            walls[workers] = play(code_review_dict(problems, workers), Execution(executor="ray", workers=workers))
            busy[workers] = BUSY[-1] / walls[workers] / CORES
            print(row(f"ray {workers}", walls[workers], sum(PLACED), matches, alone) + f"   machine busy {busy[workers]:.0%}")
            walls[workers] -= sum(PLACED)
        print(f"  2 workers against 1, placing the actors apart: {walls[1] / walls[2]:.2f}× (goal ≥ 1.70); the machine "
              f"was {busy[1]:.0%} busy with 1 worker, {busy[2]:.0%} with 2 ({CORES} cores: what is left is theirs)\n")

        print(f"(3) CPU-bound in the run's process: {cpu_matches} public goods matches, 4 scripted seats, 20 rounds, "
              f"16 at once, store on")
        print(header + "\n" + "-" * len(header))
        print(row("local", local, 0, cpu_matches, local, local_cpu))
        for name, execution in (("processes 2", Execution(executor="processes", workers=2)),
                                ("ray 1", Execution(executor="ray", workers=1)),
                                ("ray 2", Execution(executor="ray", workers=2))):
            PLACED.clear()
            print(row(name, play(raw, execution), sum(PLACED), cpu_matches, local))

        raw = waiting_dict(io_matches, 128)
        ideal = -(-io_matches // 128) * 0.1
        print(f"\n(4) I/O-bound: {io_matches} matches of one round, two agents waiting 100 ms, 128 at once; "
              f"ideal {ideal:.2f} s")
        header = f"{'executor':>14} {'wall s':>7} {'start s':>7} {'wall/ideal':>10} {'vs local':>8} {'run ms/m':>9}"
        print(header + "\n" + "-" * len(header))
        play(waiting_dict(128, 128), Execution())  # the first wave's imports and caches, as above
        local = play(raw, Execution())
        print(f"{'local':>14} {local:>7.2f} {0:>7.2f} {local / ideal:>10.2f} {1:>7.2f}× "
              f"{RUN_CPU[-1] / io_matches * 1000:>9.2f}")
        PLACED.clear()
        PLACED_CPU.clear()
        seconds = play(raw, Execution(executor="ray", workers=2))
        placed = sum(PLACED)
        print(f"{'ray 2':>14} {seconds:>7.2f} {placed:>7.2f} {seconds / ideal:>10.2f} {seconds / local:>7.2f}× "
              f"{RUN_CPU[-1] / io_matches * 1000:>9.2f}")
        print(f"{'ray 2 − start':>14} {seconds - placed:>7.2f} {'':>7} {(seconds - placed) / ideal:>10.2f} "
              f"{(seconds - placed) / local:>7.2f}×   (goals: wall/ideal ≤ 1.30, against local ≤ 1.15×)")
        spent = BUSY[-1] - sum(PLACED_CPU)
        print(f"  the machine spent {spent:.2f} s of CPU on the Ray run once its actors were placed (every process): "
              f"on {CORES} cores no less than {spent / CORES:.2f} s of wall, {spent / CORES / ideal:.2f} of the ideal")
    finally:
        ray.shutdown()
    print("\n" + load())
    return 0


class Echo:
    def ping(self) -> int:
        return 0


if __name__ == "__main__":
    sys.exit(main())
