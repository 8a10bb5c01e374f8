"""The anonymity filter: model and vendor names removed from what other seats see."""

from __future__ import annotations

import re
from enum import Enum
from functools import lru_cache
from typing import Any


_DASHES = "\\-\u2010\u2011\u2012\u2013\u2014"  # the hyphen and its typographic kin (a non-breaking hyphen: "GPT‑4o")
# Words that name a model's size or family after its vendor's name ("Claude 3 Opus", "Gemini Pro 1.5",
# "GPT 4 Turbo"): taken only when they follow a term or its version, since alone most are plain words.
_TIERS = "opus|sonnet|haiku|instant|turbo|pro|ultra|flash|nano|mini|lite|large|medium|small|preview|instruct|coder|vision"


@lru_cache(maxsize=64)
def _pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    # A term and the version that follows it, attached ("GPT-4o-mini", "Qwen2.5-72B") or after spaces
    # ("Claude 3.5 Haiku", "Claude Sonnet 4"), but only a whole word: "Meta" must not eat "metaphor",
    # nor "Google" "Googled".
    alternatives = "|".join(re.escape(t) for t in terms)
    attached = rf"(?:[{_DASHES}._]?\d(?:[\w.{_DASHES}]*\w)?|[{_DASHES}_.](?=\w)[\w.{_DASHES}]*\w)?"
    spaced = rf"(?:[ \u00a0]+(?:\d(?:[\w.{_DASHES}]*\w)?|(?:{_TIERS})(?:[{_DASHES}._]?\d(?:[\w.]*\w)?)?))*"
    return re.compile(rf"(?<![\w{_DASHES}])(?:{alternatives}){attached}{spaced}(?![^\W\d_])", re.IGNORECASE)


# The only characters outside ASCII that a case-insensitive pattern matches to an ASCII one
# (İ and ı to i, ſ to s, the Kelvin sign to k); tests/test_anonymity.py finds them again.
_STRAYS = re.compile("[\u0130\u0131\u017f\u212a]")


@lru_cache(maxsize=64)
def _lowered(terms: tuple[str, ...]) -> tuple[str, ...] | None:
    return tuple(t.lower() for t in terms) if all(t.isascii() for t in terms) else None


def _none_in(text: str, terms: tuple[str, ...]) -> bool:
    """Whether the text surely holds none of the terms, found without the pattern: a reply of a
    few thousand characters costs the pattern 50–100 µs, and most hold no name. Exact for ASCII
    terms: the pattern can only match where the lowered text holds a lowered term, unless the
    text has one of the strays, which are matched case-insensitively to ASCII letters."""
    lowered = _lowered(terms)
    if lowered is None or not (text.isascii() or _STRAYS.search(text) is None):
        return False
    folded = text.lower()
    for term in lowered:
        if term in folded:
            return False
    return True


def scrub(text: str, terms: tuple[str, ...], replacement: str) -> tuple[str, list[str]]:
    """The text with every term replaced, and what was found."""
    if not terms or _none_in(text, terms):
        return text, []
    found: list[str] = []

    def replace(match: re.Match[str]) -> str:
        found.append(match.group(0))
        return replacement

    return _pattern(terms).sub(replace, text), found


def scrub_data(value: Any, terms: tuple[str, ...], replacement: str) -> tuple[Any, list[str]]:
    """The same for structured data (a prompt's or a notice's facts): every string inside is scrubbed."""
    if not terms or value is None:
        return value, []
    found: list[str] = []

    def walk(item: Any) -> Any:
        if isinstance(item, Enum):  # a word of the game's vocabulary (a task), not something a seat wrote
            return item
        if isinstance(item, str):
            text, hits = scrub(item, terms, replacement)
            found.extend(hits)
            return text
        if isinstance(item, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return type(item)(walk(v) for v in item)
        return item

    return walk(value), found


class Filter:
    """One match's filter: the names it takes out and what stands in for them. False when it has
    no names, so the match loop skips it at no cost."""

    __slots__ = ("terms", "replacement")

    def __init__(self, terms: tuple[str, ...], replacement: str):
        self.terms, self.replacement = tuple(terms), replacement

    def __bool__(self) -> bool:
        return bool(self.terms)

    def text(self, text: str) -> tuple[str, list[str]]:
        return scrub(text, self.terms, self.replacement)

    def data(self, data: Any) -> tuple[Any, list[str]]:
        return scrub_data(data, self.terms, self.replacement)
