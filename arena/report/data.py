"""What a report shows, gathered from the run store.

Two parts: the summary (the numbers of ``arena rank RUN_DIR --json``, a weighted peer
rank for reviewer weights, and the figures' data) and the transcripts, packed for the
page: every text is stored once in a string table and referred to by index, since
rules and notices repeat from match to match. Both are read from the store's rows as
they come, one match's transcript at a time.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .. import __version__
from arena.contract.messages import REFEREE
from ..rank import leaderboard
from ..rank.reviews import Reviews
from arena.results.summary import rank_json  # the very numbers `arena rank RUN_DIR --json` prints
from arena.store import RunStore
from arena.store.rows import MatchRow, Transcript
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
    rank = rank_json(store)
    rows = store.review_rows()
    reviews = Reviews.from_rows(rows) if rows else None
    weighted = None if reviews is None else leaderboard(reviews, weighted=True).model_dump()
    summary = {
        "title": rank["run"]["name"] or store.run_dir.name,
        "arena_version": __version__,
        "rank": rank,
        "weighted": weighted,
        "figures": build_figures(rank, weighted, None if reviews is None else peer_selection(reviews),
                                 store.scores()),
    }
    return ReportData(summary=summary, transcripts=pack_transcripts(store.transcripts()) if transcripts else {})


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


def _outcome(match: MatchRow) -> tuple[str, list[int]]:
    """'failed', 'tie' (every scored seat level) or 'decided', with the seats holding the top payoff."""
    if match.status != "finished":
        return "failed", []
    values = [match.payoffs.get(s.label) for s in match.seats]
    scored = [v for v in values if v is not None]
    if not scored or max(scored) == min(scored):
        return "tie", []
    top = max(scored)
    return "decided", [i for i, v in enumerate(values) if v == top]


def pack_transcripts(transcripts: Iterable[Transcript]) -> dict[str, Any]:
    text = _Strings()
    audiences: dict[tuple[str, ...], int] = {}
    groups: dict[str, tuple[int, str]] = {}  # entry -> (index, game)
    agents: dict[str, int] = {}
    matches = []
    for match, posted, happened in transcripts:
        group, _ = groups.setdefault(match.group, (len(groups), match.game))
        seats = [[text(s.label), text(s.role), agents.setdefault(s.agent, len(agents))] for s in match.seats]
        outcome, winners = _outcome(match)
        messages = []
        for m in posted:
            audience = audiences.setdefault(tuple(m.recipients), len(audiences))
            # the structured data behind a verdict kept for the record is worth showing; elsewhere it repeats the text
            verdict = m.kind == "verdict" or (m.sender == REFEREE and not m.recipients)
            data = text(json.dumps(m.data, ensure_ascii=False)) if verdict and m.data else -1
            # shown: what the other seats got once the anonymity filter took names out (-1: the same words)
            messages.append([m.round, text(m.sender), KINDS.get(m.kind, 2), text(m.content), audience, data, text(m.shown)])
        failures, actions, scrubbed, invalid = [], [], [], 0
        for _, kind, e in happened:
            if kind == "turn_failed":
                invalid += e["failure"] == "invalid"
                failures.append([e["round"], text(e["seat"]), e["attempt"], FAILURES[e["failure"]], text(e["reply"]),
                                 text(e["reason"])])
            elif kind == "action":
                action = e["action"]
                shown = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
                actions.append([e["round"], text(e["seat"]), text(shown), int(e["defaulted"]), e["attempts"]])
            elif kind == "scrubbed":
                scrubbed.append([e["round"], text(e["seat"]), text(", ".join(e["found"]))])
        matches.append({
            "k": match.key, "g": group, "rep": match.repeat, "st": match.status,
            "r": match.rounds, "seed": str(match.seed), "seats": seats,
            "p": [match.payoffs.get(s.label) for s in match.seats], "o": outcome, "w": winners,
            "n": invalid, "m": messages, "f": failures, "a": actions, "x": scrubbed, "e": text(match.error),
        })
    return {
        "strings": text.items,
        "audiences": [[text(seat) for seat in a] for a in audiences],
        "groups": [{"name": g, "game": game} for g, (_, game) in groups.items()],
        "agents": list(agents),
        "matches": matches,
    }
