"""Concurrency: do matches whose agents are slow overlap as well as they should?

200 matches of two scripted agents that each wait a fixed 100 ms before
replying (``delay: 0.1``), with the SQLite store on. The game is public goods
with 2 seats and 1 round: the match asks both seats at once, a single time, so
each match makes exactly ``rounds`` sequential agent turns and should last
``rounds * delay`` = 0.1 s. All 200 matches are known up front (200 repeats of
one fixed two-seat table) and there are no per-agent limits, so with 16 matches
at once the ideal wall time is ceil(200 / 16) * 0.1 s = 1.3 s. The target is
wall / ideal <= 1.15. The same tournament is then played one match at a time
(ideal 200 * 0.1 s = 20 s) for the speed-up.

The 16-at-once run is played ``--trials`` times (default 3; single runs vary by
a few percent) and judged on the median. The CPU time the process spends per
match is printed too: with identical latencies the matches of a wave stay in
lock step, so each wave pays roughly ``at_once * cpu_per_match`` on the one
trio thread, and wall / ideal ~ 1 + at_once * cpu_per_match / latency.

    python bench/concurrency.py            # 200 matches: 3 x ~1.5 s at 16, ~21 s at 1
    python bench/concurrency.py --quick    # 48 matches
"""

from __future__ import annotations

import argparse
import math
import platform
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import trio
import yaml

from arena.run.runner import run_tournament
from arena.run.scenario import Scenario, parse_scenario
from arena.store import RunStore

TARGET = 1.15


def scenario_dict(matches: int, at_once: int, delay: float, rounds: int) -> dict:
    return {
        "name": "bench-concurrency",
        "seed": 11,
        "agents": {
            "left": {"backend": "scripted", "strategy": "tit_for_tat", "delay": delay},
            "right": {"backend": "scripted", "strategy": "free_rider", "delay": delay},
        },
        "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": 2}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},  # no per_agent: nothing serialises the matches
    }


@dataclass
class Run:
    at_once: int
    matches: int
    seconds: float
    cpu: float
    ideal: float

    @property
    def ratio(self) -> float:
        return self.seconds / self.ideal


def play(raw: dict, scenario: Scenario, at_once: int, per_match: float) -> Run:
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = RunStore.create_or_resume(Path(tmp) / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        try:
            start, cpu = time.perf_counter(), time.process_time()
            result = trio.run(run_tournament, scenario, store, None, at_once)
            failed = [(m.key, m.error) for m in store.matches() if m.status != "finished"]
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        finally:
            store.close()
    if failed:
        raise SystemExit(f"{len(failed)} matches failed, e.g. {failed[0][0]}: {failed[0][1]}")
    n = len(result.statuses)
    return Run(at_once, n, seconds, cpu, math.ceil(n / at_once) * per_match)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="48 matches instead of 200")
    parser.add_argument("--matches", type=int, help="matches in the tournament (default 200, 48 with --quick)")
    parser.add_argument("--at-once", type=int, default=16, help="matches at once (default 16)")
    parser.add_argument("--delay", type=float, default=0.1, help="agent latency in seconds (default 0.1)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per match = sequential turns (default 1)")
    parser.add_argument("--trials", type=int, default=3, help="runs at --at-once, judged on the median (default 3)")
    parser.add_argument("--skip-serial", action="store_true", help="do not play the one-at-a-time comparison")
    args = parser.parse_args(argv)
    matches = args.matches or (48 if args.quick else 200)

    # Public goods asks every seat at once each round, so a match is `rounds` sequential turns.
    per_match = args.rounds * args.delay
    print(f"Python {platform.python_version()}, trio {trio.__version__}, {platform.system()} {platform.machine()}")
    print(f"{matches} matches of public goods (2 seats, {args.rounds} round(s)), agents replying after {args.delay * 1000:g} ms, "
          f"SQLite store on; per-match latency {per_match * 1000:g} ms")

    warm = scenario_dict(2, 2, 0.0, args.rounds)
    play(warm, parse_scenario(warm), 2, 1.0)  # imports, plugin loading, pydantic caches

    raw = scenario_dict(matches, args.at_once, args.delay, args.rounds)
    scenario = parse_scenario(raw)
    trials = [play(raw, scenario, args.at_once, per_match) for _ in range(max(1, args.trials))]
    concurrent = sorted(trials, key=lambda r: r.seconds)[(len(trials) - 1) // 2]  # the median run
    serial = None if args.skip_serial else play(raw, scenario, 1, per_match)

    print()
    header = (f"{'run':<9} {'at once':>7} {'matches':>7} {'wall s':>7} {'ideal s':>7} {'wall/ideal':>10} "
              f"{'extra ms/wave':>13} {'CPU ms/match':>12}")
    print(header)
    print("-" * len(header))
    rows = [(f"trial {i + 1}", r) for i, r in enumerate(trials)] + ([("serial", serial)] if serial else [])
    for label, run in rows:
        waves = math.ceil(run.matches / run.at_once)
        print(f"{label:<9} {run.at_once:>7} {run.matches:>7} {run.seconds:>7.2f} {run.ideal:>7.2f} {run.ratio:>10.3f} "
              f"{(run.seconds - run.ideal) / waves * 1000:>13.1f} {run.cpu / run.matches * 1000:>12.2f}")
    print()
    ratio = statistics.median(r.ratio for r in trials)
    verdict = "PASS" if ratio <= TARGET else "FAIL"
    print(f"concurrency {args.at_once}: wall {concurrent.seconds:.2f} s, ideal {concurrent.ideal:.2f} s, "
          f"wall/ideal {ratio:.3f} (median of {len(trials)}; target <= {TARGET}): {verdict}")
    cpu_ms = statistics.median(r.cpu / r.matches for r in trials) * 1000
    print(f"lock-step estimate 1 + {args.at_once} x {cpu_ms:.2f} ms CPU/match / {per_match * 1000:g} ms "
          f"= {1 + args.at_once * cpu_ms / (per_match * 1000):.3f}")
    if serial is not None:
        print(f"one at a time: wall {serial.seconds:.2f} s (ideal {serial.ideal:.2f} s); speed-up x{serial.seconds / concurrent.seconds:.2f} "
              f"(ideal x{serial.ideal / concurrent.ideal:.2f})")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
