"""Parameters that name files.

A scenario is read where it lies, not where arena happens to run: a parameter made with
``path_field`` is resolved against the scenario file's folder before the game (or referee)
sees it, so a scenario validates the same from any working directory. A plugin only marks
the field; the scenario layer does the resolving.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field
from pydantic_core import PydanticUndefined

_MARK = "arena_path"


def path_field(default: Any = PydanticUndefined, *, description: str, words: tuple[str, ...] = ()) -> Any:
    """A parameter holding a file path (or a list of them), relative to the scenario file.
    ``words`` are values that are not paths (``humaneval`` names a built-in set)."""
    return Field(default, description=description, json_schema_extra={_MARK: list(words)})


def path_fields(model: type[BaseModel]) -> dict[str, tuple[str, ...]]:
    """The path parameters of a params model, each with the words it takes that are not paths."""
    found = {}
    for name, info in model.model_fields.items():
        extra = info.json_schema_extra
        if isinstance(extra, dict) and _MARK in extra:
            found[name] = tuple(extra[_MARK] or ())
    return found
