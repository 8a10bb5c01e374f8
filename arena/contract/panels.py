"""A panel's record: what each member said and what the panel decided, item by item.

A referee made of several judges, or a game with several judge seats, posts this beside its
verdict, under the data key ``panel`` of a notice or a verdict message. Arena reads it without
knowing who wrote it: ``arena rank`` and the report show each member's verdicts beside the
panel's and the members' agreement (Fleiss' kappa).

An item is one thing the panel decided (a match's best seat, one pair of answers). Its
``options`` are what could be chosen; a member's verdict, and the panel's, is one of them or
``TIE`` (or None: no valid verdict). Agreement is counted by position in ``options``, so that
items with different labels (other pairs, other seats) still share their categories.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

PANEL = "panel"  # the data key of a panel's record in a message
TIE = "tie"
Rule = Literal["vote", "mean", "weighted"]


class PanelItem(BaseModel):
    model_config = ConfigDict(extra="forbid")

    item: str = Field(description="What was decided, in the match's words: 'best', or a pair's names.")
    options: list[str] = Field(description="What a verdict could choose (besides a tie).")
    verdict: str | None = Field(description="The panel's: one of the options, tie, or None when it reached none.")
    members: dict[str, str | None] = Field(description="Each member's verdict; None: it gave no valid one.")


class PanelRecord(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="The panel, as the run reports it: a referee's metric, or the game's judges.")
    rule: str = Field(description="How the members' verdicts were combined: vote, mean or weighted.")
    members_are: Literal["agents", "seats"] = Field(
        "agents", description="agents: members are named by scenario agent (a referee's); seats: by the match's seat "
        "labels (a game's judge seats), which the reader maps to the agents seated there.")
    weights: dict[str, float] | None = None
    items: list[PanelItem]


def vote(verdicts: Mapping[str, str | None], weights: Mapping[str, float] | None = None) -> str | None:
    """The verdict with the most votes (each member's weight, or one each); TIE when two lead
    together, None when no member gave one. A member's own TIE is a vote for a tie."""
    tally: dict[str, float] = {}
    for member, verdict in verdicts.items():
        if verdict is not None:
            tally[verdict] = tally.get(verdict, 0.0) + (1.0 if weights is None else weights[member])
    if not tally:
        return None
    best = max(tally.values())
    leaders = [v for v, n in tally.items() if abs(n - best) < 1e-12]
    return leaders[0] if len(leaders) == 1 else TIE


def choice(scores: Mapping[str, float]) -> str | None:
    """The option scored highest, or TIE when several share the top; None with no scores."""
    if not scores:
        return None
    best = max(scores.values())
    top = [option for option, value in scores.items() if abs(value - best) < 1e-12]
    return top[0] if len(top) == 1 else TIE
