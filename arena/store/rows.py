"""The rows a run store is read back in: small typed tuples, one match (or one seat) at a time.

A run's readers (results, rank, report, show, export, annotate, resume) take these from the
store's cursors as they go, so none of them holds a run's records: a record, with its
transcript, is built only for the one match someone asks to see or export.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from arena.contract.events import SeatInfo
from arena.contract.records import MatchRecord


class MatchRow(NamedTuple):
    """A match without its transcript: what a listing, the CSV export, the live leaderboard and a
    resume need of it. ``status`` is finished, truncated, failed or interrupted (a match left pending
    or running by a crash reads as interrupted); ``payoffs`` maps seat labels to the first metric."""

    key: str
    group: str
    repeat: int
    game: str
    status: str
    seed: int
    seats: tuple[SeatInfo, ...]
    params: dict[str, Any]
    rounds: int
    error: str | None
    payoffs: dict[str, float]


class ScoreRow(NamedTuple):
    """A finished match's figures under one metric, by seat label; a seat the referee did not score is missing."""

    key: str
    group: str
    repeat: int
    seats: tuple[SeatInfo, ...]
    scores: dict[str, float]

    @classmethod
    def of(cls, match: MatchRecord | MatchRow, metric: str | None = None) -> "ScoreRow":
        """The row the store gives for this match: its payoffs (``metric`` None), or one metric's figures."""
        if metric is None or (metric == "payoff" and not getattr(match, "metrics", None)):  # stores kept no metrics once
            scores = match.payoffs
        else:
            scores = match.metrics.get(metric, {})
        return cls(match.key, match.group, match.repeat, match.seats, scores)


class TurnRow(NamedTuple):
    """One seat's turns in one finished match: how many it took (``turns``; valid or defaulted), and
    its troubled ones: invalid replies, timeouts, defaulted turns."""

    key: str
    group: str
    agent: str
    role: str
    invalid: int
    timeouts: int
    defaulted: int
    turns: int = 0


class MessageRow(NamedTuple):
    """A message as stored; ``seq`` is its place among the match's events."""

    seq: int
    index: int
    round: int
    sender: str
    recipients: tuple[str, ...]
    kind: str
    content: str
    data: dict[str, Any] | None
    shown: str | None


class EventRow(NamedTuple):
    """An event other than a posted message, its body as plain JSON data."""

    seq: int
    type: str
    body: dict[str, Any]


class Transcript(NamedTuple):
    """One match's messages and events, as the store keeps them."""

    match: MatchRow
    messages: list[MessageRow]
    events: list[EventRow]


class StoredTranscript(NamedTuple):
    """One match's messages and events as their rows are stored, for readers of a whole run: each
    message as (match key, round, sender, recipients as JSON, kind, content, data as JSON or None,
    shown), each event as (match key, type, body as JSON), in the order they happened."""

    match: MatchRow
    messages: list[tuple[str, int, str, str, str, str, str | None, str | None]]
    events: list[tuple[str, str, str]]
