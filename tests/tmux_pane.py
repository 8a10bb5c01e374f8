"""A terminal a test types into: a shell in a tmux pane of a tmux server of the test's own.

The test reads the screen as a person sees it (``capture-pane``) and waits for it to change by
reading the pane's output as tmux streams it (``pipe-pane`` into a FIFO): each wait wakes when the
program writes, never after a fixed time.
"""

from __future__ import annotations

import os
import select
import shutil
import subprocess
import time
from pathlib import Path

TMUX = shutil.which("tmux")


class Pane:
    def __init__(self, folder: Path, width: int = 150, height: int = 45):
        self.socket = str(folder / "tmux.sock")
        self.target = "arena"
        fifo = folder / "pane.out"
        os.mkfifo(fifo)
        self._out = os.open(fifo, os.O_RDONLY | os.O_NONBLOCK)  # open before tmux's writer, which would block
        self._keep = os.open(fifo, os.O_WRONLY)  # a writer always there: no end-of-file wakes a wait for nothing
        env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(folder), "LANG": "C.UTF-8",
               "TERM": "xterm-256color", "PS1": "$ "}
        self._tmux("new-session", "-d", "-s", self.target, "-x", str(width), "-y", str(height),
                   "bash --norc --noprofile", env=env)
        self._tmux("pipe-pane", "-t", self.target, "-o", f"cat >> {fifo}")

    def _tmux(self, *args: str, env: dict | None = None) -> str:
        done = subprocess.run([TMUX, "-S", self.socket, "-f", "/dev/null", *args], capture_output=True, text=True,
                              env=env, timeout=30)
        if done.returncode:
            raise RuntimeError(f"tmux {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    def type(self, text: str) -> None:
        """Type a line and press Enter."""
        self._tmux("send-keys", "-t", self.target, "-l", text)
        self._tmux("send-keys", "-t", self.target, "Enter")

    def press(self, key: str) -> None:
        self._tmux("send-keys", "-t", self.target, key)

    def screen(self) -> str:
        """What the pane shows now, its visible rows only."""
        return self._tmux("capture-pane", "-p", "-J", "-t", self.target)

    def everything(self) -> str:
        """All the pane has shown, its scrollback included."""
        return self._tmux("capture-pane", "-p", "-J", "-S", "-", "-t", self.target)

    def wait_for(self, condition, what: str, timeout: float = 90) -> str:
        """Wait until ``condition(everything())`` holds, waking whenever the pane gets output; the text."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.everything()
            if condition(text):
                return text
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError(f"timed out waiting for {what}; the pane shows:\n{self.screen()}")
            ready, _, _ = select.select([self._out], [], [], left)
            if ready:
                os.read(self._out, 65536)  # drained: the next wait wakes on new output only

    def wait_text(self, text: str, count: int = 1, timeout: float = 90) -> str:
        return self.wait_for(lambda shown: shown.count(text) >= count, f"{text!r} (shown {count} times)", timeout)

    def close(self) -> None:
        subprocess.run([TMUX, "-S", self.socket, "kill-server"], capture_output=True, timeout=30)
        os.close(self._out)
        os.close(self._keep)
