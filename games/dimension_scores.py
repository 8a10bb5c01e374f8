"""The scoring game's summary: scores on named dimensions against human scores, as ChatEval evaluates on Topical-Chat: per
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

from arena.contract import Column, FinalNotice, MatchRecord, Summary, Table
from arena.contract.summaries import notices_of


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
        from scipy import stats  # a quarter of a second to import: only for runs that score dimensions

        rows.append(Correlation(dimension=dimension, responses=len(shared), spearman=float(stats.spearmanr(x, y).statistic),
                                kendall=float(stats.kendalltau(x, y).statistic)))
    known = [r for r in rows if r.spearman is not None]
    if len(dimensions) > 1:
        rows.append(Correlation(dimension="average", responses=min((r.responses for r in rows), default=0),
                                spearman=float(np.mean([r.spearman for r in known])) if known else None,
                                kendall=float(np.mean([r.kendall for r in known])) if known else None))
    return rows


def dimension_scores(records: Iterable[MatchRecord | FinalNotice]) -> list[DimensionScores]:
    """One entry per scenario entry whose matches score responses on dimensions, in entry order.
    ``records``: the matches' final notices, or their records."""
    records = notices_of(list(records))
    by_group: dict[str, list[tuple[FinalNotice, dict]]] = {r.group: [] for r in records}
    for record in sorted(records, key=lambda r: r.key):
        data = record.data
        if isinstance(data.get("dimensions"), list) and isinstance(data.get("scores"), dict):
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


def _tables(s: DimensionScores) -> list[Table]:
    out = [Table(
        name="dimensions", group=s.group,
        title=f"{s.group}: the debate's mean score per dimension against human scores, over {s.responses} responses",
        note="ChatEval's Topical-Chat setting: the debaters' mean score per dimension, and its Spearman and Kendall "
             "correlation with the human scores.",
        columns=[Column(name="Dimension", numeric=False), Column(name="Responses"), Column(name="Mean score", digits=2),
                 Column(name="Spearman"), Column(name="Kendall")],
        rows=[[c.dimension, c.responses, s.mean.get(c.dimension), c.spearman, c.kendall] for c in s.correlations])]
    if s.debaters:
        pair = lambda c: " / ".join("—" if v is None else f"{v:.3f}" for v in (c.spearman, c.kendall))  # noqa: E731
        out.append(Table(
            name="dimensions_debaters", group=s.group,
            title=f"{s.group}: each debater alone against human scores (Spearman / Kendall)",
            columns=[Column(name="Debater", numeric=False), *(Column(name=c.dimension) for c in s.correlations)],
            rows=[[agent, *(pair(c) for c in found)] for agent, found in s.debaters.items()]))
    return out


def summarize(notices: list[FinalNotice]) -> list[Summary]:
    found = dimension_scores(notices)
    if not found:
        return []
    return [Summary(name="dimension_scores", data=[s.model_dump() for s in found], tables=[t for s in found for t in _tables(s)])]
