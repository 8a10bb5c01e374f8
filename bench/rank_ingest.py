"""A million reviews in a second? `arena rank --reviews` on a big file against a plain Python loop.

1. Writes 10^6 reviews (seeded) to a temporary JSONL file, PRD's five fields per line: 12
   contestants of known strength, 8 reviewers, every (question, ordered pair, reviewer) at most
   once, so no reviewer pools votes.
2. In one run, each measurement in a fresh process (its wall time from outside; its peak resident
   memory and CPU time as the ``ru_maxrss`` and ``ru_utime + ru_stime`` of a wrapper's only child):
   - the plain loop: ``json.loads`` per line and the same Elo (K 32, 1000 to start, scale 400) in
     pure Python, one ordering (the file's);
   - ``arena rank --reviews F --method elo --orderings 1 --bootstrap 0``;
   - what that command pays before it reads a byte (its imports, numba and the two Elo kernels it calls).
   Goal: arena at most a quarter of the loop's wall time, and at most 300 MB.
3. The numba kernels' disk cache: two fresh processes load the Elo kernels with an empty
   ``NUMBA_CACHE_DIR``; the first compiles them, the second must find every one in the cache
   (``dispatcher.stats``: hits, no misses). Both times are printed.

    python bench/rank_ingest.py               # 1 000 000 reviews
    python bench/rank_ingest.py --reviews 200000
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

import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
from machine import load  # noqa: E402  (bench/machine.py: the load beside every figure)

LOOP = r"""
import json, sys
ratings = {}
for line in open(sys.argv[1], encoding="utf-8"):
    if not line.strip():
        continue
    review = json.loads(line)
    a, b, score = review["a"], review["b"], review["score"]
    ra, rb = ratings.get(a, 1000.0), ratings.get(b, 1000.0)
    expected_a = 1 / (1 + 10 ** ((rb - ra) / 400))
    delta = 32 * ((1 - score) / 2 - expected_a)
    ratings[a], ratings[b] = ra + delta, rb - delta
print(json.dumps(ratings))
"""

# Runs its arguments as one child and prints its wall time and peak resident memory (KiB on Linux).
MEASURE = r"""
import resource, subprocess, sys, time
start = time.perf_counter()
done = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
wall = time.perf_counter() - start
if done.returncode:
    sys.exit(done.stderr)
used = resource.getrusage(resource.RUSAGE_CHILDREN)
print(wall, used.ru_maxrss, used.ru_utime + used.ru_stime)
"""

KERNELS = r"""
import json, time
import numpy as np
start = time.perf_counter()
from arena.rank import elo_loop
from arena.rank.reviews import Reviews
rows = [("q%d" % (i % 7), "m%d" % (i % 5), "m%d" % ((i + 1 + i // 5) % 5), "r%d" % (i % 3), i % 3 - 1) for i in range(60)]
reviews = Reviews.from_rows(rows)
order = elo_loop.shuffled(np.arange(len(reviews)), np.random.default_rng(0).random((2, len(reviews))), compiled=True)
start_w, as_c = np.ones(len(reviews.reviewers)), np.full(len(reviews.reviewers), -1)
elo_loop.replay(reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start_w, as_c, len(reviews.contestants),
                1, 32, 1000, 400, compiled=True)
marks = np.full(len(reviews) + 1, -1); marks[-1] = 0
elo_loop.checkpoint_sums(reviews.a, reviews.b, reviews.score.astype(float), order, marks, 1, len(reviews.contestants),
                         32, 1000, 400, compiled=True)
from arena.rank import elo_compiled
kernels = [elo_compiled.shuffle, elo_compiled.replay, elo_compiled.checkpoint_sums]
print(json.dumps({"seconds": time.perf_counter() - start,
                  "hits": sum(sum(k.stats.cache_hits.values()) for k in kernels),
                  "misses": sum(sum(k.stats.cache_misses.values()) for k in kernels)}))
"""


# What `arena rank --reviews` pays before reading a byte: Python, the command's modules, pyarrow's reader,
# numba and the two Elo kernels it calls (from the disk cache), on a few reviews.
FLOOR = r"""
import numpy as np
from arena.cli import commands
from arena.rank import leaderboard
from arena.rank.reviews import Reviews
import pyarrow.json, pyarrow._compute
from arena.rank import elo_compiled
draws = np.random.default_rng(0).random((1, 4))
order = elo_compiled.shuffle(np.arange(4), draws)
elo_compiled.checkpoint_sums(np.array([0, 1, 0, 1]), np.array([1, 0, 1, 0]), np.zeros(4), order, np.full(5, -1), 1, 2,
                             32.0, 1000.0, 0.005)
"""


def write_reviews(path: Path, n: int, seed: int = 0) -> None:
    """``n`` reviews of 12 contestants by 8 reviewers, Bradley–Terry with ties, each comparison once."""
    rng = np.random.default_rng(seed)
    contestants, reviewers = 12, 8
    pairs = [(a, b) for a in range(contestants) for b in range(contestants) if a != b]
    questions = -(-n // (len(pairs) * reviewers))
    chosen = rng.permutation(questions * len(pairs) * reviewers)[:n]
    question, rest = np.divmod(chosen, len(pairs) * reviewers)
    pair, reviewer = np.divmod(rest, reviewers)
    a, b = np.array(pairs)[pair].T
    strength = np.linspace(-1.5, 1.5, contestants)
    b_wins = 1 / (1 + np.exp(strength[a] - strength[b]))
    draw = rng.random(n)
    score = np.where(draw < 0.85 * b_wins, 1, np.where(draw > 1 - 0.85 * (1 - b_wins), -1, 0))
    with path.open("w", encoding="utf-8") as out:
        for q, x, y, r, s in zip(question.tolist(), a.tolist(), b.tolist(), reviewer.tolist(), score.tolist()):
            out.write(f'{{"question": "q{q:05d}", "a": "model-{x:02d}", "b": "model-{y:02d}", '
                      f'"reviewer": "judge-{r}", "score": {s}}}\n')


def measured(command: list[str], env: dict | None = None) -> tuple[float, float, float]:
    """Wall seconds, peak MiB and CPU seconds of ``command`` run in a fresh process."""
    out = subprocess.run([sys.executable, "-c", MEASURE, *command], capture_output=True, text=True, env=env)
    if out.returncode:
        sys.exit(f"{' '.join(command)} failed: {out.stderr.strip()}")
    wall, peak, cpu = out.stdout.split()
    return float(wall), int(peak) / 1024, float(cpu)


def kernels(cache: Path) -> dict:
    env = dict(os.environ, NUMBA_CACHE_DIR=str(cache))
    out = subprocess.run([sys.executable, "-c", KERNELS], capture_output=True, text=True, env=env, check=True)
    return json.loads(out.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--reviews", type=int, default=1_000_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    print(f"Python {sys.version.split()[0]}; {load()}")
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "reviews.jsonl"
        start = time.perf_counter()
        write_reviews(path, args.reviews, args.seed)
        print(f"{args.reviews:,} reviews written in {time.perf_counter() - start:.1f} s "
              f"({path.stat().st_size / 2**20:.0f} MiB)\n")
        print(f"{'':40} {'wall':>8} {'CPU':>8} {'peak':>8}")
        loop = measured([sys.executable, "-c", LOOP, str(path)])
        print(f"{'plain loop (json.loads + Elo in Python)':40} {loop[0]:7.2f}s {loop[2]:7.2f}s {loop[1]:4.0f} MiB  [{load()}]")
        rank = measured([sys.executable, "-m", "arena.cli", "rank", "--reviews", str(path), "--method", "elo",
                         "--orderings", "1", "--bootstrap", "0"])
        print(f"{'arena rank --reviews':40} {rank[0]:7.2f}s {rank[2]:7.2f}s {rank[1]:4.0f} MiB  [{load()}]")
        floor = measured([sys.executable, "-c", FLOOR])
        print(f"{'  of which fixed (no file read)':40} {floor[0]:7.2f}s {floor[2]:7.2f}s {floor[1]:4.0f} MiB  [{load()}]")
        ratio = rank[0] / loop[0]
        print(f"\narena / loop: wall time {ratio:.2f}, CPU time {rank[2] / loop[2]:.2f} "
              f"(goal, wall: <= 0.25: {'PASS' if ratio <= 0.25 else 'FAIL'}); "
              f"peak {rank[1]:.0f} MiB (goal <= 300 MB = {300e6 / 2**20:.0f} MiB: "
              f"{'PASS' if rank[1] * 2**20 <= 300e6 else 'FAIL'})")
        cache = Path(folder) / "numba-cache"
        first, second = kernels(cache), kernels(cache)
        print(f"\nElo kernels, empty cache: {first['seconds']:.2f} s ({first['misses']} compiled); "
              f"again in a new process: {second['seconds']:.2f} s ({second['hits']} from the cache, "
              f"{second['misses']} compiled): {'PASS' if second['misses'] == 0 and second['hits'] else 'FAIL'}")
    print(f"\n{load()}")


if __name__ == "__main__":
    main()
