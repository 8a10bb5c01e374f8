"""The debate game's summary: its group verdict scored against the labels, as ChatEval evaluates on FairEval's pairs:
accuracy and Cohen's kappa per scenario entry (one strategy each).

Read from the last notice of every match whose data holds a group ``verdict`` on a ``pair`` with
a ``label`` (chateval_debate writes it): the verdict and the label are in the order the answers
were shown (-1 or a negative score difference: the first shown is better), and ``swapped`` says
the match showed the pair's answers the other way round; ``calibrated`` that the entry debates
every pair in both orders.

Position calibration: a pair debated in both orders is one example. The swapped verdict is
mapped back (its sign turned) and the two are combined as FairEval's BPC combines its two
orders, by their mean: the sign of the mean score difference for scores; for choices (-1, 0, 1)
the sign of their sum, so two opposite verdicts make a tie and a verdict beside a tie stands.
A pair with only one order finished (or none labelled) is left out and counted. Each debater's
own final verdicts are combined the same way, which scores it as a single judge would be.

Only verdicts a debater gave are read: ``finals`` and ``firsts`` hold none for a debater whose
turns were defaulted (``firsts``: the verdict of its first turn, none when that turn gave none),
so it is left out of its own accuracy there rather than counted as a tie.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable

import numpy as np
from pydantic import BaseModel

from arena.contract import Column, FinalNotice, MatchRecord, Summary, Table
from arena.contract.summaries import notices_of, share


class DebaterAccuracy(BaseModel):
    agent: str
    examples: int
    accuracy: float | None
    first_accuracy: float | None  # its verdicts at its first turn, before it had heard the debate out


class VerdictScore(BaseModel):
    group: str
    strategy: str | None
    output: str | None
    calibrated: bool  # both orders of every pair debated
    examples: int
    left_out: int  # pairs with one order missing, or no label
    accuracy: float | None
    cohen_kappa: float | None
    as_shown: int  # every match alone, each order an example: what the accuracy is without calibration
    as_shown_accuracy: float | None
    debaters: list[DebaterAccuracy]


def cohen_kappa(x: np.ndarray, y: np.ndarray) -> float:
    """Cohen's kappa of two raters' labels. The same figure as peer rank's agreement (arena.rank);
    a game computes its own, since a plugin imports nothing of Arena's but the contract."""
    categories = np.union1d(x, y)
    observed = float(np.mean(x == y))
    expected = float(sum(np.mean(x == c) * np.mean(y == c) for c in categories))
    return 1.0 if expected == 1 else (observed - expected) / (1 - expected)


def _sign(x: float) -> int:
    return int(np.sign(round(x, 12)))


def _examples(members: list[tuple[FinalNotice, dict]], calibrated: bool):
    """(label, group verdict, {agent: final}, {agent: first}) per example, unswapped; and how many were left out."""
    keyed: dict[tuple, list[tuple[FinalNotice, dict]]] = defaultdict(list)
    for record, data in members:
        table = tuple(sorted((s.role, s.agent) for s in record.seats))
        keyed[(record.repeat, table, data["pair"] if calibrated else data["case"])].append((record, data))
    examples, left_out = [], 0
    for found in keyed.values():
        orders = {bool(d.get("swapped")) for _, d in found}
        label = next((d["label"] * (-1 if d.get("swapped") else 1) for _, d in found if d.get("label") is not None), None)
        if label is None or any(d.get("verdict") is None for _, d in found) or (calibrated and orders != {False, True}):
            left_out += 1
            continue
        back = lambda d, v: -v if d.get("swapped") else v  # noqa: E731  (to the pair's own order)
        verdict = _sign(sum(back(d, d["verdict"]) for _, d in found))
        own: dict[str, list[float]] = defaultdict(list)
        first: dict[str, list[float]] = defaultdict(list)
        for record, d in found:
            for seat, value in (d.get("finals") or {}).items():
                own[record.agent_of(seat)].append(back(d, value))
            for seat, value in (d.get("firsts") or {}).items():
                first[record.agent_of(seat)].append(back(d, value))
        examples.append((label, verdict, {a: _sign(sum(v)) for a, v in own.items()},
                         {a: _sign(sum(v)) for a, v in first.items()}))
    return examples, left_out


def verdict_scores(records: Iterable[MatchRecord | FinalNotice]) -> list[VerdictScore]:
    """One score per scenario entry whose matches end in a group verdict on a pair, in entry order.
    ``records``: the matches' final notices, or their records."""
    records = notices_of(list(records))
    by_group: dict[str, list[tuple[FinalNotice, dict]]] = {r.group: [] for r in records}
    for record in sorted(records, key=lambda r: r.key):
        data = record.data
        if "verdict" in data and "pair" in data and "label" in data:
            by_group[record.group].append((record, data))
    out = []
    for group, members in by_group.items():
        if not members:
            continue
        calibrated = any(d.get("calibrated") or d.get("swapped") for _, d in members)
        examples, left_out = _examples(members, calibrated)
        alone, _ = _examples(members, False) if calibrated else (examples, 0)
        agents = sorted({a for *_, own, _ in examples for a in own})
        debaters = []
        for agent in agents:
            mine = [(label, own[agent], first.get(agent)) for label, _, own, first in examples if agent in own]
            firsts = [(label, f) for label, _, f in mine if f is not None]
            debaters.append(DebaterAccuracy(agent=agent, examples=len(mine),
                                            accuracy=share(sum(v == label for label, v, _ in mine), len(mine)),
                                            first_accuracy=share(sum(f == label for label, f in firsts), len(firsts))))
        labels = np.array([e[0] for e in examples])
        predicted = np.array([e[1] for e in examples])
        data = members[0][1]
        out.append(VerdictScore(
            group=group, strategy=data.get("strategy"), output=data.get("output"), calibrated=calibrated,
            examples=len(examples), left_out=left_out,
            accuracy=float(np.mean(labels == predicted)) if examples else None,
            cohen_kappa=cohen_kappa(predicted, labels) if examples else None,
            as_shown=len(alone), as_shown_accuracy=share(sum(e[0] == e[1] for e in alone), len(alone)),
            debaters=debaters))
    return out


def _tables(scores: list[VerdictScore]) -> list[Table]:
    group = Table(
        name="verdicts", title="Debate verdicts against the labels, per entry",
        note="ChatEval's evaluation on FairEval's pairs: the group's verdict (majority of choices, mean of score "
             "differences) against the label, as accuracy and Cohen's kappa. Calibrated: each pair was debated in "
             "both orders and the two verdicts combined; the last column scores every match alone.",
        columns=[*(Column(name=n, numeric=False) for n in ("Entry", "Strategy", "Output", "Calibrated")),
                 *(Column(name=n) for n in ("Examples", "Left out", "Accuracy", "Cohen's κ", "Accuracy per order"))],
        rows=[[s.group, s.strategy or "—", s.output or "—", "yes" if s.calibrated else "no", s.examples, s.left_out,
               s.accuracy, s.cohen_kappa,
               f"{'—' if s.as_shown_accuracy is None else f'{s.as_shown_accuracy:.3f}'} ({s.as_shown})"]
              for s in scores])
    debaters = Table(
        name="verdicts_debaters", title="Each debater's own verdict against the labels",
        note="Combined over orders like the group's; first-turn: its verdict before it had heard the debate out.",
        columns=[Column(name="Entry", numeric=False), Column(name="Debater", numeric=False),
                 *(Column(name=n) for n in ("Examples", "Final accuracy", "First-turn accuracy"))],
        rows=[[s.group, d.agent, d.examples, d.accuracy, d.first_accuracy] for s in scores for d in s.debaters])
    return [group, debaters]


def summarize(notices: list[FinalNotice]) -> list[Summary]:
    scores = verdict_scores(notices)
    if not scores:
        return []
    return [Summary(name="debate_verdicts", data=[s.model_dump() for s in scores], tables=_tables(scores))]
