"""Worker processes: how much faster does a run go when its matches, not its models, take the time?

Matches whose agents answer at once (scripted, no delay), so that every second is Arena's own
work: public goods with 4 seats and 20 rounds, about 290 events a match, the SQLite store on,
16 matches at once. The same run is played with 1 process (the run's own) and then with 2, 3, ...
worker processes (``execution: {executor: processes, workers: N}``), in this one invocation, and each is compared with
the first: matches per second and the speed-up.

The run's own process still builds every event a worker sends and writes every row; that part
(the "run ms" column) bounds what any number of workers can reach: 1000 / run ms matches per
second. On a machine with fewer cores than workers + 1, the cores bound it first.

    python bench/workers.py              # 1 to 3 processes, 200 matches each
    python bench/workers.py --quick      # 1 and 2 processes, 60 matches
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

import trio
import yaml

from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore
from machine import load, machine_speed  # bench/machine.py: the load and a reference loop's speed

STRATEGIES = ("tit_for_tat", "free_rider", "always_all", "conditional_cooperator")


def scenario_dict(matches: int, processes: int) -> dict:
    return {
        "name": "bench-workers", "seed": 2,
        "agents": {f"p{i}": {"backend": "scripted", "strategy": s} for i, s in enumerate(STRATEGIES)},
        "games": [{"game": "public_goods", "params": {"rounds": 20}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": 16},
        "execution": {"executor": "processes", "workers": processes} if processes > 1 else {"executor": "local"},
    }


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def play(matches: int, processes: int) -> tuple[float, float, float]:
    """Wall seconds, the run's process's CPU seconds and its workers' CPU seconds."""
    raw = scenario_dict(matches, processes)
    scenario = parse_scenario(raw)
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = RunStore.create_or_resume(Path(tmp) / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        try:
            start, cpu, workers = time.perf_counter(), time.process_time(), children_cpu()
            result = trio.run(run_tournament, scenario, store)
            seconds, cpu, workers = time.perf_counter() - start, time.process_time() - cpu, children_cpu() - workers
        finally:
            store.close()
    if result.count("finished") != matches:
        raise SystemExit(f"only {result.count('finished')} of {matches} matches finished")
    return seconds, cpu, workers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="60 matches, 1 and 2 processes")
    parser.add_argument("--matches", type=int, default=200)
    parser.add_argument("--max", type=int, default=3, help="the most worker processes tried (default 3)")
    args = parser.parse_args()
    matches, most = (60, 2) if args.quick else (args.matches, max(2, args.max))
    cores = os.cpu_count() or 1
    print(f"Python {sys.version.split()[0]}; {cores} cores; {load()}; reference loop {machine_speed():.0f} ms")
    print(f"{matches} matches of public goods, 4 scripted seats, 20 rounds, 16 at once, SQLite store on\n")
    play(4, 1)  # imports, plugin loading, pydantic caches
    header = f"{'processes':>9} {'wall s':>7} {'matches/s':>9} {'speed-up':>8} {'run ms':>7} {'workers ms':>10}"
    print(header + "\n" + "-" * len(header))
    first = None
    for processes in range(1, most + 1):
        seconds, cpu, workers = play(matches, processes)
        first = first or seconds
        print(f"{processes:>9} {seconds:>7.2f} {matches / seconds:>9.1f} {first / seconds:>7.2f}× "
              f"{cpu / matches * 1000:>7.2f} {workers / matches * 1000 if processes > 1 else 0:>10.2f}")
    print("\n(run ms, workers ms: CPU per match in the run's process and in all its workers; "
          "1 process plays everything in the run's own)")
    print(load())
    return 0


if __name__ == "__main__":
    sys.exit(main())
