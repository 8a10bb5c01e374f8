"""What a match's last notice records: the structured summary a game posts when it ends."""

from __future__ import annotations

from typing import Any

from arena.contract.messages import REFEREE
from arena.contract.records import MatchRecord


def final_data(record: MatchRecord | Any) -> dict[str, Any] | None:
    """The data of the referee's last notice of a finished match, or None. ``record``: a match's
    record, or the row the store reads that notice in (``RunReader.final_notices``), which has it as ``data``."""
    if record.status != "finished":
        return None
    if not isinstance(record, MatchRecord):
        return record.data
    for message in reversed(record.messages):
        if message.kind == "notice" and message.sender == REFEREE and isinstance(message.data, dict):
            return message.data
    return None


def share(hits: int, total: int) -> float | None:
    return hits / total if total else None
