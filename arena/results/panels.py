"""Panels of judges, from their records (``arena.contract.panels``): each member's verdicts beside
the panel's, and how far the members agree (Fleiss' kappa).

Any message of a finished match whose data holds a ``panel`` record counts, whoever posted it: a
panel referee's verdict or a game's notice on its judge seats. One summary per scenario entry and
panel (its name: the referee's metric, or the game's). Members are reported by agent: a game's
judge seats are mapped to the agents that sat there, and so are the options that are seats."""

from __future__ import annotations

from collections.abc import Iterator

from pydantic import BaseModel, ValidationError

from arena.contract.panels import PANEL, TIE, PanelRecord
from arena.rank.agreement import panel_agreement
from arena.contract.runs import RunReader


class PanelMember(BaseModel):
    agent: str
    items: int  # items it sat on
    verdicts: int  # of them, those it gave a valid verdict on
    with_panel: float | None  # share of its verdicts that were the panel's, over items the panel decided


class PanelVerdict(BaseModel):
    match: str
    item: str
    options: list[str]
    verdict: str | None  # the panel's
    members: dict[str, str | None]  # by agent; None: no valid verdict


class PanelSummary(BaseModel):
    group: str
    name: str
    rule: str
    weights: dict[str, float] | None
    items: int
    decided: int  # items the panel reached a verdict on
    fleiss_kappa: float | None  # None: no item had two verdicts
    members: list[PanelMember]
    verdicts: list[PanelVerdict]


def _records(store: RunReader) -> Iterator[tuple[str, PanelRecord]]:
    for kind in ("verdict", "notice"):
        for key, message in store.messages(kind, with_data=PANEL):
            try:
                yield key, PanelRecord.model_validate(message.data[PANEL])
            except ValidationError:  # another game's own use of the word: not a panel's record
                continue


def panel_summaries(store: RunReader) -> list[PanelSummary]:
    """Every panel of the run, in the plan's order of the entries it first appears in."""
    found: dict[tuple[str, str], tuple[PanelRecord, list[PanelVerdict], list[list[object]]]] = {}
    matches = {}
    for key, record in _records(store):
        match = matches.get(key) or matches.setdefault(key, store.match(key))
        agent_of = {seat.label: seat.agent for seat in match.seats}
        named = (lambda x: agent_of.get(x, x) if x is not None else None)
        member_name = named if record.members_are == "seats" else (lambda x: x)
        _, verdicts, ratings = found.setdefault((match.group, record.name), (record, [], []))
        for item in record.items:
            verdicts.append(PanelVerdict(match=key, item=item.item, options=[named(o) for o in item.options],
                                         verdict=named(item.verdict),
                                         members={member_name(m): named(v) for m, v in item.members.items()}))
            # by position among the options, so that every item shares the categories
            ratings.append([TIE if v == TIE else item.options.index(v) for v in item.members.values()
                            if v is not None and (v == TIE or v in item.options)])
    return [_summary(group, name, record, verdicts, ratings) for (group, name), (record, verdicts, ratings) in found.items()]


def _summary(group: str, name: str, record: PanelRecord, verdicts: list[PanelVerdict], ratings) -> PanelSummary:
    members: dict[str, list[int]] = {}  # agent -> [items, verdicts, with the panel, decided]
    for v in verdicts:
        for agent, said in v.members.items():
            row = members.setdefault(agent, [0, 0, 0, 0])
            row[0] += 1
            row[1] += said is not None
            if said is not None and v.verdict is not None:
                row[3] += 1
                row[2] += said == v.verdict
    return PanelSummary(
        group=group, name=name, rule=record.rule, weights=record.weights, items=len(verdicts),
        decided=sum(v.verdict is not None for v in verdicts), fleiss_kappa=panel_agreement(ratings),
        members=[PanelMember(agent=a, items=n, verdicts=given, with_panel=(same / decided if decided else None))
                 for a, (n, given, same, decided) in members.items()],
        verdicts=verdicts)
