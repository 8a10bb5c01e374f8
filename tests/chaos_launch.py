"""Runs the arena CLI and kills it with SIGKILL at one chosen point: the nth call of a named
function, just before or just after it runs.

    python chaos_launch.py arena.store.writer:RunStore.finish 7 after -- run s.yaml --quiet

A kill from inside lands exactly where it is aimed (before the store exists, between a match's
events, inside a transaction), which a kill from outside can only hope to hit.
"""

import importlib
import inspect
import os
import signal
import sys


def arm(target: str, nth: int, when: str) -> None:
    module, _, qualname = target.partition(":")
    owner = importlib.import_module(module)
    *path, name = qualname.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = inspect.getattr_static(owner, name)
    wrapped = original.__func__ if isinstance(original, (classmethod, staticmethod)) else original
    calls = [0]

    def aimed(*args, **kwargs):
        calls[0] += 1
        if calls[0] == nth and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = wrapped(*args, **kwargs)
        if calls[0] == nth and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, type(original)(aimed) if isinstance(original, (classmethod, staticmethod)) else aimed)


if __name__ == "__main__":
    target, nth, when, separator, *argv = sys.argv[1:]
    assert separator == "--" and when in ("before", "after"), sys.argv
    arm(target, int(nth), when)
    from arena.cli import main

    sys.exit(main(argv))
