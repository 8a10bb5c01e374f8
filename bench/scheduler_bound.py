"""What bounds 1,000 matches at 128 at once in one process: trio's passes, measured without the engine.

A skeleton of a match's shape in the runner, with nothing of Arena in it: a task per match waits
for one of 128 slots (a ``trio.CapacityLimiter``, as the runner's), spends half of its CPU (a
spin on the thread's own clock, so that another process's load does not count as work), asks its
two seats at once the way the match does (the second seat in a task of a nursery, the first in the
match's own task), both seats sleep the agents' latency, and the match spends the other half of
its CPU. The sweep over CPU per match gives the wall/ideal that this shape reaches on this machine
for a given cost of a match; ``--engine`` plays the real bench (``bench/concurrency.py``'s
1,000 × 128) in the same minutes, and the skeleton at the engine's measured CPU per match, so the
two ratios can be compared side by side.

Why the CPU counts more than once: trio runs in passes, and a task made runnable during one pass
runs in the next. The second seat's task starts a pass after the match's first half; its timer,
and the timers of every match in that pass, start together and expire together, and the match goes
on only a pass after its last seat. So a wave of 128 matches lasts about the latency plus the
whole wave's CPU, 1 + 128 × cpu / latency, and the hops in between add to it. A second shape shows
what the scheduler allows without those hops: 128 lanes, each playing one match after another in
its own task with one seat and no checkpoint between a reply and the next match's wait. It is not
a shape a match with two seats asked at once can take, but it measures the part that is trio's.

``--hops`` adds the two shapes in between, to tell the hops apart: "slots of one seat" (a task per
match waiting for a slot, as the engine's, but one seat asked in the match's own task: no second
seat's task, so only the hand-over of the slot to the next match's task remains) and "lanes of two
seats" (the lanes, each asking two seats at once as the match does: the second seat's task and the
match going on after it remain, the hand-over of the slot is gone). A game whose seats speak in
turn (a debate, idiom solitaire) asks one seat at a time: its matches have the first of these shapes.

    python bench/scheduler_bound.py              # the sweep, 3 trials per point (~1 min)
    python bench/scheduler_bound.py --engine     # and the real bench beside it (~1.5 min more)
    python bench/scheduler_bound.py --cpu 0.2 0.4 --trials 5
    python bench/scheduler_bound.py --hops       # and which hop costs what
"""

from __future__ import annotations

import argparse
import multiprocessing
import statistics
import sys
import time
from functools import partial

import trio

from machine import load, machine_speed  # bench/machine.py

MATCHES, AT_ONCE, LATENCY = 1000, 128, 0.1
GOAL = 1.30


def spin(ms: float) -> None:
    """Spend ``ms`` of this thread's CPU: a busy machine stretches the wall time, not the work."""
    end = time.thread_time() + ms / 1000
    while time.thread_time() < end:
        pass


async def _seat() -> None:
    await trio.sleep(LATENCY)


async def _one_seat() -> None:
    await _seat()  # in the match's own task


async def _two_seats() -> None:
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_seat)  # the second seat: a task, which starts a pass later
        await _seat()  # the first: in the match's own task


async def _slots(ask, cpu_ms: float, matches: int, at_once: int) -> None:
    """A task per match, each waiting for one of ``at_once`` slots, as the runner's."""
    slots = trio.CapacityLimiter(at_once)

    async def match() -> None:
        async with slots:
            spin(cpu_ms / 2)  # set-up, the rules posted, the turns made
            await ask()
            spin(cpu_ms / 2)  # replies parsed and posted, the score, the record, the commit

    async with trio.open_nursery() as nursery:
        for _ in range(matches):
            nursery.start_soon(match)


async def _lanes(ask, cpu_ms: float, matches: int, at_once: int) -> None:
    """``at_once`` tasks, each playing its next match in the step in which the last one ended."""
    plan = iter(range(matches))

    async def lane() -> None:
        for _ in plan:
            spin(cpu_ms / 2)
            await ask()
            spin(cpu_ms / 2)

    async with trio.open_nursery() as nursery:
        for _ in range(at_once):
            nursery.start_soon(lane)


SHAPES = {"engine": partial(_slots, _two_seats), "lanes": partial(_lanes, _one_seat),
          "one seat": partial(_slots, _one_seat), "lanes of two": partial(_lanes, _two_seats)}


def _share(shape: str, spun_ms: float, matches: int, at_once: int, ready, out) -> None:
    ready.wait()  # every process starts its matches at the same moment
    start, cpu = time.perf_counter(), time.process_time()
    trio.run(SHAPES[shape], spun_ms, matches, at_once)
    out.put((time.perf_counter() - start, time.process_time() - cpu))


def trial(shape: str, spun_ms: float, processes: int = 1) -> tuple[float, float]:
    """wall/ideal, and the CPU per match in ms: the spin plus trio's own work (tasks, slots, timers).
    With several processes each plays its share of the matches with its share of the slots, nothing
    shared between them: what matches in worker processes could reach if the run's own process
    cost nothing."""
    ideal = -(-MATCHES // AT_ONCE) * LATENCY
    if processes == 1:
        start, cpu = time.perf_counter(), time.process_time()
        trio.run(SHAPES[shape], spun_ms, MATCHES, AT_ONCE)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
        return seconds / ideal, cpu / MATCHES * 1000
    context = multiprocessing.get_context("fork")
    ready, out = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_share, args=(shape, spun_ms, MATCHES // processes, AT_ONCE // processes, ready, out))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    shares = [out.get() for _ in workers]
    for worker in workers:
        worker.join()
    return max(s for s, _ in shares) / ideal, sum(c for _, c in shares) / MATCHES * 1000


def median_trial(shape: str, spun_ms: float, trials: int, processes: int = 1) -> tuple[float, float]:
    runs = [trial(shape, spun_ms, processes) for _ in range(trials)]
    return statistics.median(r for r, _ in runs), statistics.median(c for _, c in runs)


def crossing(points: list[tuple[float, float]], goal: float) -> str:
    """Where the sweep's wall/ideal crosses ``goal``, by linear interpolation between the last point
    within it and the first beyond, in words."""
    for (c0, r0), (c1, r1) in zip(points, points[1:]):
        if r0 <= goal < r1:
            return f"{c0 + (goal - r0) / (r1 - r0) * (c1 - c0):.2f} ms of CPU per match at most (trio's own included)"
    if points and points[-1][1] <= goal:
        return f"no more than the sweep tried: still within at {points[-1][0]:.2f} ms, its largest"
    return f"less than the sweep tried: beyond it already at {points[0][0]:.2f} ms, its smallest" if points else "a sweep"


def engine_figures(trials: int) -> tuple[float, float]:
    """The real bench's wall/ideal and CPU per match (medians), 1,000 × 128 in one process."""
    import concurrency  # bench/concurrency.py; imports the engine, so only when asked
    from arena.run.scenario import parse_scenario

    warm = concurrency.scenario_dict(4, 2, 0.0, 1)
    concurrency.play(warm, parse_scenario(warm), 2, 1.0)
    raw = concurrency.scenario_dict(MATCHES, AT_ONCE, LATENCY, 1)
    scenario = parse_scenario(raw)
    runs = [concurrency.play(raw, scenario, AT_ONCE, LATENCY) for _ in range(trials)]
    return statistics.median(r.ratio for r in runs), statistics.median(r.cpu_per_match_ms for r in runs)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cpu", type=float, nargs="+", default=[0.0, 0.1, 0.2, 0.3, 0.45, 0.6, 0.8],
                        help="CPU per match to sweep, ms (default 0 0.1 0.2 0.3 0.45 0.6 0.8)")
    parser.add_argument("--trials", type=int, default=3, help="runs per point, judged on the median (default 3)")
    parser.add_argument("--engine", action="store_true",
                        help="also play bench/concurrency.py's 1,000 x 128 and the skeleton at its CPU per match")
    parser.add_argument("--processes", type=int, default=1,
                        help="also the engine's shape split over this many processes that share nothing (default 1: not)")
    parser.add_argument("--hops", action="store_true",
                        help="also the shapes in between: slots of one seat, lanes of two seats")
    args = parser.parse_args(argv)
    trials = max(1, args.trials)
    columns = {"the engine's shape": ("engine", 1), "lanes of one seat": ("lanes", 1)}
    if args.hops:
        columns |= {"slots of one seat": ("one seat", 1), "lanes of two seats": ("lanes of two", 1)}
    if args.processes > 1:
        columns[f"the engine's shape in {args.processes} processes"] = ("engine", args.processes)

    print(f"trio {trio.__version__}; {load()}; reference loop {machine_speed():.0f} ms of CPU (lower is faster)")
    print(f"{MATCHES:,} matches, {AT_ONCE} at once, {LATENCY * 1000:g} ms agents; ideal "
          f"{-(-MATCHES // AT_ONCE) * LATENCY:.1f} s; median of {trials}; per column, the CPU per match "
          f"(the spin and trio's own work) and wall/ideal")
    header = f"{'spun ms':>7} | {'1 + 128c/100':>12} | " + " | ".join(f"{label:>22}" for label in columns)
    print("\n" + header + "\n" + "-" * len(header))
    points: dict[str, list[tuple[float, float]]] = {label: [] for label in columns}
    for spun in sorted(args.cpu):
        cells = []
        for label, (shape, processes) in columns.items():
            value, cpu_ms = median_trial(shape, spun, trials, processes)
            points[label].append((cpu_ms, value))
            cells.append(f"{cpu_ms:>7.3f} ms  {value:>6.3f}".rjust(max(22, len(label))))
        bound = 1 + AT_ONCE * points["the engine's shape"][-1][0] / (LATENCY * 1000)
        print(f"{spun:>7.2f} | {bound:>12.3f} | " + " | ".join(cells))

    print()
    for label, found in points.items():
        print(f"{label}: wall/ideal ≤ {GOAL:.2f} needs {crossing(sorted(found), GOAL)}")

    if args.engine:
        engine_ratio, engine_cpu = engine_figures(trials)
        own = min(points["the engine's shape"])[0] if 0.0 in args.cpu else median_trial("engine", 0.0, trials)[1]
        skeleton, skeleton_cpu = median_trial("engine", max(0.0, engine_cpu - own), trials)
        print(f"\nthe engine (bench/concurrency.py, 1,000 x 128, one process): wall/ideal {engine_ratio:.3f} at "
              f"{engine_cpu:.3f} ms of CPU per match; the skeleton at {skeleton_cpu:.3f} ms: {skeleton:.3f}")
    print(f"{load()}; reference loop {machine_speed():.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
