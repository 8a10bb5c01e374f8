"""What a report shows, gathered from the run store or from reviews files.

Two parts: the summary (the numbers of ``arena rank RUN_DIR --json``, or of ``arena rank
--reviews FILE --json``, a weighted peer rank for reviewer weights, and the figures' data) and
the transcripts, packed for the page by ``arena.report.packing`` in a process of its own while
the summary is computed. Reviews files have no transcripts.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .. import __version__
from ..rank.places import SAME
from ..rank.reviews import HUMAN, ReviewError, Reviews
from arena.contract.runs import RunReader
from .packing import Packing, no_cycle_collection

# The numbers' modules (rank's methods, scipy, the compiled Elo) take most of a second to import:
# they are imported inside the functions, after the packing process has started.


@dataclass
class ReportData:
    summary: dict[str, Any]
    transcripts_json: str = "{}"  # the packed transcripts (``arena.report.packing``), as the page embeds them
    matches: int = 0  # how many matches they hold

    @property
    def transcripts(self) -> dict[str, Any]:
        """The packed transcripts, decoded: for a test or a script that reads them."""
        return json.loads(self.transcripts_json)


def peer_selection(reviews: Reviews, reference: str | None = HUMAN) -> Reviews:
    """The battles ``leaderboard`` ranks with by default: all reviewers but the reference, samples calibrated."""
    reference = reference if reference in reviews.reviewers else None
    return reviews.by([r for r in reviews.reviewers if r != reference]).battles()


def collect(store: RunReader, transcripts: bool = True) -> ReportData:
    """The report of a run. The transcripts are packed by a second process while the numbers are
    computed here: on two cores the two halves take the time of the longer one."""
    with no_cycle_collection():
        if not transcripts:
            return ReportData(summary=_summary(store))
        with Packing(store.run_dir, SAME) as packing:
            summary = _summary(store)
            text, matches = packing.result()
        return ReportData(summary=summary, transcripts_json=text, matches=matches)


def _summary(store: RunReader) -> dict[str, Any]:
    from arena.rank import leaderboard
    from arena.results.summary import rank_json, stood  # the very numbers `arena rank RUN_DIR --json` prints
    from .figures import build_figures

    from arena.results.style import answer_fields, answer_styles

    scores = list(store.scores())
    rank = rank_json(store, scores=scores)
    rows = store.review_rows()
    reviews = Reviews.from_rows(rows) if rows else None
    weighted = None if reviews is None else stood(store, leaderboard(reviews, weighted=True), rows).model_dump()
    style, style_problem = None, None
    if reviews is not None and answer_fields(store):  # style control whenever the run's games keep their answers
        try:
            style = _style_control(peer_selection(reviews), answer_styles(store, rows))
        except ReviewError as exc:  # some answers missing: the report shows the rest, and says why
            style_problem = str(exc)
    return {
        "title": rank["run"]["name"] or store.run_dir.name,
        "arena_version": __version__,
        "source": {"kind": "run", "run_dir": str(store.run_dir)},
        "rank": rank,
        "style_control": style,
        "style_problem": style_problem,
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


def collect_reviews(paths: list[Path], reference: str = HUMAN) -> ReportData:
    """The report of reviews files: the numbers of ``arena rank --reviews FILE --json`` (and of
    ``--weighted``) for the files taken together, as if they were one file. When the reference
    reviewer (human labels) is the only one, it is ranked with: there is nobody else."""
    from arena.rank import leaderboard
    from .figures import build_figures

    reviews, files = read_reviews(paths)
    only_reference = reviews.reviewers == [reference]
    options = {"reviewers": [reference]} if only_reference else {}
    board = leaderboard(reviews, reference=reference, **options).model_dump()
    weighted = leaderboard(reviews, weighted=True, reference=reference, **options).model_dump()
    selected = reviews.by(options["reviewers"]).battles() if only_reference else peer_selection(reviews, reference)
    styles, style_problem = _file_styles(paths)
    style = None
    if styles is not None:
        try:
            style = _style_control(selected, styles)
        except ReviewError as exc:
            style_problem = str(exc)
    rank = {"peer_rank": board, "run": None, "payoffs": [], "role_tables": [], "metrics": {}, "stability": [],
            "usage": []}
    summary = {
        "title": ", ".join(Path(f["path"]).name for f in files),
        "arena_version": __version__,
        "source": {"kind": "reviews", "files": files, "reviews": len(reviews), "ranked_with_reference": only_reference},
        "rank": rank,
        "style_control": style,
        "style_problem": style_problem,
        "weighted": weighted,
        "figures": build_figures(rank, weighted, selected, []),
    }
    return ReportData(summary=summary)


def _style_control(battles: Reviews, styles) -> dict:
    """The style-controlled board of ``arena rank --style-control --json`` (its ``style_control``), with
    the leaderboard's default bootstrap and seed, on the battles the report's peer rank counts."""
    from arena.rank.style import style_control

    return style_control(battles, styles).model_dump()


def _file_styles(paths: list[Path]) -> tuple[Any, str | None]:
    """The files' style columns taken together (``arena.rank.style.AnswerStyles``), when they have them
    (else no style control, quietly), and why they cannot be used when some files have them and some
    do not, or they give different columns."""
    from arena.rank.style import AnswerStyles, read_style_columns

    try:
        found = [read_style_columns(path, required=False) for path in paths]
    except ReviewError as exc:
        return None, str(exc)
    if all(f is None for f in found):
        return None, None
    if any(f is None for f in found) or len({f.features for f in found}) > 1:
        return None, "the files give different style columns: " + "; ".join(
            f"{path}: {', '.join(f.features) if f else 'none'}" for path, f in zip(paths, found))
    styles = AnswerStyles(features=found[0].features, source=", ".join(map(str, paths)))
    for f in found:
        styles.values.update(f.values)
    return styles, None
