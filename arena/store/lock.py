"""One writer per run directory: `run.lock`, held by the `arena run` that plays the run.

The lock is an ``flock`` on the file, so the kernel lets go of it when the holder dies, however it
dies (a kill -9 included): a lock can never outlive its process. The file's text names the holder
(pid, host, since when) so that a second `arena run` can say at once who has the run. A holder
that ends normally empties the file; a file that still names someone when the lock is free was
left by a writer that died, and the new writer says it takes over.

The file itself is never deleted: a process that opened it just before a deletion would lock a
file nobody else can see, and two writers would each believe they hold the run.
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import time
from pathlib import Path
from typing import Any

from arena.store.errors import NotPermitted, StoreError

LOCK_FILE = "run.lock"


def _when(stamp: Any) -> str:
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(stamp)))
    except (TypeError, ValueError, OverflowError):
        return "an unknown time"


def describe(holder: dict[str, Any]) -> str:
    """'pid 123 on host lab-2, since 2024-05-01 10:00:00', from what a lock file says."""
    return f"pid {holder.get('pid', '?')} on host {holder.get('host', '?')}, since {_when(holder.get('started'))}"


def _read(fd: int) -> dict[str, Any]:
    os.lseek(fd, 0, os.SEEK_SET)
    raw = os.read(fd, 4096)
    if not raw.strip():
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        return {"pid": "?", "host": "?"}  # half written by a writer that died at that moment
    return found if isinstance(found, dict) else {"pid": "?", "host": "?"}


class RunLock:
    """The held lock of one run directory. ``previous``: who held it before and died without letting go
    (None when the directory was free)."""

    def __init__(self, path: Path, fd: int, previous: dict[str, Any] | None):
        self.path = path
        self._fd: int | None = fd
        self.previous = previous

    @classmethod
    def acquire(cls, run_dir: Path) -> "RunLock":
        path = Path(run_dir) / LOCK_FILE
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o666)
        except PermissionError:
            raise NotPermitted(run_dir, "write in", "`arena run` needs a run directory it may write to (the other "
                               "commands only read it): give another --run-dir, or run as a user who may") from None
        except OSError as exc:
            raise StoreError(f"cannot take the lock {path} for this run ({exc.strerror}); `arena run` needs a "
                             "run directory it may write to (the other commands only read it)") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read(fd)
            os.close(fd)
            who = describe(holder) if holder else "a process that is just starting"
            raise StoreError(
                f"{run_dir} is being played by another `arena run` ({who}); let it finish, follow it with "
                f"`arena watch {run_dir}`, or give this run another --run-dir"
            ) from None
        except OSError:
            os.close(fd)
            raise
        previous = _read(fd) or None
        mine = {"pid": os.getpid(), "host": socket.gethostname(), "started": time.time()}
        os.ftruncate(fd, 0)
        os.pwrite(fd, json.dumps(mine).encode(), 0)
        os.fsync(fd)
        return cls(path, fd, previous)

    def release(self) -> None:
        if self._fd is None:
            return
        fd, self._fd = self._fd, None
        try:
            os.ftruncate(fd, 0)  # an empty file: nobody holds the run, and nobody died holding it
        except OSError:
            pass
        finally:
            os.close(fd)  # closing lets go of the flock

    def __del__(self):
        self.release()
