"""What the benchmarks say about the machine beside their figures: its load, and its speed.

The same VM can run two times slower on one day than on another, and its speed drifts within a
session, so figures of different days are compared through a fixed loop's time."""

from __future__ import annotations

import os
import time


def load() -> str:
    one, five, _ = os.getloadavg()
    return f"load average {one:.2f} (1 min), {five:.2f} (5 min) on {os.cpu_count()} CPUs"


def machine_speed() -> float:
    """CPU ms of a fixed pure-Python loop (best of 3)."""
    best = float("inf")
    for _ in range(3):
        cpu = time.process_time()
        total = 0
        for i in range(2_000_000):
            total += i
        best = min(best, time.process_time() - cpu)
    return best * 1e3
