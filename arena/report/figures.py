"""The figures' numbers, shared by the page's SVG and `arena plot`'s images, so both show
exactly what `arena rank` computed.

heatmap: the peer-rank pairwise win rates (unweighted and weighted), and each two-role payoff table,
         per role and across roles;
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


def _pairwise(board: dict, title: str) -> dict[str, Any]:
    names = board["contestants"]
    return {"title": title, "rows": names, "cols": names, "values": board["pairwise"], "low": 0.0, "high": 1.0,
            "center": 0.5, "digits": 2}


def _scale(title: str, agents: list[str], values: list[list[float | None]]) -> dict[str, Any]:
    found = [v for row in values for v in row if v is not None]
    return {"title": title, "rows": agents, "cols": agents, "values": values, "low": min(found, default=0.0),
            "high": max(found, default=1.0), "center": None, "digits": 2}


def role_heatmaps(t: dict) -> list[dict[str, Any]]:
    """A two-role table as DeepEval's Eq. 2 lays it out, one heatmap per role (the row agent in that
    role, the column agent in the other), and one across roles: the row agent's mean payoff against
    the column agent whichever role each held, every match counted once."""
    first, second = t["roles"]
    agents, cells = t["agents"], t["cells"]

    def cell(a: str, b: str):  # a plays the first role, b the second
        return cells.get(a, {}).get(b)

    as_first = [[None if cell(a, b) is None else cell(a, b)["scores"][0] for b in agents] for a in agents]
    as_second = [[None if cell(b, a) is None else cell(b, a)["scores"][1] for b in agents] for a in agents]
    across = []
    for a in agents:
        row = []
        for b in agents:
            parts = [(c["matches"], c["scores"][i]) for c, i in ((cell(a, b), 0), (cell(b, a), 1)) if c is not None]
            n = sum(m for m, _ in parts)
            row.append(sum(m * v for m, v in parts) / n if n else None)
        across.append(row)
    group = t["group"]
    return [
        _scale(f"{group}: payoff of the row playing {first} against the column playing {second}", agents, as_first),
        _scale(f"{group}: payoff of the row playing {second} against the column playing {first}", agents, as_second),
        _scale(f"{group}: payoff of the row against the column, both roles (every match once)", agents, across),
    ]


def heatmaps(rank: dict, weighted: dict | None = None) -> list[dict[str, Any]]:
    """The peer rank's pairwise win rates (and the weighted ones, PRD's weighted heatmap), then
    each two-role game's payoffs by role and across roles."""
    panels = []
    if rank["peer_rank"]:
        panels.append(_pairwise(rank["peer_rank"], "Pairwise win rate: row beats column (ties count half)"))
    if weighted:
        panels.append(_pairwise(weighted, "Weighted pairwise win rate: row beats column, reviewers weighed by "
                                          "their own score (PRD)"))
    for t in rank["role_tables"]:
        panels += role_heatmaps(t)
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
    return {"heatmap": heatmaps(rank, weighted), "trend": trends(rank, selected, scores), "weights": weights(weighted)}
