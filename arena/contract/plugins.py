"""Finding games, agent backends, strategies and referees through entry points.

Built-ins are registered in our own ``pyproject.toml`` exactly as a third-party
package registers its plugins, so both are found the same way.
"""

from __future__ import annotations

import difflib
from functools import cache
from importlib.metadata import EntryPoint, entry_points
from typing import Any

from arena.contract.errors import ArenaError

GROUPS = {
    "game": "arena.games",
    "agent backend": "arena.agents",
    "strategy": "arena.strategies",
    "referee": "arena.referees",
}


class UnknownPlugin(ArenaError, LookupError):
    def __init__(self, kind: str, name: str, known: list[str]):
        close = difflib.get_close_matches(name, known, n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(repr(c) for c in close)}?" if close else ""
        listing = ", ".join(sorted(known)) or "none installed"
        super().__init__(f"unknown {kind} {name!r}{hint} (known: {listing})")
        self.kind, self.name, self.suggestions = kind, name, close


_registered: dict[str, dict[str, Any]] = {group: {} for group in GROUPS.values()}
_loaded: dict[tuple[str, str], Any] = {}


@cache
def _entry_points(group: str) -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=group):
        found.setdefault(ep.name, ep)
    return found


def register(kind: str, name: str, obj: Any) -> None:
    """Add a plugin for this process only (a notebook, a test). Packages use entry points."""
    _registered[GROUPS[kind]][name] = obj


def unregister(kind: str, name: str) -> None:
    _registered[GROUPS[kind]].pop(name, None)


def names(kind: str) -> list[str]:
    group = GROUPS[kind]
    return sorted(set(_entry_points(group)) | set(_registered[group]))


def load(kind: str, name: str) -> Any:
    group = GROUPS[kind]
    if name in _registered[group]:
        return _registered[group][name]
    if (group, name) not in _loaded:
        eps = _entry_points(group)
        if name not in eps:
            raise UnknownPlugin(kind, name, names(kind))
        _loaded[(group, name)] = eps[name].load()
    return _loaded[(group, name)]


def refresh() -> None:
    """Forget what was discovered (after installing a plugin in the same process)."""
    _entry_points.cache_clear()
    _loaded.clear()
