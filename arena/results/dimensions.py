"""Scores on named dimensions against human scores, as ChatEval evaluates on Topical-Chat: per
dimension, the Spearman and Kendall correlation over the responses of the debaters' mean score
with the human score.

Read from the last notice of every match whose data holds ``dimensions``, the debaters'
``scores`` by seat ({dimension: score}), their ``mean`` and the response's ``human`` scores
(chateval_scoring writes it). A response scored in several matches (repeats, other tables of
the entry) counts once, at its mean. Each debater's own scores are correlated the same way: a
single judge's figures beside the group's. A correlation needs three responses with human scores
and figures that are not all equal; otherwise it is None.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from arena.contract.records import MatchRecord
from arena.rank.agreement import ranking_agreement

from .notices import final_data


class Correlation(BaseModel):
    dimension: str
    responses: int
    spearman: float | None
    kendall: float | None


class DimensionScores(BaseModel):
    group: str
    strategy: str | None
    dimensions: list[str]
    responses: int
    mean: dict[str, float]  # the debate's mean score per dimension, over the responses
    correlations: list[Correlation]  # the debate's mean against the human scores; "average" last
    debaters: dict[str, list[Correlation]]  # each debater alone


def _correlations(dimensions: list[str], figures: dict[str, dict[str, list[float]]],
                  human: dict[str, dict[str, float]]) -> list[Correlation]:
    """``figures``: response -> dimension -> values; ``human``: response -> dimension -> score."""
    rows = []
    for dimension in dimensions:
        ours = {r: float(np.mean(f[dimension])) for r, f in figures.items() if f.get(dimension)}
        theirs = {r: h[dimension] for r, h in human.items() if dimension in h}
        shared = sorted(set(ours) & set(theirs))
        x, y = [ours[r] for r in shared], [theirs[r] for r in shared]
        if len(shared) < 3 or len(set(x)) < 2 or len(set(y)) < 2:
            rows.append(Correlation(dimension=dimension, responses=len(shared), spearman=None, kendall=None))
            continue
        found = ranking_agreement({r: ours[r] for r in shared}, {r: theirs[r] for r in shared})
        rows.append(Correlation(dimension=dimension, responses=len(shared), spearman=found.spearman, kendall=found.kendall))
    known = [r for r in rows if r.spearman is not None]
    if len(dimensions) > 1:
        rows.append(Correlation(dimension="average", responses=min((r.responses for r in rows), default=0),
                                spearman=float(np.mean([r.spearman for r in known])) if known else None,
                                kendall=float(np.mean([r.kendall for r in known])) if known else None))
    return rows


def dimension_scores(records: Iterable[MatchRecord]) -> list[DimensionScores]:
    """One entry per scenario entry whose matches score responses on dimensions, in entry order."""
    records = list(records)
    by_group: dict[str, list[tuple[MatchRecord, dict]]] = {r.group: [] for r in records}
    for record in sorted(records, key=lambda r: r.key):
        data = final_data(record)
        if data and isinstance(data.get("dimensions"), list) and isinstance(data.get("scores"), dict):
            by_group[record.group].append((record, data))
    out = []
    for group, members in by_group.items():
        if not members:
            continue
        dimensions = list(members[0][1]["dimensions"])
        group_figures: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
        own: dict[str, dict[str, dict[str, list[float]]]] = defaultdict(lambda: defaultdict(lambda: defaultdict(list)))
        human: dict[str, dict[str, float]] = {}
        for record, data in members:
            case = data["case"]
            human[case] = dict(data.get("human") or {})
            for dimension, value in (data.get("mean") or {}).items():
                group_figures[case][dimension].append(value)
            for seat, scores in data["scores"].items():
                for dimension, value in scores.items():
                    own[record.agent_of(seat)][case][dimension].append(value)
        means = {d: float(np.mean([np.mean(f[d]) for f in group_figures.values() if f.get(d)])) for d in dimensions
                 if any(f.get(d) for f in group_figures.values())}
        out.append(DimensionScores(
            group=group, strategy=members[0][1].get("strategy"), dimensions=dimensions, responses=len(group_figures),
            mean=means, correlations=_correlations(dimensions, group_figures, human),
            debaters={agent: _correlations(dimensions, figures, human) for agent, figures in sorted(own.items())}))
    return out
