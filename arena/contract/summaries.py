"""How a game sums up a run of its matches in tables of its own.

A game that wants more than payoffs and metrics (a discussion's opinion changes, a debate's
verdicts against labels) posts what a match came to in the data of the referee's last notice,
and offers ``Summarized``: it names the top-level fields of that data it reads
(``summary_fields``), and turns the finished matches' last notices (``FinalNotice``) into
``Summary`` values. Arena reads those notices from the store, asks the game, and shows its
tables in `arena rank`, `arena rank --json` (``summaries`` and ``summary_tables``) and the
report, knowing nothing of what they mean.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from arena.contract.events import SeatInfo
from arena.contract.messages import REFEREE
from arena.contract.records import MatchRecord

Cell = str | int | float | None


class FinalNotice(NamedTuple):
    """A finished match's last referee notice with object data: what a summary reads of a match."""

    key: str
    group: str
    repeat: int
    seats: tuple[SeatInfo, ...]
    data: dict[str, Any]
    game: str = ""

    def agent_of(self, seat: str) -> str:
        return next(s.agent for s in self.seats if s.label == seat)

    @classmethod
    def of(cls, record: MatchRecord) -> FinalNotice | None:
        """The last notice of a match's record (as a test or an export holds it); None when the
        match did not finish or its referee posted no object data."""
        if record.status != "finished":
            return None
        for message in reversed(record.messages):
            if message.kind == "notice" and message.sender == REFEREE and isinstance(message.data, dict):
                return cls(record.key, record.group, record.repeat, tuple(record.seats), message.data, record.game)
        return None


def notices_of(items: list[MatchRecord | FinalNotice]) -> list[FinalNotice]:
    """Final notices from records or notices, records without one left out: so that a summary can be
    computed from a test's records as from the store's rows."""
    out = []
    for item in items:
        found = FinalNotice.of(item) if isinstance(item, MatchRecord) else item
        if found is not None:
            out.append(found)
    return out


def share(hits: int, total: int) -> float | None:
    """hits / total, or None when there is nothing to divide by (shown as a dash)."""
    return hits / total if total else None


class Column(BaseModel):
    """One column of a summary table: its header; whether it holds figures (right-aligned, after the
    text columns) and, for fractional figures, how many decimals they are shown with."""

    name: str
    numeric: bool = True
    digits: int = 3


class Table(BaseModel):
    """One table of a summary, shown alike in the terminal and the report. ``name`` identifies the
    kind of table (the report's ``data-table``); ``note`` is the sentence read before it. A cell is
    a figure (shown with its column's decimals), text, or None (a dash). Text columns come first."""

    name: str
    title: str
    note: str = ""
    group: str | None = None  # the scenario entry it sums up, when it is about one
    columns: list[Column]
    rows: list[list[Cell]] = Field(default_factory=list)

    def cell(self, index: int, value: Cell) -> str:
        """A cell as text: the one formatting the CLI and the report share."""
        if value is None:
            return "—"
        if isinstance(value, float):
            return f"{value:.{self.columns[index].digits}f}"
        return str(value)

    def text_rows(self) -> list[list[str]]:
        return [[self.cell(i, v) for i, v in enumerate(row)] for row in self.rows]

    @property
    def text_columns(self) -> int:
        """How many columns lead with text before the figures."""
        return next((i for i, c in enumerate(self.columns) if c.numeric), len(self.columns))


class Summary(BaseModel):
    """A game's summary of some matches: its figures as data (``arena rank --json``'s
    ``summaries[name]``, one item each) and the tables people read."""

    name: str  # the key under which its data is listed: "discussion", "debate_verdicts"
    data: list[dict[str, Any]] = Field(default_factory=list)
    tables: list[Table] = Field(default_factory=list)


@runtime_checkable
class Summarized(Protocol):
    """sums up its finished matches in tables of its own (summaries)

    The class also sets ``summary_fields`` (a tuple of names): the top-level fields of the last
    notice's data that mark a match its summaries read. The store reads only the notices that
    hold one, so the matches of other games cost nothing. (A protocol that listed the attribute
    could not be checked with ``issubclass``, as capabilities are.)
    """

    @classmethod
    def summaries(cls, notices: list[FinalNotice]) -> list[Summary]:
        """The summaries of these matches' last notices (those of this game, in the plan's order,
        each holding one of ``summary_fields``); an empty list when they sum up to nothing."""
        ...
