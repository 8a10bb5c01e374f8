"""Arena's errors: one base class, and the problems a user can cause, worded so they can fix them."""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import ValidationError


MAX_GIVEN = 80  # characters of a given value quoted back in a message
MAX_MESSAGE = 400  # characters of one problem's message
MAX_PROBLEMS = 25  # problems listed in one error; the rest are counted


def shorten(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` characters, saying how much was left out: a message quotes what a
    user wrote, and what they wrote may be a megabyte."""
    if len(text) <= limit:
        return text
    return f"{text[: limit - 30]}… ({len(text) - limit + 30} more characters)"


def format_loc(loc: Sequence[Any]) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            part = shorten(str(part), MAX_GIVEN)
            out += f".{part}" if out else part
    return out or "(top level)"


def leaves(exc: BaseException) -> list[BaseException]:
    """The exceptions inside ``exc``, however deeply trio's nurseries grouped them."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in leaves(inner)]
    return [exc]


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
        text = f"{format_loc(self.loc)}: {shorten(self.message, MAX_MESSAGE)}"
        if self.has_given:
            text += f" (given: {shorten(repr(self.given), MAX_GIVEN)})"
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
        lines += [f"{prefix}{p}" for p in self.problems[:MAX_PROBLEMS]]
        if len(self.problems) > MAX_PROBLEMS:
            lines.append(f"{prefix}… and {len(self.problems) - MAX_PROBLEMS} more; fix these first")
        return "\n".join(lines)

    @classmethod
    def from_validation(
        cls,
        error: ValidationError,
        prefix: Sequence[Any] = (),
        source: str | None = None,
        hint: Callable[[tuple[Any, ...]], str | None] | None = None,
    ) -> "ConfigError":
        """``hint(loc)``: advice for an unknown key at ``loc`` (relative to the validated model).

        A required field reported missing beside an unknown key spelt like it is one mistake, a
        misspelling: only the unknown key is reported, pointing at the field it should be."""
        items = error.errors(include_url=False)
        misspelt = _misspellings(items)
        problems = []
        for item in items:
            if item["type"] == "missing" and tuple(item["loc"]) in misspelt.values():
                continue
            loc = tuple(prefix) + tuple(item["loc"])
            message = _expected(item)
            if tuple(item["loc"]) in misspelt:
                message += f" (did you mean {str(misspelt[tuple(item['loc'])][-1])!r}? it is required)"
            elif item["type"] == "extra_forbidden" and hint is not None:
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


def _misspellings(items: list[dict[str, Any]]) -> dict[tuple, tuple]:
    """Unknown key's location -> the missing required field's location it most likely misspells,
    among fields of the same mapping."""
    missing = [tuple(i["loc"]) for i in items if i["type"] == "missing" and i["loc"]]
    found = {}
    for item in items:
        loc = tuple(item["loc"])
        if item["type"] != "extra_forbidden" or not loc:
            continue
        siblings = {str(m[-1]): m for m in missing if m[:-1] == loc[:-1] and m not in found.values()}
        close = difflib.get_close_matches(str(loc[-1]), list(siblings), n=1, cutoff=0.6)
        if close:
            found[loc] = siblings[close[0]]
    return found


def _expected(item: dict[str, Any]) -> str:
    kind = item["type"]
    if kind == "missing":
        return "required field is missing"
    if kind == "extra_forbidden":
        return "unknown field; remove it or fix its spelling"
    if kind in ("model_type", "model_attributes_type"):  # pydantic's message names the class: not the user's words
        return "expected a block of `field: value` lines"
    if kind == "dict_type":
        return "expected a mapping of `key: value` lines"
    if kind == "too_short":
        return f"expected at least {item['ctx']['min_length']} entry; it is empty" if not item["ctx"]["actual_length"] \
            else f"expected at least {item['ctx']['min_length']} entries, not {item['ctx']['actual_length']}"
    message = item["msg"]
    if message.startswith("Value error, "):
        message = message[len("Value error, ") :]
    for lead in ("Input should be ", "Input should "):
        if message.startswith(lead):
            return "expected " + message[len(lead):]
    return message
