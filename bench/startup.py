"""Start-up: what `arena --help` and `arena games` cost before they print anything.

Each command runs in a fresh interpreter (the way a person types it), and its CPU time (user +
system, from the child's rusage) is compared with the floor of any trio and pydantic program,
`python -c "import trio, pydantic"`, and with `python -c pass`. CPU time, not wall time: on a
shared machine the wall clock also counts other people's work. Best of N for each.

    python bench/startup.py              # best of 7
    python bench/startup.py --runs 3
    python bench/startup.py --imports    # also list the heaviest modules `arena --help` imports

Goal (issue 15): `arena --help` at most 5 times `python -c "import trio, pydantic"`.
"""

from __future__ import annotations

import argparse
import resource
import subprocess
import sys
import tempfile
from machine import load  # bench/machine.py: the load and a reference loop's speed

GOAL = 5.0
PYTHON = sys.executable
COMMANDS = {
    "python -c pass": [PYTHON, "-c", "pass"],
    "import trio, pydantic": [PYTHON, "-c", "import trio, pydantic"],
    "arena --help": [PYTHON, "-c", "import sys; from arena.cli import main; sys.exit(main(['--help']))"],
    "arena games": [PYTHON, "-c", "import sys; from arena.cli import main; sys.exit(main(['games']))"],
}


def cpu_of(command: list[str], cwd: str) -> float:
    """CPU seconds (user + system) the command's process took."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(command, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode not in (0,):
        raise SystemExit(f"{' '.join(command)} exited with {done.returncode}: {done.stderr[-500:]}")
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def heaviest_imports(cwd: str, top: int = 15) -> list[tuple[int, str]]:
    """The modules `arena --help` imports with the most cumulative import time (µs), from -X importtime."""
    done = subprocess.run([PYTHON, "-X", "importtime", *COMMANDS["arena --help"][1:]], cwd=cwd,
                          stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    rows = []
    for line in done.stderr.splitlines():
        if not line.startswith("import time:") or "cumulative" in line:
            continue
        _, cumulative, name = line.removeprefix("import time:").split("|")
        depth = (len(name) - len(name.lstrip()) - 1) // 2
        if depth <= 1:  # top-level imports and their direct children: where a lazy import would help
            rows.append((int(cumulative), "  " * depth + name.strip()))
    return sorted(rows, reverse=True)[:top]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=7, help="runs of each command; the best counts (default 7)")
    parser.add_argument("--imports", action="store_true", help="list the heaviest imports of `arena --help`")
    args = parser.parse_args(argv)
    print(f"Python {sys.version.split()[0]}; {load()}")
    with tempfile.TemporaryDirectory(prefix="arena-startup-") as cwd:  # no scenario or run folder nearby
        best = {name: min(cpu_of(cmd, cwd) for _ in range(max(1, args.runs))) for name, cmd in COMMANDS.items()}
        floor = best["import trio, pydantic"]
        print(f"\n{'command':<24} {'CPU ms':>8} {'× trio+pydantic':>16} {'× python':>9}")
        for name, seconds in best.items():
            print(f"{name:<24} {seconds * 1000:>8.0f} {seconds / floor:>16.2f} {seconds / best['python -c pass']:>9.1f}")
        ratio = best["arena --help"] / floor
        verdict = "PASS" if ratio <= GOAL else "FAIL"
        print(f"\narena --help: ×{ratio:.2f} `import trio, pydantic` (goal ≤ {GOAL:g}): {verdict}")
        if args.imports:
            print("\nheaviest imports of `arena --help` (cumulative ms):")
            for micros, name in heaviest_imports(cwd):
                print(f"  {micros / 1000:>7.1f}  {name}")
    print(f"\n{load()}")
    return 0 if verdict == "PASS" else 1


if __name__ == "__main__":
    sys.exit(main())
