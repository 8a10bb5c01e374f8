"""Every goal of issue 15 in one sitting: each bench that judges one, run in turn, and a table.

This machine's speed drifts by half within minutes (a pure-Python loop of 2 million additions
takes 43 ms in its fast phase and up to 160 ms in its slow one), and each goal is an absolute
figure "on an idle machine". So the goals are judged together, bench after bench, with the
reference loop taken before and after each: a table whose loops are all near the machine's
fastest is the figures of an idle machine; one whose loops wander says which figure ran slow.

Each bench runs as a subprocess, as a person would run it, and is judged by its own exit status
(each exits 1 when a figure misses its goal). What it prints is shown as it is.

    python bench/goals.py                # startup, anonymity, concurrency, memory, report (~5 min)
    python bench/goals.py --quick        # the benches' --quick variants where they have one (~1 min);
                                         # not a verdict on the goals, which are of the full sizes
    python bench/goals.py --only report  # some of them (repeatable)

Exit status 1 when a bench misses a goal.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from machine import load, machine_speed  # bench/machine.py: the load and a reference loop's speed

HERE = Path(__file__).resolve().parent

# name -> (script and its arguments, the arguments of its --quick variant, what it judges)
BENCHES = {
    "startup": (["startup.py"], ["startup.py", "--runs", "3"], "arena --help ≤ 5 × import trio, pydantic"),
    "anonymity": (["anonymity.py"], ["anonymity.py", "--quick"],
                  "µs per message with the store ≤ 50, 20,000 / 100 ≤ 1.3"),
    "concurrency": (["concurrency.py"], ["concurrency.py", "--quick"],
                    "wall/ideal: 200 × 16 ≤ 1.10, 1,000 × 128 ≤ 1.30 (or its bound measured)"),
    "memory": (["memory.py"], ["memory.py", "--quick"], "peak RSS ≤ 300 MB at any size; resume ≤ 2 s, ≤ 150 MB"),
    "report": (["report_size.py", "--no-browser"], ["report_size.py", "--no-browser", "--matches", "2000"],
               "arena report of 10,000 matches ≤ 3 s"),
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="the benches' quick variants (no verdict on the goals)")
    parser.add_argument("--only", action="append", choices=list(BENCHES), help="run only these benches")
    args = parser.parse_args()
    chosen = args.only or list(BENCHES)
    print(f"Python {sys.version.split()[0]}; {load()}; {time.strftime('%Y-%m-%d %H:%M:%S')}")
    rows = []
    for name in chosen:
        full, quick, judges = BENCHES[name]
        command = [sys.executable, str(HERE / (quick if args.quick else full)[0]), *(quick if args.quick else full)[1:]]
        before = machine_speed()
        started = time.perf_counter()
        done = subprocess.run(command, cwd=HERE.parent, capture_output=True, text=True)
        seconds = time.perf_counter() - started
        after = machine_speed()
        verdict = {0: "PASS", 1: "FAIL"}.get(done.returncode, f"ERROR (exit {done.returncode})")
        print(f"\n== {name}: {judges}  [{verdict}; {seconds:.0f} s; reference loop {before:.0f} → {after:.0f} ms]")
        for line in done.stdout.splitlines():  # its figures as it printed them, without its lines on the machine
            if line.strip() and not line.startswith(("Python ", "trio ", "load average")):
                print(f"   {line}")
        if done.returncode not in (0, 1):
            print(done.stderr[-2000:])
        rows.append((name, verdict, before, after))
    print(f"\n{'bench':<12} {'verdict':<8} {'loop ms before → after':>24}")
    for name, verdict, before, after in rows:
        print(f"{name:<12} {verdict:<8} {before:>14.0f} → {after:<6.0f}")
    print(f"\n{load()}; {time.strftime('%H:%M:%S')}" + ("; --quick: sizes below the goals'" if args.quick else ""))
    return 0 if all(verdict == "PASS" for _, verdict, _, _ in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
