"""The anonymity filter: model and vendor names removed from what other seats see."""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any


@lru_cache(maxsize=64)
def _pattern(terms: tuple[str, ...]) -> re.Pattern[str]:
    # A term and the version that follows it ("GPT" takes "GPT-4o-mini", "Qwen" takes "Qwen2.5-72B" with
    # it), but only a whole word: "Meta" must not eat "metaphor", nor "Google" "Googled".
    alternatives = "|".join(re.escape(t) for t in terms)
    version = r"(?:[-._]?\d(?:[\w.\-]*\w)?|[-_.](?=\w)[\w.\-]*\w)?"
    return re.compile(rf"(?<![\w-])(?:{alternatives}){version}(?![^\W\d_])", re.IGNORECASE)


def scrub(text: str, terms: tuple[str, ...], replacement: str) -> tuple[str, list[str]]:
    """The text with every term replaced, and what was found."""
    if not terms:
        return text, []
    found: list[str] = []

    def replace(match: re.Match[str]) -> str:
        found.append(match.group(0))
        return replacement

    return _pattern(terms).sub(replace, text), found


def scrub_data(value: Any, terms: tuple[str, ...], replacement: str) -> tuple[Any, list[str]]:
    """The same for structured data (a prompt's or a notice's facts): every string inside is scrubbed."""
    found: list[str] = []

    def walk(item: Any) -> Any:
        if isinstance(item, str):
            text, hits = scrub(item, terms, replacement)
            found.extend(hits)
            return text
        if isinstance(item, dict):
            return {walk(k) if isinstance(k, str) else k: walk(v) for k, v in item.items()}
        if isinstance(item, (list, tuple)):
            return type(item)(walk(v) for v in item)
        return item

    if not terms or value is None:
        return value, []
    return walk(value), found
