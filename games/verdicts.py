"""Structured verdicts: the JSON a judging turn's reply may take, and the text it stands for.

A judging game asks for prose that ends in a verdict line. Small models rarely write that line,
but a backend that holds the model to a JSON schema (a grammar in-process, a server's JSON mode)
can make them. So each judging turn offers a schema whose first field is the explanation and
whose last fields are the verdict (evidence first stays evidence first: the model has written
its reasons before it picks), and the game turns such a reply back into the text it asked for:
the explanation, then the verdict line. That text is what the game parses, what the transcript
shows and what the other seats read; a reply in plain text is parsed as it is, so the text path
remains the fallback and the one parser decides both.

Strings are bounded (``maxLength``, which llama.cpp's grammar keeps) so that a model held to the
schema cannot spend its whole reply on the explanation before it reaches the verdict.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from typing import Any

_FENCE = re.compile(r"^```(?:json)?\s*(.*?)\s*```$", re.DOTALL)

EXPLANATION_CHARS = 200  # a few sentences; at worst (a token a character) the verdict still comes within 256 tokens


def text_field(description: str, max_length: int = EXPLANATION_CHARS) -> dict[str, Any]:
    return {"type": "string", "description": description, "maxLength": max_length}


def choice_field(description: str, options: Sequence[str]) -> dict[str, Any]:
    return {"type": "string", "description": description, "enum": list(options)}


def score_field(description: str, low: int, high: int) -> dict[str, Any]:
    # listed as well as bounded: llama.cpp's schema-to-grammar converter ignores minimum and maximum
    return {"type": "integer", "description": description, "minimum": low, "maximum": high,
            "enum": list(range(low, high + 1))}


def object_schema(title: str, fields: Sequence[tuple[str, dict[str, Any]]]) -> dict[str, Any]:
    """An object with exactly these fields, all required, in this order (a grammar writes them so)."""
    return {"title": title, "type": "object", "properties": dict(fields), "required": [name for name, _ in fields],
            "additionalProperties": False}


def json_object(reply: str) -> dict[str, Any] | None:
    """The reply as a JSON object (bare or in a code fence), or None when it is not one."""
    text = reply.strip()
    if not text.startswith(("{", "`")):
        return None
    fenced = _FENCE.match(text)
    if fenced:
        text = fenced.group(1)
    try:
        # strict=False: raw line breaks inside a string, which llama-cpp-python's grammar lets a model write
        value = json.loads(text, strict=False)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def as_text(reply: str, schema: dict[str, Any] | None, render: Callable[[dict[str, Any]], str]) -> str:
    """The reply as the text the game asked for: a JSON object holding every field of ``schema``
    rendered by ``render``; anything else (plain text, JSON of another shape) unchanged, for the
    text parser to judge."""
    if schema is None:
        return reply
    value = json_object(reply)
    if value is None or any(name not in value for name in schema["required"]):
        return reply
    return render(value)

