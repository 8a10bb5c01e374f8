"""What a report shows, gathered from the run store or from reviews files.

Two parts: the summary (the numbers of ``arena rank RUN_DIR --json``, or of ``arena rank
--reviews FILE --json``, a weighted peer rank for reviewer weights, and the figures' data) and
the transcripts, packed for the page: every text is stored once in a string table and referred
to by index, since rules and notices repeat from match to match. Both are read from the store's
rows as they come, one match's transcript at a time. Reviews files have no transcripts.
"""

from __future__ import annotations

import gc
import json
from collections import defaultdict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from arena.contract.messages import REFEREE
from arena.contract.records import MatchRecord
from ..rank import leaderboard
from ..rank.places import SAME  # payoffs that agree to this many decimals are equal, as scores are
from ..rank.reviews import Reviews
from arena.results.summary import rank_json  # the very numbers `arena rank RUN_DIR --json` prints
from arena.store import RunStore
from arena.store.rows import MatchRow, Transcript
from .figures import build_figures

KINDS = {"rules": 0, "reply": 1, "notice": 2, "verdict": 3, "prompt": 4}
FAILURES = {"invalid": 0, "timeout": 1, "error": 2}
SHOWN_EVENTS = ("turn_failed", "action", "scrubbed")  # the events a transcript shows beside its messages


@dataclass
class ReportData:
    summary: dict[str, Any]
    transcripts: dict[str, Any]


def peer_selection(reviews: Reviews, reference: str | None = "human") -> Reviews:
    """The battles ``leaderboard`` ranks with by default: all reviewers but the reference, samples calibrated."""
    reference = reference if reference in reviews.reviewers else None
    return reviews.by([r for r in reviews.reviewers if r != reference]).battles()


@contextmanager
def _no_cycle_collection():
    """A report builds a million small lists and no reference cycles: the cyclic garbage collector
    would walk them again and again as they pile up (a third of the time of packing), to free
    nothing. It runs again afterwards, as before."""
    was_on = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_on:
            gc.enable()


def collect(store: RunStore, transcripts: bool = True) -> ReportData:
    """The report of a run. Transcripts are packed in a thread of their own, with a connection of
    their own (SQLite's stay in the thread that opened them), while the numbers are computed: the
    Elo loops and numpy release the interpreter, so on two cores the two halves overlap."""
    with _no_cycle_collection():
        if not transcripts:
            return ReportData(summary=_summary(store), transcripts={})
        store.flush()  # a writer's pending rows are committed first, so the other connection reads them too
        with ThreadPoolExecutor(max_workers=1) as pool:
            packed = pool.submit(_packed, store.run_dir)
            summary = _summary(store)
            return ReportData(summary=summary, transcripts=packed.result())


def _packed(run_dir: Path) -> dict[str, Any]:
    store = RunStore.open(run_dir, readonly=True)
    try:
        return pack_transcripts(store.transcripts(events=SHOWN_EVENTS))
    finally:
        store.close()


def _summary(store: RunStore) -> dict[str, Any]:
    scores = list(store.scores())
    rank = rank_json(store, scores=scores)
    rows = store.review_rows()
    reviews = Reviews.from_rows(rows) if rows else None
    weighted = None if reviews is None else leaderboard(reviews, weighted=True).model_dump()
    return {
        "title": rank["run"]["name"] or store.run_dir.name,
        "arena_version": __version__,
        "source": {"kind": "run", "run_dir": str(store.run_dir)},
        "rank": rank,
        "weighted": weighted,
        "figures": build_figures(rank, weighted, None if reviews is None else peer_selection(reviews), scores),
    }


def read_reviews(paths: list[Path]) -> tuple[Reviews, list[dict[str, Any]]]:
    """Several reviews files as one set of reviews (each checked line by line), and how many each gave."""
    rows, files = [], []
    for path in paths:
        found = list(Reviews.read_jsonl(path).rows())
        rows += found
        files.append({"path": str(path), "reviews": len(found)})
    return Reviews.from_rows(rows), files


def collect_reviews(paths: list[Path], reference: str = "human") -> ReportData:
    """The report of reviews files: the numbers of ``arena rank --reviews FILE --json`` (and of
    ``--weighted``) for the files taken together, as if they were one file. When the reference
    reviewer (human labels) is the only one, it is ranked with: there is nobody else."""
    reviews, files = read_reviews(paths)
    only_reference = reviews.reviewers == [reference]
    options = {"reviewers": [reference]} if only_reference else {}
    board = leaderboard(reviews, reference=reference, **options).model_dump()
    weighted = leaderboard(reviews, weighted=True, reference=reference, **options).model_dump()
    selected = reviews.by(options["reviewers"]).battles() if only_reference else peer_selection(reviews, reference)
    rank = {"peer_rank": board, "run": None, "payoffs": [], "role_tables": [], "metrics": {}, "stability": [],
            "usage": []}
    summary = {
        "title": ", ".join(Path(f["path"]).name for f in files),
        "arena_version": __version__,
        "source": {"kind": "reviews", "files": files, "reviews": len(reviews), "ranked_with_reference": only_reference},
        "rank": rank,
        "weighted": weighted,
        "figures": build_figures(rank, weighted, selected, []),
    }
    return ReportData(summary=summary, transcripts={})


class _Strings:
    """Every text once, numbered in the order first met; None is -1. ``add(text, len(index) - 1)``
    is the dict's own setdefault, kept bound for the loops over every message."""

    def __init__(self):
        self.index: dict[str | None, int] = {None: -1}
        self.add = self.index.setdefault

    def __call__(self, text: str | None) -> int:
        return self.add(text, len(self.index) - 1)

    @property
    def items(self) -> list[str]:
        return list(self.index)[1:]


def _scored(match: MatchRow) -> list[float]:
    return [round(match.payoffs[s.label], SAME) for s in match.seats if s.label in match.payoffs]


def contests(matches: Iterable[MatchRecord | MatchRow]) -> set[str]:
    """The entries whose matches are contests, where one seat's gain is another's loss: every finished
    match shares out the same total, and some match shared it unevenly. Elsewhere (a shared reward, as
    in code review; scores each seat earns on its own, as a translation's chrF; a public good) a higher
    payoff does not beat anyone, and no match is won. ``matches``: records, or the store's rows of them."""
    totals: dict[str, set[float]] = defaultdict(set)
    uneven: set[str] = set()
    for match in matches:
        if match.status != "finished" or not match.payoffs:
            continue
        scored = _scored(match)
        if not scored:
            continue
        totals[match.group].add(round(sum(scored), SAME - 3))
        if max(scored) != min(scored):
            uneven.add(match.group)
    return {group for group, sums in totals.items() if len(sums) == 1 and group in uneven}


def _outcome(match: MatchRecord | MatchRow, contest: bool) -> tuple[str, list[int]]:
    """In a contest 'tie' (every scored seat level) or 'decided', with the seats holding the top payoff;
    elsewhere 'scored', with no winner. A match that did not finish has its status instead (failed,
    interrupted, truncated) and no winner."""
    if match.status != "finished":
        return match.status, []
    if not contest:
        return "scored", []
    values = [None if s.label not in match.payoffs else round(match.payoffs[s.label], SAME) for s in match.seats]
    scored = [v for v in values if v is not None]
    if not scored or max(scored) == min(scored):
        return "tie", []
    top = max(scored)
    return "decided", [i for i, v in enumerate(values) if v == top]


def pack_transcripts(transcripts: Iterable[Transcript]) -> dict[str, Any]:
    """Every match's transcript for the page. Which entries are contests (``contests``) is known
    only once every match has gone by, so outcomes are filled in at the end."""
    text = _Strings()
    index, add = text.index, text.add
    audiences: dict[tuple[str, ...], int] = {}
    groups: dict[str, tuple[int, str]] = {}  # entry -> (index, game)
    agents: dict[str, int] = {}
    matches, rows = [], []
    for match, posted, happened in transcripts:
        group, _ = groups.setdefault(match.group, (len(groups), match.game))
        seats = [[text(s.label), text(s.role), agents.setdefault(s.agent, len(agents))] for s in match.seats]
        rows.append(match)
        messages = []
        for _, _, rnd, sender, recipients, kind, content, value, shown in posted:
            audience = audiences.setdefault(tuple(recipients), len(audiences))
            # the structured data behind a verdict kept for the record is worth showing; elsewhere it repeats the text
            verdict = kind == "verdict" or (sender == REFEREE and not recipients)
            data = text(json.dumps(value, ensure_ascii=False)) if verdict and value else -1
            # shown: what the other seats got once the anonymity filter took names out (-1: the same words)
            messages.append([rnd, add(sender, len(index) - 1), KINDS.get(kind, 2), add(content, len(index) - 1), audience,
                             data, add(shown, len(index) - 1)])
        failures, actions, scrubbed, invalid = [], [], [], 0
        for _, kind, e in happened:
            if kind == "turn_failed":
                invalid += e["failure"] == "invalid"
                failures.append([e["round"], text(e["seat"]), e["attempt"], FAILURES[e["failure"]], text(e["reply"]),
                                 text(e["reason"])])
            elif kind == "action":
                action = e["action"]
                shown = action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)
                actions.append([e["round"], add(e["seat"], len(index) - 1), add(shown, len(index) - 1),
                                int(e["defaulted"]), e["attempts"]])
            elif kind == "scrubbed":
                scrubbed.append([e["round"], text(e["seat"]), text(", ".join(e["found"]))])
        matches.append({
            "k": match.key, "g": group, "rep": match.repeat, "st": match.status,
            "r": match.rounds, "seed": str(match.seed), "seats": seats,
            "p": [match.payoffs.get(s.label) for s in match.seats], "o": None, "w": None,
            "n": invalid, "m": messages, "f": failures, "a": actions, "x": scrubbed, "e": text(match.error),
        })
    contested = contests(rows)
    for match, packed in zip(rows, matches):
        packed["o"], packed["w"] = _outcome(match, match.group in contested)
    return {
        "strings": text.items,
        "audiences": [[text(seat) for seat in a] for a in audiences],
        "groups": [{"name": g, "game": game, "contest": g in contested} for g, (_, game) in groups.items()],
        "agents": list(agents),
        "matches": matches,
    }
