"""The sandbox's cost: how long one HumanEval check takes inside it, against the same check in a
plain child interpreter, and how many run side by side.

For the first N HumanEval problems the canonical solution is run against the problem's tests
(a) in a bare ``python -I`` subprocess, (b) in the sandbox with every protection, (c) in the
sandbox without its seccomp filter (what the filter costs), (d) in the sandbox without
namespaces (what a machine that refuses them gets). It prints the median seconds per check for
each and the ratios, then the wall time of N sandboxed checks at 4 at once.

    python bench/sandbox.py            # 40 problems
    python bench/sandbox.py --quick    # 10
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import trio

from arena.games.code_review import load_problems
from arena.referees.execution.sandbox import Limits, run_python, run_tests

HARNESS = "{program}\n\n{tests}\n\ncheck({entry_point})\n"


def bare(program: str, tests: str, entry_point: str) -> float:
    with tempfile.TemporaryDirectory() as where:
        path = Path(where) / "run.py"
        path.write_text(HARNESS.format(program=program, tests=tests, entry_point=entry_point))
        start = time.perf_counter()
        subprocess.run([sys.executable, "-I", str(path)], check=True, capture_output=True, env={})
        return time.perf_counter() - start


async def sandboxed(program: str, tests: str, entry_point: str, **protections: bool) -> float:
    """One check; ``protections`` (namespaces=False, seccomp=False) turns some off."""
    start = time.perf_counter()
    if not protections:
        outcome = await run_tests(program, tests, entry_point, Limits())
    else:
        outcome = await run_python(HARNESS.format(program=program, tests=tests, entry_point=entry_point), Limits(),
                                   **protections)
    assert outcome.status == "ok", outcome.reason
    return time.perf_counter() - start


async def main(n: int) -> None:
    problems = list(load_problems("humaneval").values())[:n]
    cases = [(p.reference, p.test, p.entry_point) for p in problems]
    plain = [bare(*c) for c in cases]
    # Interleaved, so that a change in the machine's load falls on every variant alike.
    inside, unfiltered, loose = [], [], []
    for c in cases:
        inside.append(await sandboxed(*c))
        unfiltered.append(await sandboxed(*c, seccomp=False))
        loose.append(await sandboxed(*c, namespaces=False))
    a, b, c, d = (statistics.median(x) for x in (plain, inside, unfiltered, loose))
    print(f"{n} HumanEval checks, median seconds per check:")
    print(f"  plain child interpreter          {a:.3f} s")
    print(f"  sandbox, full protections        {b:.3f} s   (x{b / a:.2f} the plain child)")
    print(f"  sandbox, without seccomp filter  {c:.3f} s   (x{c / a:.2f}; the filter costs {1000 * (b - c):+.0f} ms)")
    print(f"  sandbox, without namespaces      {d:.3f} s   (x{d / a:.2f})")
    limiter = trio.CapacityLimiter(4)
    start = time.perf_counter()

    async def one(case):
        async with limiter:
            await sandboxed(*case)

    async with trio.open_nursery() as nursery:
        for case in cases:
            nursery.start_soon(one, case)
    wall = time.perf_counter() - start
    print(f"  {n} sandboxed checks, 4 at once: {wall:.2f} s wall ({n / wall:.1f} checks/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    trio.run(main, 10 if args.quick else 40)
