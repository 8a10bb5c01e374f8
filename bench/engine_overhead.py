"""Engine overhead: how many messages per second the pool, the match loop and the
run store push through when the agents cost nothing.

Scripted agents with no delay play the public goods game at one fixed table of
eight for 20 rounds, so all the time measured is Arena's own: building turns and
messages, the event sink, the game, and (in the second run) the SQLite store.
The same tournament is played twice:

  (a) without a store     run_tournament(scenario)
  (b) with the store      run_tournament(scenario, RunStore in a temporary dir)

Messages are counted from the records as each match finishes (``len(record.messages)``),
events likewise; no record is kept, as the runner keeps none. ``bench/memory.py`` measures
peak memory over runs of different sizes, each in a process of its own.

    python bench/engine_overhead.py            # ~5-10 s per configuration on 2 cores
    python bench/engine_overhead.py --quick    # a few seconds in all
"""

from __future__ import annotations

import argparse
import platform
import resource
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pydantic
import trio
import yaml

from arena.run.runner import Observer, run_tournament
from arena.run.scenario import Scenario, parse_scenario
from arena.store import STORE_FILE, RunStore

STRATEGIES = [
    "always_all", "free_rider", "tit_for_tat", "random_contributor",
    "conditional_cooperator", "always_all", "free_rider", "tit_for_tat",
]


def scenario_dict(matches: int, rounds: int, mode: int, at_once: int) -> dict:
    """Eight instant agents at one fixed table, ``matches`` repeats (seat order rotates)."""
    return {
        "name": "bench-engine-overhead",
        "seed": 7,
        "agents": {f"a{i}": {"backend": "scripted", "strategy": s, "delay": 0} for i, s in enumerate(STRATEGIES)},
        "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": mode}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},
    }


def peak_rss_mib() -> float:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024  # bytes on macOS, KiB on Linux


@dataclass
class Figures:
    label: str
    seconds: float
    matches: int
    messages: int
    events: int
    rss_mib: float
    db_mib: float | None = None

    @property
    def messages_per_s(self) -> float:
        return self.messages / self.seconds

    @property
    def events_per_s(self) -> float:
        return self.events / self.seconds

    @property
    def matches_per_s(self) -> float:
        return self.matches / self.seconds


class Count(Observer):
    """Counts the messages and events of each match as it finishes, and keeps nothing else."""

    def __init__(self):
        self.matches = self.messages = self.events = 0
        self.failed: list[str] = []

    def finished(self, record, resumed):
        self.matches += 1
        self.messages += len(record.messages)
        self.events += len(record.events)
        if record.status != "finished":
            self.failed.append(record.key)


def measure(label: str, scenario: Scenario, raw: dict, with_store: bool) -> Figures:
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = None
        if with_store:
            store = RunStore.create_or_resume(Path(tmp) / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        try:
            start = time.perf_counter()
            count = Count()
            trio.run(run_tournament, scenario, store, count)
            seconds = time.perf_counter() - start
        finally:
            if store is not None:
                store.close()
        db_mib = None
        if with_store:
            db_mib = sum(p.stat().st_size for p in (Path(tmp) / "run").glob(STORE_FILE + "*")) / 2**20
    failed = count.failed
    if failed:
        raise SystemExit(f"{label}: {len(failed)} matches failed, e.g. {failed[0]}: the benchmark is void")
    return Figures(
        label=label,
        seconds=seconds,
        matches=count.matches,
        messages=count.messages,
        events=count.events,
        rss_mib=peak_rss_mib(),
        db_mib=db_mib,
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="a short run (30 matches per configuration)")
    parser.add_argument("--matches", type=int, help="matches per configuration (default 300, or 30 with --quick)")
    parser.add_argument("--rounds", type=int, default=20, help="rounds per match (default 20)")
    parser.add_argument("--mode", type=int, choices=[1, 2], default=1, help="public goods mode (default 1: a notice per seat)")
    parser.add_argument("--at-once", type=int, default=8, help="matches played at once (default 8)")
    args = parser.parse_args(argv)
    matches = args.matches or (30 if args.quick else 300)

    print(f"Python {platform.python_version()} ({platform.python_implementation()}), trio {trio.__version__}, "
          f"pydantic {pydantic.VERSION}, {platform.system()} {platform.machine()}")
    print(f"public goods, mode {args.mode}, 8 scripted agents (delay 0) at one fixed table, {args.rounds} rounds, "
          f"{matches} matches, {args.at_once} at once")

    warm = scenario_dict(4, args.rounds, args.mode, args.at_once)  # imports, plugin loading, pydantic schema caches
    measure("warm-up", parse_scenario(warm), warm, with_store=False)

    raw = scenario_dict(matches, args.rounds, args.mode, args.at_once)
    scenario = parse_scenario(raw)
    runs = [
        measure("no store", scenario, raw, with_store=False),
        measure("SQLite store", scenario, raw, with_store=True),
    ]

    print()
    header = f"{'configuration':<14} {'wall s':>7} {'matches':>7} {'messages':>9} {'msg/s':>9} {'events/s':>9} {'matches/s':>9} {'peak RSS so far MiB':>19}"
    print(header)
    print("-" * len(header))
    for f in runs:
        print(f"{f.label:<14} {f.seconds:>7.2f} {f.matches:>7} {f.messages:>9} {f.messages_per_s:>9.0f} "
              f"{f.events_per_s:>9.0f} {f.matches_per_s:>9.1f} {f.rss_mib:>19.0f}")
    bare, stored = runs
    print()
    print(f"messages per match: {bare.messages / bare.matches:.0f}, events per match: {bare.events / bare.matches:.0f}")
    print(f"store / no store throughput: {stored.messages_per_s / bare.messages_per_s:.2f} "
          f"(wall time x{stored.seconds / bare.seconds:.2f}); store file {stored.db_mib:.1f} MiB")
    print(f"per message: {1e6 / bare.messages_per_s:.1f} us without store, {1e6 / stored.messages_per_s:.1f} us with it")
    print(f"peak RSS (whole process, after both runs; no record is kept once stored): {peak_rss_mib():.0f} MiB")
    return 0


if __name__ == "__main__":
    sys.exit(main())
