"""Concurrency: do matches whose agents are slow overlap as well as they should?

Matches of two scripted agents that each wait a fixed 100 ms before replying (``delay: 0.1``),
with the SQLite store on. The game is public goods with 2 seats and 1 round: the match asks
both seats at once, a single time, so each match makes exactly ``rounds`` sequential agent turns
and should last ``rounds * delay`` = 0.1 s. All matches are known up front (repeats of one fixed
two-seat table) and there are no per-agent limits, so with N matches at once the ideal wall time
is ceil(matches / N) * 0.1 s. Two configurations, each against its goal (issue 15):

    200 matches, 16 at once     ideal 1.3 s     wall / ideal <= 1.10
    1,000 matches, 128 at once  ideal 0.8 s     wall / ideal <= 1.30

Each is played ``--trials`` times (default 3) and judged on the median. Also printed: the CPU
time the process spends per match, and what bounds the result. Every match's work runs on the
one trio thread, so in a wave of N matches whose agents all wake together the last one waits for
the N - 1 before it: wall / ideal ~ 1 + N * cpu_per_match / latency while the process keeps up;
when N * cpu_per_match approaches the latency the thread is busy all the time (CPU / wall near
1) and only less CPU per match, or more processes, can help. ``--profile`` says where that CPU
goes, by part of the system (cProfile, one extra trial of the last configuration). Equal
latencies keep the waves in step: ``--jitter`` lets them vary as a model's do, which spreads the
matches' work over the wait (the ideal stays ``rounds * delay``, so the ratio then overstates by
a third of the jitter at most).

Where a slot's time goes past the agents' latency is read back from the store after each trial:
from a match's start (its first event) to its last reply (its actions), from there to its end,
and from its end to the start of the match that took its slot. The first is the scheduler's: a
reply whose timer expires while the thread plays other matches waits for them, and the second
seat's task starts a pass of the scheduler after the first; the last is the hand-over of the
slot to the next match waiting.

    python bench/concurrency.py              # both configurations, 3 trials each (~15 s)
    python bench/concurrency.py --quick      # 1 trial each
    python bench/concurrency.py --profile    # and where the CPU goes at 128 at once
    python bench/concurrency.py --config 200x16 --serial   # and the same 200 matches one at a time
    python bench/concurrency.py --jitter 0.02  # latencies varying by ±2%: how much is the lock step
    python bench/concurrency.py --processes 2  # matches played by two worker processes
    python bench/concurrency.py --split        # and a match's CPU split: the match, the store, the waits

``--split`` plays the last configuration's matches three ways more, in turn, and gives the CPU per
match of each: with agents that answer at once and no store (the match itself: pool, filter, game,
events), the same with the store (what the store adds: its rows and SQLite), and as the bench
plays them (what waiting for 100 ms agents adds: the timers, the second seat's task, the slots, the
scheduler's passes). Each of the three is the best of ``--trials`` runs, played in turn so that a
drift of the machine's speed falls on all three alike; beside each, the same figure at a reference
loop of 50 ms, to compare machines and days (``bench/scheduler_bound.py`` measures what CPU per
match the scheduler allows at 128 at once).

With ``--processes N`` the run forks N workers that play the matches (``execution: {executor:
processes, workers: N}``) while the run's own process keeps the store; the CPU columns then count the workers too (their
time is read when the run has reaped them). Work in several processes is bounded by the cores:
wall/ideal ~ 1 + N * total_cpu_per_match / (cores * latency) in lock step, and by the run's own
process, which still builds every event and writes every row (its "run CPU" column).
"""

from __future__ import annotations

import argparse
import cProfile
import math
import os
import platform
import resource
import pstats
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

import trio
import yaml

from arena.run.runner import run_tournament
from arena.run.scenario import Scenario, parse_scenario
from arena.store import RunStore
from machine import load, machine_speed  # bench/machine.py: the load and a reference loop's speed

GOALS = {(200, 16): 1.10, (1000, 128): 1.30}


def scenario_dict(matches: int, at_once: int, delay: float, rounds: int, jitter: float = 0.0, processes: int = 1) -> dict:
    return {
        "name": "bench-concurrency",
        "seed": 11,
        "agents": {
            "left": {"backend": "scripted", "strategy": "tit_for_tat", "delay": delay, "jitter": jitter},
            "right": {"backend": "scripted", "strategy": "free_rider", "delay": delay, "jitter": jitter},
        },
        "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": 2}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},  # no per_agent: nothing serialises the matches
        "execution": {"executor": "processes", "workers": processes} if processes > 1 else {"executor": "local"},
    }


@dataclass
class Run:
    at_once: int
    matches: int
    seconds: float
    cpu: float  # the run's process and its workers
    ideal: float
    run_cpu: float = 0.0  # the run's process alone
    timeline: dict[str, list[float]] | None = None  # `timeline`'s figures, ms

    @property
    def ratio(self) -> float:
        return self.seconds / self.ideal

    @property
    def cpu_per_match_ms(self) -> float:
        return self.cpu / self.matches * 1000


def play(raw: dict, scenario: Scenario, at_once: int, per_match: float, profile: cProfile.Profile | None = None) -> Run:
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = _new_store(Path(tmp), raw, scenario)
        try:
            if profile is not None:
                profile.enable()
            start, cpu, workers = time.perf_counter(), time.process_time(), _children_cpu()
            result = trio.run(run_tournament, scenario, store, None, at_once)
            seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
            workers = _children_cpu() - workers  # reaped when the run ended
            if profile is not None:
                profile.disable()
            failed = [(m.key, m.error) for m in store.read.matches() if m.status != "finished"]  # read after the clock stops
            spent = timeline(store, at_once, per_match)
        finally:
            store.close()
    if failed:
        raise SystemExit(f"{len(failed)} matches failed, e.g. {failed[0][0]}: {failed[0][1]}")
    n = len(result.statuses)
    return Run(at_once, n, seconds, cpu + workers, math.ceil(n / at_once) * per_match, cpu, spent)


def cpu_per_match(raw: dict, at_once: int, with_store: bool) -> float:
    """ms of CPU per match of a run of ``raw`` (this process: no workers), with or without a store."""
    scenario = parse_scenario(raw)
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        store = _new_store(Path(tmp), raw, scenario) if with_store else None
        try:
            cpu = time.process_time()
            result = trio.run(run_tournament, scenario, store, None, at_once)
            cpu = time.process_time() - cpu
        finally:
            if store is not None:
                store.close()
    failed = [key for key, status in result.statuses.items() if status != "finished"]
    if failed:  # a failed match costs less than a played one: the figure would flatter
        raise SystemExit(f"{len(failed)} matches did not finish, e.g. {failed[0]}")
    return cpu / len(result.statuses) * 1000


def _new_store(folder: Path, raw: dict, scenario: Scenario) -> RunStore:
    return RunStore.create_or_resume(folder / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())


def split(matches: int, at_once: int, delay: float, rounds: int, trials: int) -> list[tuple[str, float]]:
    """CPU per match (ms) of the match itself, with the store, and with the agents' waits: the best of
    ``trials`` of each, the three played in turn."""
    at_once_agents = scenario_dict(matches, at_once, 0.0, rounds)
    waiting = scenario_dict(matches, at_once, delay, rounds)
    ways = (("agents answer at once, no store", at_once_agents, False),
            ("agents answer at once, the store on", at_once_agents, True),
            (f"agents answer after {delay * 1000:g} ms, the store on", waiting, True))
    best = [math.inf] * len(ways)
    for _ in range(trials):
        for i, (_, raw, with_store) in enumerate(ways):
            best[i] = min(best[i], cpu_per_match(raw, at_once, with_store))
    return [(label, ms) for (label, _, _), ms in zip(ways, best)]


def timeline(store: RunStore, at_once: int, per_match: float) -> dict[str, list[float]]:
    """Where a match's time in its slot went beyond the agents' latency, in ms, from what the store
    recorded: its start (the first event), when its actions were taken (the last reply came in), its
    end, and the start of the match that took its slot: the i-th match to end frees the slot that the
    match to start ``at_once + i``-th takes (each slot given back goes to the longest waiting)."""
    rows = store.db.execute(
        "SELECT m.started, m.ended, (SELECT max(e.at) FROM events e WHERE e.match_key = m.key "
        "AND e.type = 'action') FROM matches m").fetchall()
    started = sorted(r[0] for r in rows)
    ends = sorted(r[1] for r in rows)
    return {
        "replies": [(acted - start - per_match) * 1e3 for start, _, acted in rows],
        "end": [(end - acted) * 1e3 for _, end, acted in rows],
        "next": [(started[at_once + i] - end) * 1e3 for i, end in enumerate(ends) if at_once + i < len(started)],
    }


def _spread(values: list[float]) -> str:
    if not values:  # no match waited for a slot: as many slots as matches
        return f"{'—':>6} {'—':>6}"
    ordered = sorted(values)
    return f"{statistics.median(ordered):6.1f} {ordered[int(len(ordered) * 0.9)]:6.1f}"


def _children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


PARTS = (  # where a function lives -> the part of the system it belongs to, first match wins
    ("arena/engine/", "engine: match loop, pool, filter"), ("arena/store/", "run store (Python side)"),
    ("sqlite3", "SQLite (C)"), ("arena/run/", "runner"), ("arena/services/", "services"),
    ("arena/contract/", "contract (messages, events)"), ("games/", "game"), ("agents/", "agents"),
    ("trio", "trio"), ("pydantic", "pydantic"), ("json", "json"),
)


def parts(profile: cProfile.Profile) -> dict[str, float]:
    """Seconds of own time (tottime) per part of the system."""
    stats = pstats.Stats(profile)
    out: dict[str, float] = defaultdict(float)
    for (filename, _, name), (_, _, tottime, _, _) in stats.stats.items():  # type: ignore[attr-defined]
        where = f"{filename} {name}"
        part = next((label for key, label in PARTS if key in where), "other (stdlib, builtins)")
        out[part] += tottime
    return dict(out)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", action="append", help="MATCHESxAT_ONCE (repeatable; default 200x16 and 1000x128)")
    parser.add_argument("--quick", action="store_true", help="one trial of each configuration")
    parser.add_argument("--delay", type=float, default=0.1, help="agent latency in seconds (default 0.1)")
    parser.add_argument("--rounds", type=int, default=1, help="rounds per match = sequential turns (default 1)")
    parser.add_argument("--jitter", type=float, default=0.0,
                        help="let each reply's latency vary by this fraction, as a model's does (e.g. 0.02: ±2%%); "
                             "shows how much of wall/ideal is the lock step of equal latencies; the goals are "
                             "judged without it")
    parser.add_argument("--processes", type=int, default=1, help="worker processes that play the matches (default 1: the run's own)")
    parser.add_argument("--trials", type=int, default=3, help="runs of each configuration, judged on the median (default 3)")
    parser.add_argument("--serial", action="store_true", help="also play the first configuration one match at a time")
    parser.add_argument("--profile", action="store_true", help="profile one more trial of the last configuration")
    parser.add_argument("--split", action="store_true",
                        help="and the last configuration's CPU per match split into the match, the store and the waits")
    args = parser.parse_args(argv)
    configs = [tuple(int(x) for x in c.lower().split("x")) for c in (args.config or ["200x16", "1000x128"])]
    trials = 1 if args.quick else max(1, args.trials)

    per_match = args.rounds * args.delay  # public goods asks every seat at once: a match is `rounds` turns
    print(f"Python {platform.python_version()}, trio {trio.__version__}, {platform.system()} {platform.machine()}; {load()}; "
          f"reference loop {machine_speed():.0f} ms of CPU (lower is a faster machine)")
    varying = f" ± {args.jitter:.0%}" if args.jitter else ""
    print(f"public goods (2 seats, {args.rounds} round(s)), agents replying after {args.delay * 1000:g} ms{varying}, "
          f"SQLite store on; per-match latency {per_match * 1000:g} ms")
    cores = os.cpu_count() or 1
    if args.processes > 1:
        print(f"played by {args.processes} worker processes on {cores} cores")
    if args.jitter:
        print("latencies vary: the goals are judged with equal latencies only, so none is judged here")

    warm = scenario_dict(4, 2, 0.0, args.rounds, processes=args.processes)
    play(warm, parse_scenario(warm), 2, 1.0)  # imports, plugin loading, pydantic caches

    header = (f"{'matches':>7} {'at once':>7} {'trial':>5} {'wall s':>7} {'ideal s':>7} {'wall/ideal':>10} "
              f"{'CPU ms/match':>12} {'run CPU':>8} {'CPU/wall':>8}")
    print("\n" + header + "\n" + "-" * len(header))
    verdicts = []
    summary = []
    for matches, at_once in configs:
        raw = scenario_dict(matches, at_once, args.delay, args.rounds, args.jitter, args.processes)
        scenario = parse_scenario(raw)
        runs = []
        for trial in range(trials):
            run = play(raw, scenario, at_once, per_match)
            runs.append(run)
            print(f"{matches:>7} {at_once:>7} {trial + 1:>5} {run.seconds:>7.2f} {run.ideal:>7.2f} {run.ratio:>10.3f} "
                  f"{run.cpu_per_match_ms:>12.3f} {run.run_cpu / run.matches * 1000:>8.3f} {run.cpu / run.seconds:>8.2f}")
        ratio = statistics.median(r.ratio for r in runs)
        cpu_ms = statistics.median(r.cpu_per_match_ms for r in runs)
        busy = statistics.median(r.cpu / r.seconds for r in runs)
        run_ms = statistics.median(r.run_cpu / r.matches * 1000 for r in runs)
        goal = GOALS.get((matches, at_once)) if not args.jitter else None
        verdict = "" if goal is None else ("PASS" if ratio <= goal else "FAIL")
        if goal is not None:
            verdicts.append(verdict)
        summary.append((matches, at_once, ratio, goal, verdict, cpu_ms, busy, run_ms, runs))
        if args.serial and (matches, at_once) == configs[0]:
            serial = play(raw, scenario, 1, per_match)
            print(f"{matches:>7} {1:>7} {'':>5} {serial.seconds:>7.2f} {serial.ideal:>7.2f} {serial.ratio:>10.3f} "
                  f"{'':>12} {'':>8}  (one at a time: speed-up ×{serial.seconds / statistics.median(r.seconds for r in runs):.2f})")

    print()
    for matches, at_once, ratio, goal, verdict, cpu_ms, busy, run_ms, runs in summary:
        against = f" (goal ≤ {goal:.2f}): {verdict}" if goal is not None else ""
        middle = sorted(runs, key=lambda r: r.ratio)[len(runs) // 2].timeline  # the median trial's
        spent = (f"    a slot's time past the agents' {per_match * 1000:g} ms (the median trial; median and 90th percentile, ms):\n"
                 f"        from a match's start to its last reply  {_spread(middle['replies'])}\n"
                 f"        from that reply to the match's end      {_spread(middle['end'])}\n"
                 f"        from that end to the next match's start {_spread(middle['next'])}")
        if args.processes > 1:
            shared = min(cores, args.processes + 1)
            print(f"{matches} matches, {at_once} at once, {args.processes} workers: wall/ideal {ratio:.3f}, median of "
                  f"{trials}{against}")
            print(f"    CPU {cpu_ms:.3f} ms per match in all, {run_ms:.3f} of it in the run's process; lock-step bound "
                  f"1 + {at_once} × {cpu_ms:.3f} / ({shared} × {per_match * 1000:g}) = "
                  f"{1 + at_once * cpu_ms / (shared * per_match * 1000):.3f}, and the run's process alone "
                  f"1 + {at_once} × {run_ms:.3f} / {per_match * 1000:g} = {1 + at_once * run_ms / (per_match * 1000):.3f}; "
                  f"{busy / cores:.0%} of the machine's {cores} cores busy")
            print(spent)
            continue
        estimate = 1 + at_once * cpu_ms / (per_match * 1000)
        print(f"{matches} matches, {at_once} at once: wall/ideal {ratio:.3f}, median of {trials}{against}")
        print(f"    CPU {cpu_ms:.3f} ms per match; lock-step bound 1 + {at_once} × {cpu_ms:.3f} / {per_match * 1000:g} = "
              f"{estimate:.3f}; the trio thread was busy {busy:.0%} of the wall time")
        print(spent)
        if busy > 0.8:
            print(f"    bound by CPU: one process does {1000 / cpu_ms:,.0f} matches/s of this size at most; "
                  f"{at_once} at once need {at_once / per_match:,.0f}/s")
        elif ratio > estimate * 1.1:
            print("    bound by the machine: wall/ideal is well above the lock-step bound while the thread was mostly "
                  "idle, so it waited for a CPU that other processes held (see the load average)")

    if args.split:
        matches, at_once = configs[-1]
        speed = machine_speed()
        found = split(matches, at_once, args.delay, args.rounds, trials)
        speed = (speed + machine_speed()) / 2
        print(f"\nCPU per match of {matches} matches, {at_once} at once, in this process (best of {trials}; "
              f"reference loop {speed:.0f} ms):")
        print(f"    {'':<42} {'ms/match':>9} {'added':>7} {'at 50 ms':>9}")
        previous = 0.0
        for label, ms in found:
            print(f"    {label:<42} {ms:>9.3f} {ms - previous:>+7.3f} {ms * 50 / speed:>9.3f}")
            previous = ms
        (_, match), (_, stored), (_, waited) = found
        print(f"    of the whole: the match {match / waited:.0%}, the store {(stored - match) / waited:.0%}, "
              f"the waits {(waited - stored) / waited:.0%}")

    if args.profile:
        matches, at_once = configs[-1]
        raw = scenario_dict(matches, at_once, args.delay, args.rounds, args.jitter, args.processes)
        profile = cProfile.Profile()
        run = play(raw, parse_scenario(raw), at_once, per_match, profile)
        found = parts(profile)
        total = sum(found.values())
        print(f"\nwhere the CPU goes at {at_once} at once (cProfile, own time; profiling slows it: "
              f"{run.cpu_per_match_ms:.2f} ms CPU per match):")
        for part, seconds in sorted(found.items(), key=lambda kv: -kv[1]):
            print(f"    {part:<34} {seconds / total:>6.1%}  {seconds / run.matches * 1e6:>7.0f} µs/match")
        stats = pstats.Stats(profile)
        stats.sort_stats("tottime")
        print("\nthe 15 functions with the most own time:")
        stats.print_stats(15)
    print(f"{load()}; reference loop {machine_speed():.0f} ms")
    return 0 if all(v == "PASS" for v in verdicts) else 1


if __name__ == "__main__":
    sys.exit(main())
