"""Memory of a run: peak RSS of tournaments of 300, 1 000 and 3 000 matches, and the time and
peak RSS of resuming a finished 1 000-match run.

The matches are those of ``bench/engine_overhead.py``: eight scripted agents (delay 0) at one
fixed table of public goods, mode 1, 20 rounds (328 messages and 510 events a match), 8 at
once, with the SQLite store on. Each size is played in a fresh subprocess, so each peak is its
own and not the high-water mark of an earlier run. The resume opens the finished 1 000-match
run again, as `arena run` does the second time, and plays nothing.

Goals (issue 15): peak RSS at most 300 MB for every size (memory does not grow with the
run); the resume within 2 s and 150 MB. Besides the figures, the script prints ratios taken
in the same invocation (peak of the largest run over the smallest, resume time over the
time of playing the run), which mean the same on a busy machine as on an idle one.

    python bench/memory.py                  # 300, 1 000, 3 000 matches; ~2 min on 2 idle cores
    python bench/memory.py --quick          # 30, 100, 300 matches
    python bench/memory.py --code DIR       # the same, with the arena package found in DIR first
                                            # (another checkout, e.g. the code before a change)
    python bench/memory.py --executor ray --workers 2
                                            # each size played locally and by 2 Ray actors: the
                                            # run's own process's peak RSS under both (issue 38)

Under Ray the matches are played by actors in processes of their own; the figure is the run's own
process's (the driver's, the one writer of the store): what must stay bounded as in a local run. A
local Ray instance is started for each Ray run and stopped after it, as `arena run --executor ray`
does with no cluster around; its processes are not the run's and are not counted.

Exit status 1 when a goal is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from machine import load  # bench/machine.py: the load and a reference loop's speed

HERE = Path(__file__).resolve().parent
RSS_GOAL_MB = 300
RESUME_GOAL_S, RESUME_GOAL_MB = 2.0, 150


def _child(mode: str, matches: int, run_dir: Path, workers: int) -> dict:
    """Play (or resume) in this process and say how long it took and the process's peak RSS. ``mode``
    ``ray``: played by ``workers`` Ray actors, this process the run's driver."""
    import resource

    import trio
    import yaml

    sys.path.insert(0, str(HERE))
    from engine_overhead import scenario_dict

    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    raw = scenario_dict(matches, rounds=20, mode=1, at_once=8)
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(run_dir, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
    try:
        start = time.perf_counter()
        execution = None  # the scenario's: local (and a --code checkout older than executors knows no other)
        if mode == "ray":
            from arena.run.scenario import Execution

            execution = Execution(executor="ray", workers=workers)
        trio.run(lambda: run_tournament(scenario, store, execution=execution))
        seconds = time.perf_counter() - start
        counts = store.read.counts()
    finally:
        store.close()
    if counts.get("finished") != matches:
        raise SystemExit(f"{mode}: {counts} of {matches} matches: the benchmark is void")
    import arena

    peak_kib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss  # KiB on Linux
    return {"seconds": seconds, "rss_mb": peak_kib * 1024 / 1e6, "arena": str(Path(arena.__file__).parent)}


def measure(mode: str, matches: int, run_dir: Path, code: Path | None, workers: int = 1) -> dict:
    env = dict(os.environ)
    if code is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(code), *filter(None, [env.get("PYTHONPATH")])])
    out = subprocess.run([sys.executable, __file__, "--child", mode, str(matches), str(run_dir),
                          "--workers", str(workers)],
                         env=env, cwd=run_dir.parent, capture_output=True, text=True)
    if out.returncode != 0:
        raise SystemExit(f"{mode} of {matches} matches failed:\n{out.stderr}")
    return json.loads(out.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="30, 100 and 300 matches")
    parser.add_argument("--sizes", type=int, nargs=3, metavar="N", help="three run sizes (default 300 1000 3000); "
                        "the second is resumed")
    parser.add_argument("--code", type=Path, help="a folder to find the arena package in before this checkout")
    parser.add_argument("--executor", choices=("local", "ray"), default="local",
                        help="ray: play each size locally and by Ray actors too, and compare the run's own process's peaks")
    parser.add_argument("--workers", type=int, default=2, help="Ray actors, with --executor ray (default 2)")
    parser.add_argument("--child", nargs=3, metavar=("MODE", "MATCHES", "RUN_DIR"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        mode, matches, run_dir = args.child
        print(json.dumps(_child(mode, int(matches), Path(run_dir), args.workers)))
        return 0

    sizes = tuple(args.sizes) if args.sizes else (30, 100, 300) if args.quick else (300, 1000, 3000)
    resumed_size = sizes[1]  # the finished run that is resumed
    print(f"public goods, mode 1, 8 scripted agents (delay 0) at one table, 20 rounds, 8 at once, store on"
          + (f"; arena from {args.code}" if args.code else ""))
    print(f"at the start: {load()}")
    played: dict[int, dict] = {}
    with tempfile.TemporaryDirectory(prefix="arena-bench-memory-") as tmp:
        for matches in sizes:
            played[matches] = measure("play", matches, Path(tmp) / f"run-{matches}", args.code)
            print(f"  played {matches:>5} matches in {played[matches]['seconds']:6.1f} s, "
                  f"peak RSS {played[matches]['rss_mb']:5.0f} MB", flush=True)
        resumed = measure("resume", resumed_size, Path(tmp) / f"run-{resumed_size}", args.code)
        under_ray: dict[int, dict] = {}
        if args.executor == "ray":  # after the local runs, so that both are measured in this invocation
            for matches in sizes:
                under_ray[matches] = measure("ray", matches, Path(tmp) / f"ray-{matches}", args.code, args.workers)
                print(f"  played {matches:>5} matches by {args.workers} Ray actors in "
                      f"{under_ray[matches]['seconds']:6.1f} s, the run's own process's peak RSS "
                      f"{under_ray[matches]['rss_mb']:5.0f} MB", flush=True)
    print(f"  resumed the finished {resumed_size}-match run in {resumed['seconds']:.2f} s, "
          f"peak RSS {resumed['rss_mb']:.0f} MB")
    print(f"at the end: {load()}; arena package used: {resumed['arena']}")

    ok = True
    print()
    print(f"{'run':<28} {'wall s':>8} {'peak RSS MB':>12} {'goal':>14} {'':>5}")
    for matches, f in played.items():
        passed = f["rss_mb"] <= RSS_GOAL_MB
        ok &= passed
        print(f"{'play ' + str(matches) + ' matches':<28} {f['seconds']:>8.1f} {f['rss_mb']:>12.0f} "
              f"{'<= ' + str(RSS_GOAL_MB) + ' MB':>14} {'PASS' if passed else 'FAIL':>5}")
    for matches, f in under_ray.items():  # the driver's own peak: bounded as a local run's
        passed = f["rss_mb"] <= RSS_GOAL_MB
        ok &= passed
        print(f"{f'play {matches} by {args.workers} Ray actors':<28} {f['seconds']:>8.1f} {f['rss_mb']:>12.0f} "
              f"{'<= ' + str(RSS_GOAL_MB) + ' MB':>14} {'PASS' if passed else 'FAIL':>5}")
    passed = resumed["seconds"] <= RESUME_GOAL_S and resumed["rss_mb"] <= RESUME_GOAL_MB
    ok &= passed
    print(f"{'resume ' + str(resumed_size) + ' finished':<28} {resumed['seconds']:>8.2f} {resumed['rss_mb']:>12.0f} "
          f"{f'<= {RESUME_GOAL_S:g} s, {RESUME_GOAL_MB} MB':>14} {'PASS' if passed else 'FAIL':>5}")
    small, large = played[sizes[0]], played[sizes[-1]]
    print()
    print(f"ratios in this invocation: peak RSS {sizes[-1]} / {sizes[0]} matches = {large['rss_mb'] / small['rss_mb']:.2f} "
          f"(constant memory: 1.00); growth {(large['rss_mb'] - small['rss_mb']) / (sizes[-1] - sizes[0]) * 1000:.0f} kB "
          f"per match; resume / play of {resumed_size} matches = {resumed['seconds'] / played[resumed_size]['seconds']:.3f}")
    if under_ray:
        ray_small, ray_large = under_ray[sizes[0]], under_ray[sizes[-1]]
        ray_growth = (ray_large["rss_mb"] - ray_small["rss_mb"]) / (sizes[-1] - sizes[0]) * 1000
        print(f"under Ray, the run's own process: peak RSS {sizes[-1]} / {sizes[0]} matches = "
              f"{ray_large['rss_mb'] / ray_small['rss_mb']:.2f}; growth {ray_growth:.0f} kB per match; "
              f"Ray / local peak at {sizes[-1]} matches = {ray_large['rss_mb'] / large['rss_mb']:.2f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
