"""What scripts read from `arena`: one JSON document, tables as tab-separated rows, text that is never
cut to the width of a terminal it is not on, and a quiet end when the reader of a pipe goes away."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from typing import Any, TextIO

from rich.console import Console
from rich.errors import MarkupError
from rich.table import Table
from rich.text import Text

# A pipe or a file has no width: a table printed there keeps its widest cell whole. Rich needs a number;
# this one is wider than any line a person would keep, and rich pads nothing to it when not on a terminal.
UNBOUNDED = 100_000


class _Console(Console):
    keep_going = False

    def on_broken_pipe(self) -> None:
        """Rich would exit with status 1 here. A command ends through ``closing_quietly``, like on any
        other closed pipe; a console that must keep going falls silent instead."""
        self.quiet = True
        if not self.keep_going:
            raise BrokenPipeError
        if not self.stderr:  # what stdout still holds would fail again when Python flushes it on exit
            _stdout_to_nowhere()


def console(stderr: bool = False, keep_going: bool = False) -> Console:
    """A console for people: the terminal's width on a terminal, no width limit anywhere else.
    ``keep_going``: if the reader goes away, print nothing more rather than stop the command (a run's
    live view: a log nobody reads is no reason to stop playing, let alone to fail a match)."""
    found = _Console(stderr=stderr, highlight=False, soft_wrap=True)
    found.keep_going = keep_going
    if not found.is_terminal:
        found.width = UNBOUNDED
    return found


def print_json(document: Any) -> None:
    """The one thing a --json command writes to stdout."""
    sys.stdout.write(json.dumps(document, indent=2, default=str) + "\n")


class TsvConsole:
    """Stands in for a rich Console where a command was given --plain: a table becomes tab-separated
    lines, its header row first, one row per line, with tabs and line breaks inside a cell turned into
    spaces so that every line splits into the header's number of fields.

    ``titled``: for commands that print several tables, each table's title and every other line the
    command prints come out as comment lines starting with ``# ``, and a blank line separates tables.
    Otherwise (one table) stdout holds the table alone and other lines go to stderr."""

    is_terminal = False

    def __init__(self, titled: bool, file: TextIO | None = None):
        self.titled = titled
        self.file = file
        self._tables = 0

    def print(self, *objects: Any, **_: Any) -> None:
        out = self.file or sys.stdout
        for item in objects:
            if isinstance(item, Table):
                if self.titled and self._tables:
                    out.write("\n")
                if self.titled and item.title:
                    out.write(f"# {_flat(item.title)}\n")
                out.write(tsv_lines(item))
                self._tables += 1
            elif self.titled:
                out.writelines(f"# {line}\n" for line in _plain(item).splitlines() or [""])
            else:
                print(_plain(item), file=sys.stderr)


def tsv_lines(table: Table) -> str:
    columns = table.columns
    rows = [[_flat(c.header) for c in columns]]
    cells = [list(c.cells) for c in columns]
    rows += [[_flat(column[i]) for column in cells] for i in range(table.row_count)]
    return "".join("\t".join(row) + "\n" for row in rows)


def _plain(item: Any) -> str:
    if isinstance(item, Text):
        return item.plain
    if isinstance(item, str):  # rich reads markup in strings: so does this, to print what a table would show
        try:
            return Text.from_markup(item).plain
        except MarkupError:
            return item
    return str(item)


def _flat(item: Any) -> str:
    return " ".join(_plain(item).replace("\t", " ").splitlines())


def table_console(plain: bool, titled: bool) -> Console | TsvConsole:
    """Where a command prints its tables: tab-separated with --plain, else a console for people."""
    return TsvConsole(titled) if plain else console()


def closing_quietly(command: Callable[[], int]) -> int:
    """``command``'s exit status; if whoever reads stdout stops reading (``arena runs | head -1``),
    the command ends at once, with no traceback and status 0: the reader got what it asked for."""
    try:
        status = command()
        sys.stdout.flush()  # a pipe is block-buffered: the write that fails may be this one
        return status
    except BrokenPipeError:
        pass
    except BaseExceptionGroup as group:  # a print inside a running tournament reaches us through trio
        _, rest = group.split(BrokenPipeError)
        if rest is not None:
            raise
    _stdout_to_nowhere()
    return 0


def _stdout_to_nowhere() -> None:
    """Python flushes stdout again on exit: point it at nothing so that flush cannot fail and complain."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
