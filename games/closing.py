"""Where the judging games read a verdict: the reply's own closing lines, nothing before them.

A model that repeats its instructions ("End every message with a line 'Preference: 1', ...")
has quoted the format, not chosen: a verdict read from anywhere in a reply would take that quote
for a choice. So a verdict counts only as the last non-empty line(s) of the reply, each holding
the verdict alone; markdown emphasis around it (``**Preference:** 1``) is ignored, quotes are
not (a quoted line is a quotation).
"""

from __future__ import annotations

import re

_MARKUP = re.compile(r"[*`]|(?<!\w)_+|_+(?!\w)")  # underscores inside a word (a dimension's name) stay


def plain(line: str) -> str:
    """A line without markdown emphasis, code ticks, heading or quote marks at its start."""
    return _MARKUP.sub("", line).strip().lstrip("#>").strip()


def closing_lines(reply: str, n: int = 1) -> list[str]:
    """The reply's last ``n`` non-empty lines (fewer when it has fewer), as written, stripped."""
    lines = [line.strip() for line in reply.splitlines() if line.strip()]
    return lines[-n:] if n else []


def shown(line: str, limit: int = 80) -> str:
    """A line quoted back to the model in a reason, cut to ``limit`` characters."""
    return repr(line if len(line) <= limit else line[: limit - 1] + "…")
