"""Arena's errors: one base class, and the problems a user can cause, worded so they can fix them."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError


def format_loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "(top level)"


class ArenaError(Exception):
    """Base of every error Arena raises on purpose; its message is meant for the person running it."""


class MatchSetupError(ArenaError, ValueError):
    """The spec cannot be played: wrong number of agents for the game, say."""


class BackendUnavailable(ArenaError):
    """A model's server cannot be reached or keeps failing (connections refused or dropped, server
    errors, rate limits, requests that hang) after the agent's own retries, or while the turn's time
    ran out. It says nothing about the model: the match is interrupted, not scored, and replayed once
    the server is back. ``error`` is the last failure, already cleared of keys."""

    def __init__(self, agent: str, backend: str, endpoint: str, error: str):
        self.agent = agent
        self.backend = backend
        self.endpoint = endpoint
        self.error = error
        super().__init__(f"backend {backend} at {endpoint} (agent {agent!r}) is unavailable: {error}")


class Problem:
    def __init__(self, loc: Sequence[Any], message: str, given: Any = None, has_given: bool = False):
        self.loc = tuple(loc)
        self.message = message
        self.given = given
        self.has_given = has_given

    def __str__(self) -> str:
        text = f"{format_loc(self.loc)}: {self.message}"
        if self.has_given:
            text += f" (given: {self.given!r})"
        return text


class ConfigError(ArenaError):
    """One or more problems in a configuration, each with the path of the field."""

    def __init__(self, problems: Iterable[Problem], source: str | None = None):
        self.problems = list(problems)
        self.source = source
        super().__init__(self.render())

    def render(self) -> str:
        head = f"{self.source}: " if self.source else ""
        lines = [f"{head}{len(self.problems)} problem(s):"] if len(self.problems) > 1 else []
        prefix = "  " if lines else head
        lines += [f"{prefix}{p}" for p in self.problems]
        return "\n".join(lines)

    @classmethod
    def from_validation(
        cls,
        error: ValidationError,
        prefix: Sequence[Any] = (),
        source: str | None = None,
        hint: Callable[[tuple[Any, ...]], str | None] | None = None,
    ) -> "ConfigError":
        """``hint(loc)``: advice for an unknown key at ``loc`` (relative to the validated model)."""
        problems = []
        for item in error.errors(include_url=False):
            loc = tuple(prefix) + tuple(item["loc"])
            message = _expected(item)
            if item["type"] == "extra_forbidden" and hint is not None:
                advice = hint(tuple(item["loc"]))
                if advice:
                    message += f" ({advice})"
            given = item.get("input")
            has_given = item["type"] not in ("missing",) and not isinstance(given, dict)
            problems.append(Problem(loc, message, given, has_given))
        return cls(problems, source)

    def prefixed(self, prefix: Sequence[Any], source: str | None = None) -> "ConfigError":
        return ConfigError(
            [Problem(tuple(prefix) + p.loc, p.message, p.given, p.has_given) for p in self.problems],
            source or self.source,
        )


def spelling_hint(fields: Iterable[str]) -> Callable[[tuple[Any, ...]], str | None]:
    """A hint that suggests the closest of ``fields`` for a misspelt key."""
    known = list(fields)

    def hint(loc: tuple[Any, ...]) -> str | None:
        close = difflib.get_close_matches(str(loc[-1]), known, n=1, cutoff=0.6) if loc else []
        return f"did you mean {close[0]!r}?" if close else None

    return hint


def _expected(item: dict[str, Any]) -> str:
    kind = item["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field; remove it or fix its spelling"
    message = item["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    for lead in ("Input should be ", "Input should "):
        if message.startswith(lead):
            return "expected " + message[len(lead):]
    return message
