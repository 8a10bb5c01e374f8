"""The report's style-control section: the style-controlled Bradley–Terry beside the raw one, what each
style feature is worth, and the separability of the controlled board (``arena.rank.style``)."""

from __future__ import annotations

from html import escape

from ..rank.separability import describe
from .sections import note, section, table, warning
from .svg import fmt

FEATURE_LABELS = {"length": "length (words)", "headers": "headers", "lists": "list items", "bold": "bold spans"}


def style_control(summary: dict) -> str:
    control = summary.get("style_control")
    problem = summary.get("style_problem")
    if control is None:
        return section("style", "Style control", warning(f"Left out: {problem}")) if problem else ""
    intervals = control["low"] is not None
    order = sorted(control["scores"], key=lambda c: (control["rank"][c], c))
    rows = [[control["rank"][c], c, fmt(control["scores"][c], 0),
             f"[{fmt(control['low'][c], 0)}, {fmt(control['high'][c], 0)}]" if intervals else "—",
             control["raw_rank"][c], fmt(control["raw_scores"][c], 0)] for c in order]
    board_html = table(["Rank", "Contestant", "Style-controlled", "95% interval", "Raw rank", "Raw score"], rows,
                       numeric_from=2, row_classes=["top" if control["rank"][c] == 1 else "" for c in order],
                       attrs=' class="board" data-board="style"')
    worth = [[FEATURE_LABELS.get(c["feature"], c["feature"]), f"{c['value']:+.1f}",
              f"[{c['low']:+.1f}, {c['high']:+.1f}]" if c["low"] is not None else "—",
              {True: "yes", False: "no", None: "—"}[c["significant"]], fmt(c["spread"], 3)]
             for c in control["coefficients"]]
    what = note("Bradley–Terry fitted with each battle's style differences as covariates (as Arena-Hard-Auto "
                "does): the relative difference (A − B) / (A + B) of the two answers' length in words and, where "
                "measured, their markdown headers, list items and bold spans. The ratings are the contestants' "
                "strengths once style is accounted for (Elo scale); the raw columns are the same model without "
                "the covariates. 95% bootstrap intervals, questions resampled.")
    return section("style", "Style control", what + board_html
                   + ("".join(note(line) for line in describe(control["separability"])) if control["separability"] else "")
                   + f"<h4>{escape('What style is worth: Elo points for one standard deviation of the difference')}</h4>"
                   + table(["Feature", "Elo points", "95% interval", "Significant", "Std of difference"], worth,
                           attrs=' data-board="style-coefficients"')
                   + "".join(note(n) for n in control["notes"]))
