"""The terminal, shared by whoever asks the person at it (a human seat, a human judge) and whatever
draws on it (the live dashboard).

A person reads one question at a time: ``lend_screen()`` lets one asker have the screen while the
others wait their turn, and makes the views that draw on it (``hold_screen``) step aside meanwhile,
so the dashboard's refreshes neither scroll the question away nor mix with what is typed.

Lines are read from standard input by trio itself (``wait_readable`` on its file descriptor), not by
a thread blocked in ``readline``: a turn that times out, or a Ctrl-C, leaves no reader behind that
would swallow the person's next line.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass

import trio

from arena.contract.errors import ArenaError


class TerminalClosed(ArenaError):
    """Standard input ended while a person was being asked."""


@dataclass(frozen=True, slots=True)
class _Holder:
    """A view that draws on the screen: how to make it step aside, and how to bring it back."""

    pause: Callable[[], None]
    resume: Callable[[], None]


_holders: list[_Holder] = []
_lock = trio.lowlevel.RunVar("arena terminal lock")  # one per trio run: a lock belongs to the run that made it
_pending = bytearray()  # what was typed past the last line handed out


def has_terminal() -> bool:
    """Whether a person can be asked here: standard input and standard error are a terminal."""
    try:
        return os.isatty(sys.stdin.fileno()) and os.isatty(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # replaced or closed streams
        return False


@contextmanager
def hold_screen(pause: Callable[[], None], resume: Callable[[], None]) -> Iterator[None]:
    """Register a view that draws on the terminal for as long as the block runs: ``pause`` is called
    when a person is about to be asked, ``resume`` once they have answered."""
    holder = _Holder(pause, resume)
    _holders.append(holder)
    try:
        yield
    finally:
        _holders.remove(holder)


@asynccontextmanager
async def lend_screen() -> AsyncIterator[None]:
    """The screen for one question: askers take turns (first come, first served), and the views
    that draw on it stay paused until the block ends, however it ends."""
    try:
        lock = _lock.get()
    except LookupError:
        lock = trio.StrictFIFOLock()
        _lock.set(lock)
    async with lock:
        paused = list(_holders)
        for holder in paused:
            holder.pause()
        try:
            yield
        finally:
            for holder in reversed(paused):
                holder.resume()


def show(text: str) -> None:
    """Write to the person (standard error: standard output may be a document, as with --json)."""
    sys.stderr.write(text)
    sys.stderr.flush()


async def read_line() -> str:
    """The next line the person types, without its line end. Raises ``TerminalClosed`` at the end of
    input. Cancelling it (a deadline, Ctrl-C) loses nothing typed: a line not yet handed out stays
    for the next read."""
    fd = sys.stdin.fileno()
    while b"\n" not in _pending:
        await trio.lowlevel.wait_readable(fd)
        chunk = os.read(fd, 4096)
        if not chunk:
            if _pending:  # a last line without its end
                break
            raise TerminalClosed("standard input ended while a person was being asked")
        _pending.extend(chunk)
    end = _pending.find(b"\n")
    line = bytes(_pending if end < 0 else _pending[:end])
    del _pending[: len(_pending) if end < 0 else end + 1]
    return line.decode("utf-8", errors="replace").rstrip("\r")
