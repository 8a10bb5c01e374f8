"""How Python's cyclic garbage collector works while a run plays.

A run allocates a few objects per message (the message, its events, what the store buffers) and
frees nearly all of them by reference counting. Every full collection walks everything alive,
modules, plugin classes and pydantic's schemas included: at 20,000 messages in one match that
took 15 µs of a message's 60–90. What existed before the run started is never garbage while it
plays, so it is frozen out of the collector's walks (half the cost). The young generation keeps
Python's threshold: collecting it every 10,000 allocations instead of 700 would have cut the rest
by half again, but let a run's memory grow with its matches (147 MB against 111 MB for 300 of
`bench/memory.py`'s matches). The freeze is undone when the run ends, so a notebook that plays
several runs gets its collector back as it was, and cycles dropped meanwhile are collected then.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def tuned_for_a_run() -> Iterator[None]:
    """Leave what is alive now out of every collection until the block ends."""
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()
