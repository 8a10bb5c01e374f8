"""`--set KEY=VALUE`: a scenario field changed from the command line, for a smoke test or a sweep.

KEY is a dotted path into the scenario file: ``seed``, ``agents.alice.model``,
``games[0].params.rounds`` (also ``games.0.params.rounds``, or ``games.LABEL...`` naming an entry by
its label or game). Two shorthands cover what a smoke test changes most:

- ``game.X`` sets X in every game entry (``--set game.params.rounds=3``);
- ``repeats`` sets the repeats of every tournament block: the scenario's and any entry's own.

VALUE is read as YAML: ``3`` is a number, ``true`` a boolean, ``'3'`` a string, ``[a, b]`` a list.
The overridden scenario is checked exactly as the file is (a path it gives is read from the file's
folder, like the file's own); a problem in a field a --set wrote says so.
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

import yaml

from arena.contract.errors import ConfigError, Problem, format_loc

_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@dataclass(frozen=True)
class Override:
    text: str  # as given: KEY=VALUE
    path: tuple[str | int, ...]
    value: Any


def parse_overrides(items: list[str] | tuple[str, ...]) -> list[Override]:
    """Each ``KEY=VALUE`` read; a malformed one is a ConfigError naming it."""
    found, problems = [], []
    for item in items:
        key, sep, value = item.partition("=")
        path = _path(key.strip())
        if not sep or path is None:
            problems.append(Problem((f"--set {item}",), "expected KEY=VALUE, KEY a dotted path such as "
                                                        "agents.alice.model or games[0].params.rounds"))
            continue
        try:
            parsed = yaml.safe_load(value) if value.strip() else ""
        except yaml.YAMLError as exc:
            problems.append(Problem((f"--set {item}",), f"the value is not valid YAML ({' '.join(str(exc).split())})"))
            continue
        found.append(Override(item, path, parsed))
    if problems:
        raise ConfigError(problems)
    return found


def _path(key: str) -> tuple[str | int, ...] | None:
    if not key or key.startswith(".") or key.endswith(".") or ".." in key:
        return None
    parts: list[str | int] = []
    pos = 0
    for match in _PART.finditer(key):
        between = key[pos:match.start()]
        if between not in ("", "."):
            return None
        name, index = match.groups()
        parts.append(int(index) if index is not None else int(name) if name.isdigit() else name)
        pos = match.end()
    return tuple(parts) if pos == len(key) and parts else None


def apply_overrides(raw: Any, overrides: list[Override], source: str) -> tuple[Any, dict[tuple, Override]]:
    """A copy of the scenario mapping ``raw`` with every override written in, in order; and the place
    each one wrote (its path with shorthands expanded), so that problems found there can name it."""
    if not overrides:
        return raw, {}
    if not isinstance(raw, dict):
        return raw, {}  # the file's own problem is reported as it would be without --set
    raw = copy.deepcopy(raw)
    written: dict[tuple, Override] = {}
    problems = []
    for override in overrides:
        try:
            for path in _expand(raw, override):
                for place in _write(raw, path, override.value):
                    written[place] = override
        except _Unreachable as exc:
            problems.append(Problem(exc.loc, f"{exc} (from --set {override.text})"))
    if problems:
        raise ConfigError(problems, source)
    return raw, written


class _Unreachable(Exception):
    def __init__(self, loc: tuple, message: str):
        super().__init__(message)
        self.loc = loc


def _expand(raw: dict, override: Override) -> list[tuple]:
    """The paths one override writes: shorthands become every place they stand for."""
    path = override.path
    if path == ("repeats",) and "repeats" not in raw:
        entries = raw.get("games") if isinstance(raw.get("games"), list) else []
        own = [("games", i, "tournament", "repeats") for i, e in enumerate(entries)
               if isinstance(e, dict) and isinstance(e.get("tournament"), dict)]
        return [("tournament", "repeats"), *own]
    if path[0] == "game" and "game" not in raw:
        entries = raw.get("games")
        if not isinstance(entries, list) or not entries:
            raise _Unreachable(("games",), "the scenario has no game entries to set it in")
        return [("games", i, *path[1:]) for i in range(len(entries))]
    if len(path) > 1 and path[0] == "games" and isinstance(path[1], str):  # an entry named by its label or game
        entries = raw.get("games") if isinstance(raw.get("games"), list) else []
        named = [i for i, e in enumerate(entries) if isinstance(e, dict) and (e.get("label") or e.get("game")) == path[1]]
        if len(named) != 1:
            names = [str(e.get("label") or e.get("game")) for e in entries if isinstance(e, dict)]
            how = "no game entry" if not named else "more than one game entry"
            raise _Unreachable(("games",), f"{how} is named {path[1]!r} (entries: {', '.join(names) or 'none'}); "
                                           "name one by its label, or by its place: games[0]")
        return [("games", named[0], *path[2:])]
    return [path]


def _write(raw: Any, path: tuple, value: Any) -> list[tuple]:
    """Sets ``value`` at ``path``; returns the path and the blocks the file did not have and this made."""
    made = []
    here = raw
    for depth, part in enumerate(path):
        last = depth == len(path) - 1
        where = path[: depth + 1]
        if isinstance(here, list):
            if not isinstance(part, int):
                raise _Unreachable(path[:depth], f"{format_loc(path[:depth])} is a list: give a place, such as "
                                                 f"{format_loc(path[:depth])}[0]")
            if not -len(here) <= part < len(here):
                raise _Unreachable(where, f"{format_loc(path[:depth])} has {len(here)} "
                                          f"{'entry' if len(here) == 1 else 'entries'}; there is no [{part}]")
        elif isinstance(here, dict):
            if isinstance(part, int):
                part = str(part)  # a mapping keyed by a number-like name
            if not last and part not in here:
                here[part] = {}  # a block the file left out takes its fields from the --set
                made.append(where)
        else:
            raise _Unreachable(path[:depth], f"{format_loc(path[:depth])} is {here!r}, not a block of fields; "
                               f"--set {format_loc(path[:depth])}=VALUE replaces it whole")
        if last:
            here[part] = copy.deepcopy(value)
        else:
            here = here[part]
    return [path, *made]


def mark_problems(error: ConfigError, written: dict[tuple, Override]) -> ConfigError:
    """``error`` with each problem in (or above, or inside) a field a --set wrote saying which one."""
    if not written:
        return error
    problems = []
    for p in error.problems:
        names = [o.text for path, o in written.items() if _related(p.loc, path)]
        message = p.message + (f" (from --set {', --set '.join(dict.fromkeys(names))})" if names else "")
        problems.append(Problem(p.loc, message, p.given, p.has_given))
    return ConfigError(problems, error.source)


def _related(loc: tuple, path: tuple) -> bool:
    n = min(len(loc), len(path))
    return n > 0 and tuple(map(str, loc[:n])) == tuple(map(str, path[:n]))
