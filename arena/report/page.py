"""The report as one self-contained HTML file: the template, its style and script, and the
run's data, all inlined, so it opens from file:// with no network."""

from __future__ import annotations

import json
import math
import re
import time
from html import escape
from importlib import resources
from pathlib import Path

from arena.contract.files import replacing

from . import sections
from .data import ReportData

NAV = [("leaderboard", "Leaderboard"), ("pairwise", "Pairwise"), ("trend", "Rating over battles"),
       ("reviewers", "Reviewers"), ("roles", "Role tables"), ("cost", "Cost"), ("transcripts", "Transcripts")]


def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _finite(value):
    """JSON.parse rejects NaN and Infinity: they become null."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def script_json(value) -> str:
    """JSON safe inside <script>: no '<', '>' or '&' survive, so no reply can close the tag."""
    text = json.dumps(_finite(value), ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render(report: ReportData) -> str:
    summary = report.summary
    run = summary["rank"]["run"]
    counts = ", ".join(f"{run.get(k, 0)} {k}" for k in ("finished", "truncated", "failed", "interrupted") if run.get(k))
    meta = (f"status {run.get('status')}; {counts or 'no matches'} of {run.get('planned') or 0} planned; "
            f"report made {time.strftime('%Y-%m-%d %H:%M')} by Arena {summary['arena_version']}")
    parts = {
        "TITLE": escape(summary["title"]),
        "META": escape(meta),
        "NAV": "".join(f'<a href="#{anchor}">{escape(label)}</a>' for anchor, label in NAV),
        "CSS": _asset("report.css"),
        "JS": _asset("report.js"),
        "SECTIONS": "\n".join([sections.leaderboard(summary), sections.figures(summary), sections.reviewers(summary),
                               sections.role_tables(summary), sections.usage(summary)]),
        "SUMMARY": script_json(summary),
        "TRANSCRIPTS": script_json(report.transcripts),
    }
    # one pass, so nothing inserted is ever read as a placeholder
    return re.sub(r"@@([A-Z]+)@@", lambda m: parts[m.group(1)], _asset("template.html"))


def write(report: ReportData, path: Path) -> int:
    """Write the page whole or not at all (a report that fails part way keeps the one that was there)."""
    data = render(report).encode("utf-8")
    with replacing(path) as partial:
        partial.write_bytes(data)
    return len(data)
