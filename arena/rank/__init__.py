"""Peer rank: turning review tuples and payoffs into leaderboards people can trust (PRD, DeepEval).

The leaderboard and its models live in ``board``; they are loaded on first use, so that importing
one light module of the package (``places``, ``reviews``) does not load scipy and the Elo loops.
"""

from __future__ import annotations

import importlib

_BOARD = ("Agreement", "Leaderboard", "METHODS", "Method", "MethodResult", "Separated", "leaderboard")

__all__ = list(_BOARD)


def __getattr__(name: str):
    if name in _BOARD:
        return getattr(importlib.import_module(".board", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
