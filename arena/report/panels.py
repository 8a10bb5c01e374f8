"""The report's section on panels of judges: for each panel (a panel referee, or a game's judge
seats recorded as one), its members' verdicts against the panel's, their agreement (Fleiss' kappa),
and every item's verdicts. The numbers are ``arena rank --json``'s ``panels``."""

from __future__ import annotations

from html import escape

from .sections import note, section, table
from .svg import fmt

ITEMS_SHOWN = 200  # a panel's verdicts item by item, at most: the rest are in `arena rank --json`


def _share(value, digits: int = 3) -> str:
    return "—" if value is None else fmt(value, digits)


def _panel(s: dict) -> str:
    weighted = bool(s["weights"])
    rows = [[m["agent"], m["items"], m["verdicts"], _share(m["with_panel"]),
             *((_share(s["weights"].get(m["agent"])),) if weighted else ())] for m in s["members"]]
    head = note(f"Rule {s['rule']}; the panel decided {s['decided']} of {s['items']} items. The members' agreement, "
                f"Fleiss' κ over the items: {_share(s['fleiss_kappa'])} (1: they always agree; 0: no more than chance). "
                "With the panel: the share of a member's verdicts that were the panel's.")
    members = table(["Member", "Items", "Verdicts", "With the panel", *(("Weight",) if weighted else ())], rows,
                    attrs=f' class="panel" data-table="panel-members" data-group="{escape(s["group"])}" '
                          f'data-panel="{escape(s["name"])}"')
    names = [m["agent"] for m in s["members"]]
    shown = s["verdicts"][:ITEMS_SHOWN]
    items = [[v["match"], v["item"], " / ".join(v["options"]), v["verdict"] or "—",
              *((v["members"].get(n) or "—") if n in v["members"] else "" for n in names)] for v in shown]
    more = len(s["verdicts"]) - len(shown)
    each = ("<h4>Each item's verdicts</h4>"
            + (note(f"The first {len(shown)} items; {more} more are in `arena rank --json`.") if more else "")
            + table(["Match", "Item", "Options", "Panel", *names], items, numeric_from=len(names) + 4,
                    attrs=' class="panel" data-table="panel-items"'))
    return f"<h3>{escape(s['group'])}: panel {escape(s['name'])}</h3>" + head + members + each


def panels(summary: dict) -> str:
    found = summary["rank"].get("panels") or []
    if not found:  # most runs have no panel: no empty section for them
        return ""
    return section("panels", "Panels of judges", "".join(_panel(s) for s in found))
