"""The report as one self-contained HTML file: the template, its style and script, and the
run's data, all inlined, so it opens from file:// with no network."""

from __future__ import annotations

import re
import time
from html import escape
from importlib import resources
from pathlib import Path

from arena.contract.files import replacing

from . import sections
from .panels import panels
from .data import ReportData
from .packing import script_json
from .style import style_control
from .summaries import summaries

NAV = [("leaderboard", "Leaderboard"), ("style", "Style control"), ("pairwise", "Pairwise"), ("trend", "Rating over battles"),
       ("reviewers", "Reviewers"), ("summaries", "Game summaries"), ("panels", "Panels of judges"),
       ("roles", "Role tables"), ("cost", "Cost"),
       ("transcripts", "Transcripts")]
# what each section needs, said when it is left out for want of it
NEEDS = {"pairwise": "reviews or a two-role game", "trend": "reviews or finished matches", "reviewers": "reviews",
         "roles": "a two-role game", "cost": "model calls",
         "transcripts": "matches"}


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _meta(summary: dict) -> str:
    made = f"report made {time.strftime('%Y-%m-%d %H:%M')} by Arena {summary['arena_version']}"
    source = summary.get("source") or {"kind": "run"}
    if source["kind"] == "reviews":
        files = "; ".join(f"{f['path']} ({f['reviews']})" for f in source["files"])
        return f"{source['reviews']} reviews from {files}; {made}"
    run = summary["rank"]["run"]
    counts = ", ".join(f"{run.get(k, 0)} {k}" for k in ("finished", "truncated", "failed", "interrupted") if run.get(k))
    rescore = f"a rescore of {run['rescored_from']}; " if run.get("rescored_from") else ""
    return f"{rescore}status {run.get('status')}; {counts or 'no matches'} of {run.get('planned') or 0} planned; {made}"


def render(report: ReportData) -> str:
    summary = report.summary
    built = {
        "leaderboard": sections.leaderboard(summary), "style": style_control(summary),
        "pairwise": sections.pairwise(summary),
        "trend": sections.trend(summary), "reviewers": sections.reviewers(summary),
        "summaries": summaries(summary), "panels": panels(summary), "roles": sections.role_tables(summary),
        "cost": sections.usage(summary),
        "transcripts": sections.transcripts(report.matches),
    }
    present = [(anchor, label) for anchor, label in NAV if built[anchor]]
    # a run's sections left out say what they wait for; reviews files never have matches, roles or calls
    reviews_only = (summary.get("source") or {}).get("kind") == "reviews"
    folded = [] if reviews_only else [f"{label.lower()} (needs {NEEDS[anchor]})" for anchor, label in NAV
                                      if not built[anchor] and anchor in NEEDS]  # summaries: only for games that declare them
    meta = _meta(summary) + (f". Left out, for want of data: {', '.join(folded)}" if folded else "")
    parts = {
        "TITLE": escape(summary["title"]),
        "META": escape(meta),
        "NAV": "".join(f'<a href="#{anchor}">{escape(label)}</a>' for anchor, label in present),
        "CSS": _asset("report.css"),
        "JS": _asset("report.js"),
        "SECTIONS": "\n".join(built[anchor] for anchor, _ in present),
        "SUMMARY": script_json(summary),
        "TRANSCRIPTS": report.transcripts_json,
    }
    # one pass, so nothing inserted is ever read as a placeholder
    return re.sub(r"@@([A-Z]+)@@", lambda m: parts[m.group(1)], _asset("template.html"))


def write(report: ReportData, path: Path) -> int:
    """Write the page whole or not at all (a report that fails part way keeps the one that was there)."""
    data = render(report).encode("utf-8")
    with replacing(path) as partial:
        partial.write_bytes(data)
    return len(data)
