from __future__ import annotations

import sys

import pytest

from helpers import ROOT


@pytest.fixture
def run_cli():
    """Run the `arena` command in a subprocess, as a user would."""
    import subprocess

    def run(*args, cwd=None, env=None, timeout=120):
        return subprocess.run(
            [sys.executable, "-m", "arena.cli", *map(str, args)],
            cwd=cwd or ROOT, env=env, capture_output=True, text=True, timeout=timeout,
        )

    return run
