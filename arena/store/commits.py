"""One commit for all the matches that end close together.

Committing each match on its own cost 157 µs, a fifth of a scripted match's CPU (750 µs), and
a commit's cost grows much less than what it carries: one for seven matches took 430 µs.
Matches played at once tend to end together (their agents answer together). Each writes its
outcome into the store's open transaction as it ends, with its last rows, so that whatever
commits next has both; then the first to end waits until the run has nothing else to do, or
until as many matches as the run plays at once are waiting, and commits for all of them. The
commit is then made while the agents of the matches that took the freed slots think, not between
those matches' set-ups. Each match waits for the commit: a match the run counts as played is in
the store for any reader, and a crash before the commit leaves it to be replayed, as a crash
before a commit of its own did.
"""

from __future__ import annotations

import trio

try:  # trio.testing's own function; importing trio.testing imports pytest with it, 0.1 s of every run's start
    from trio._core import wait_all_tasks_blocked
except ImportError:  # a trio that moved it: the public name, at that price
    from trio.testing import wait_all_tasks_blocked

from arena.store.errors import StoreError


class _Gathering:
    __slots__ = ("matches", "waiting", "done", "error")

    def __init__(self) -> None:
        self.matches = 1
        # shielded: whoever gathers the others commits for them, even when its own match is cancelled
        self.waiting = trio.CancelScope(shield=True)
        self.done = trio.Event()
        self.error: BaseException | None = None


class GroupCommit:
    """``await commit()`` returns once what was written before it is committed. ``gather``: how
    many matches one commit waits for at most, the run's matches at once; 1 commits at once."""

    def __init__(self, store, gather: int = 1) -> None:  # a RunStore, or anything with its ``flush``
        self._store = store
        self._gather = max(1, gather)
        self._gathering: _Gathering | None = None

    async def commit(self) -> None:
        gathering = self._gathering
        if gathering is not None:  # another match is about to commit: ride along
            gathering.matches += 1
            if gathering.matches >= self._gather:
                gathering.waiting.cancel()
            await gathering.done.wait()
            error = gathering.error
            if isinstance(error, Exception):
                raise StoreError(f"the run store could not save the match: {error}") from error
            if error is not None:  # Ctrl-C or a cancellation reached the one committing: it stops this match too
                raise error
            return
        gathering = _Gathering()
        try:
            if self._gather > 1:
                self._gathering = gathering
                with gathering.waiting:  # until every task is waiting (for agents, mostly), or enough matches are
                    await wait_all_tasks_blocked()
                self._gathering = None  # from here on, a match that ends waits for the next commit
            self._store.flush()
        except BaseException as exc:
            gathering.error = exc
            raise
        finally:
            self._gathering = None
            gathering.done.set()
