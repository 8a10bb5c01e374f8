"""The report's section of the tables games declare of their matches (``summary_tables`` in
``arena rank --json``): each with its title and note, as the terminal shows it."""

from __future__ import annotations

from html import escape

from arena.contract.summaries import Table

from .sections import note, section, table, warning


def _table(found: Table) -> str:
    attrs = f' class="summary" data-table="{escape(found.name)}"'
    if found.group is not None:
        attrs += f' data-group="{escape(found.group)}"'
    return (f"<h3>{escape(found.title)}</h3>" + (note(found.note) if found.note else "")
            + table([c.name for c in found.columns], found.text_rows(), numeric_from=found.text_columns, attrs=attrs))


def summaries(summary: dict) -> str:
    tables = [Table.model_validate(t) for t in summary["rank"].get("summary_tables") or []]
    problems = summary["rank"].get("summary_problems") or []
    if not tables and not problems:  # most runs' games declare no summary: no empty section for them
        return ""
    return section("summaries", "Game summaries", "".join(warning(p) for p in problems) + "".join(_table(t) for t in tables))
