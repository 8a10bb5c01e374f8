from __future__ import annotations

import sys

import pytest

from helpers import ROOT, NotingOpenAI


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


@pytest.fixture
def noting_backend():
    """The agent backend "noting_openai": openai, saying a note about its endpoint."""
    from arena.contract import plugins

    plugins.register("agent backend", "noting_openai", NotingOpenAI)
    yield "noting_openai"
    plugins.unregister("agent backend", "noting_openai")
