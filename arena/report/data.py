"""What a report shows, gathered from the run store.

Two parts: the summary (the numbers of ``arena rank RUN_DIR --json``, a weighted peer
rank for reviewer weights, and the figures' data) and the transcripts, packed for the
page: every text is stored once in a string table and referred to by index, since
rules and notices repeat from match to match.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from .. import __version__
from arena.contract.records import MatchRecord
from arena.contract.messages import REFEREE
from ..rank import leaderboard
from ..rank.reviews import Reviews
from arena.results.summary import rank_json  # the very numbers `arena rank RUN_DIR --json` prints
from arena.store import RunStore
from .figures import build_figures

KINDS = {"rules": 0, "reply": 1, "notice": 2, "verdict": 3, "prompt": 4}
FAILURES = {"invalid": 0, "timeout": 1, "error": 2}


@dataclass
class ReportData:
    summary: dict[str, Any]
    transcripts: dict[str, Any]


def peer_selection(reviews: Reviews, reference: str | None = "human") -> Reviews:
    """The reviews ``leaderboard`` ranks with by default: all reviewers but the reference, votes collapsed."""
    reference = reference if reference in reviews.reviewers else None
    return reviews.by([r for r in reviews.reviewers if r != reference]).collapse_votes()


def collect(store: RunStore, transcripts: bool = True) -> ReportData:
    records = store.records(status=None)
    rank = rank_json(store, records=[r for r in records if r.status == "finished"])
    rows = store.review_rows()
    reviews = Reviews.from_rows(rows) if rows else None
    weighted = None if reviews is None else leaderboard(reviews, weighted=True).model_dump()
    summary = {
        "title": rank["run"]["name"] or store.run_dir.name,
        "arena_version": __version__,
        "rank": rank,
        "weighted": weighted,
        "figures": build_figures(rank, weighted, None if reviews is None else peer_selection(reviews), records),
    }
    return ReportData(summary=summary, transcripts=pack_transcripts(records) if transcripts else {})


class _Strings:
    def __init__(self):
        self.items: list[str] = []
        self.index: dict[str, int] = {}

    def __call__(self, text: str | None) -> int:
        if text is None:
            return -1
        found = self.index.get(text)
        if found is None:
            found = self.index[text] = len(self.items)
            self.items.append(text)
        return found


def _outcome(record: MatchRecord) -> tuple[str, list[int]]:
    """'tie' (every scored seat level) or 'decided', with the seats holding the top payoff; a match that
    did not finish has its status instead (failed, interrupted, truncated) and no winner."""
    if record.status != "finished":
        return record.status, []
    values = [record.payoffs.get(s.label) for s in record.seats]
    scored = [v for v in values if v is not None]
    if not scored or max(scored) == min(scored):
        return "tie", []
    top = max(scored)
    return "decided", [i for i, v in enumerate(values) if v == top]


def pack_transcripts(records: list[MatchRecord]) -> dict[str, Any]:
    text = _Strings()
    audiences: dict[tuple[str, ...], int] = {}
    groups: dict[str, tuple[int, str]] = {}  # entry -> (index, game)
    agents: dict[str, int] = {}
    matches = []
    for record in records:
        group, _ = groups.setdefault(record.group, (len(groups), record.game))
        seats = [[text(s.label), text(s.role), agents.setdefault(s.agent, len(agents))] for s in record.seats]
        outcome, winners = _outcome(record)
        messages = []
        for m in record.messages:
            audience = audiences.setdefault(tuple(m.recipients), len(audiences))
            # the structured data behind a verdict kept for the record is worth showing; elsewhere it repeats the text
            verdict = m.kind == "verdict" or (m.sender == REFEREE and not m.recipients)
            data = text(json.dumps(m.data, ensure_ascii=False)) if verdict and m.data else -1
            # shown: what the other seats got once the anonymity filter took names out (-1: the same words)
            messages.append([m.round, text(m.sender), KINDS.get(m.kind, 2), text(m.content), audience, data, text(m.shown)])
        failures, actions, scrubbed, invalid = [], [], [], 0
        for e in record.events:
            if e.type == "turn_failed":
                invalid += e.failure == "invalid"
                failures.append([e.round, text(e.seat), e.attempt, FAILURES[e.failure], text(e.reply), text(e.reason)])
            elif e.type == "action":
                shown = e.action if isinstance(e.action, str) else json.dumps(e.action, ensure_ascii=False)
                actions.append([e.round, text(e.seat), text(shown), int(e.defaulted), e.attempts])
            elif e.type == "scrubbed":
                scrubbed.append([e.round, text(e.seat), text(", ".join(e.found))])
        matches.append({
            "k": record.key, "g": group, "rep": record.repeat, "st": record.status,
            "r": record.rounds, "seed": str(record.seed), "seats": seats,
            "p": [record.payoffs.get(s.label) for s in record.seats], "o": outcome, "w": winners,
            "n": invalid, "m": messages, "f": failures, "a": actions, "x": scrubbed, "e": text(record.error),
        })
    return {
        "strings": text.items,
        "audiences": [[text(seat) for seat in a] for a in audiences],
        "groups": [{"name": g, "game": game} for g, (_, game) in groups.items()],
        "agents": list(agents),
        "matches": matches,
    }
