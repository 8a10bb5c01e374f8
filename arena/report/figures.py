"""The figures' numbers, shared by the page's SVG and `arena plot`'s images, so both show
exactly what `arena rank` computed.

heatmap: the peer-rank pairwise win rates, and each two-role payoff table;
trend: Elo over battles (PRD figure 4) or running mean payoffs;
weights: reviewer weights of the weighted peer rank (PRD's weighted win rate and Elo).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from arena.store.rows import ScoreRow
from ..rank.reviews import Reviews
from .trajectory import elo_trajectory, running_payoffs

METHOD_NAMES = {"winrate": "win rate", "elo": "Elo", "bt": "Bradley–Terry"}


def heatmaps(rank: dict) -> list[dict[str, Any]]:
    panels = []
    board = rank["peer_rank"]
    if board:
        names = board["contestants"]
        panels.append({"title": "Pairwise win rate: row beats column (ties count half)", "rows": names, "cols": names,
                       "values": board["pairwise"], "low": 0.0, "high": 1.0, "center": 0.5, "digits": 2})
    for t in rank["role_tables"]:
        first, second = t["roles"]
        values = [[None if t["cells"].get(a, {}).get(b) is None else t["cells"][a][b]["scores"][0] for b in t["agents"]]
                  for a in t["agents"]]
        found = [v for row in values for v in row if v is not None]
        panels.append({"title": f"{t['group']}: payoff of the row playing {first} against the column playing {second}",
                       "rows": t["agents"], "cols": t["agents"], "values": values,
                       "low": min(found, default=0.0), "high": max(found, default=1.0), "center": None, "digits": 2})
    return panels


def trends(rank: dict, selected: Reviews | None, scores: Iterable[ScoreRow]) -> list[dict[str, Any]]:
    panels = []
    if selected is not None and len(selected):
        path = elo_trajectory(selected)
        panels.append({"title": "Elo over battles (mean over 1000 review orders; band: ±1 sd)",
                       "x_label": "battles fed to Elo", "y_label": "Elo", "digits": 0,
                       "series": [{"name": name, "x": path["x"], "y": path["mean"][i], "sd": path["std"][i]}
                                  for i, name in enumerate(selected.contestants)]})
    for p in running_payoffs(scores):
        roles = {r["role"] for r in rank["payoffs"] if r["group"] == p["group"]}
        label = p["group"] + (f", as {p['role']}" if len(roles) > 1 else "")
        panels.append({"title": f"{label}: mean payoff so far", "x_label": "matches played", "y_label": "mean payoff", "digits": 2,
                       "series": p["series"]})
    return panels


def weights(weighted: dict | None) -> list[dict[str, Any]]:
    if not weighted:
        return []
    panels = []
    for result in weighted["methods"]:
        if result["method"] == "bt" or not result.get("weights"):
            continue  # Bradley–Terry borrows the win rate's weights
        bars = sorted(result["weights"].items(), key=lambda kv: -kv[1])
        panels.append({"title": f"Reviewer weights, weighted {METHOD_NAMES[result['method']]}",
                       "names": [n for n, _ in bars], "values": [v for _, v in bars]})
    return panels


def build_figures(rank: dict, weighted: dict | None, selected: Reviews | None, scores: Iterable[ScoreRow]) -> dict:
    """``scores``: the finished matches' payoffs, in the plan's order."""
    return {"heatmap": heatmaps(rank), "trend": trends(rank, selected, scores), "weights": weights(weighted)}
