"""A check of the assumption behind weighted peer rank.

PRD weighs each reviewer by its own score as a contestant: a model that writes better answers is
taken to judge better too. Nothing guarantees it. When the best writers are poor judges, weighting
hands the most say to the least reliable verdicts, and the weighted board can come out worse than
the unweighted one. So every weighted board carries this check: for the reviewers weighed by their
own score, how often each one's verdicts agree with an independent yardstick, and the rank
correlation (Spearman) between those agreements and the weights each method gave. The yardstick is
the reference's labels (the human raters) when the board has them; otherwise the majority of the
other reviewers, each reviewer left out of its own yardstick. A correlation below ``THRESHOLD``
means the reviewers weighed most are the ones that agree least: the board then says so.

The check needs at least ``MIN_REVIEWERS`` reviewers with weights of their own (a rank correlation
of two is always ±1) and weights and agreements that differ; otherwise it says why it was not made.
"""

from __future__ import annotations

import numpy as np
from pydantic import BaseModel

from .agreement import Unit, verdicts
from .reviews import Reviews
from .winrate import reviewer_roles

THRESHOLD = 0.0  # below it the weights order the reviewers against their agreement, not with it
MIN_REVIEWERS = 3
OTHERS = "the other reviewers"
_NAMES = {"winrate": "win rate", "elo": "Elo", "bt": "Bradley–Terry"}


class ReviewerAgreement(BaseModel):
    reviewer: str
    examples: int  # examples judged by both the reviewer and the yardstick
    agreement: float | None  # share of them on which its verdict is the yardstick's (None: no example)


class WeightCheck(BaseModel):
    against: str  # the reference's name, or "the other reviewers" (each reviewer's leave-one-out majority)
    unit: Unit  # what one example is, as in the board's agreement
    reviewers: list[ReviewerAgreement]  # the reviewers weighed by their own score
    weights: dict[str, dict[str, float]]  # method -> reviewer -> the weight that method gave it
    correlation: dict[str, float | None]  # method -> Spearman between its weights and the agreements
    threshold: float = THRESHOLD
    holds: bool | None  # None: not checked (see ``reason``)
    reason: str | None = None  # why it was not checked
    warning: str | None = None  # set when it fails


def _agreement(own: dict, yardstick: dict) -> tuple[int, float | None]:
    """How many of ``own``'s examples the yardstick judged, and the share with the same verdict.
    Keys per order (4) are matched to a per-pair yardstick (3) read in the same order."""
    per_pair = len(next(iter(yardstick), ())) == 3
    same = []
    for key, verdict in own.items():
        if per_pair and len(key) == 4:
            if key[:3] not in yardstick:
                continue
            # a per-pair verdict is "+1: the higher code is better"; shown first was the lower code: as given
            truth = yardstick[key[:3]] if key[3] == key[1] else -yardstick[key[:3]]
        elif key in yardstick:
            truth = yardstick[key]
        else:
            continue
        same.append(verdict == truth)
    return len(same), (float(np.mean(same)) if same else None)


def _spearman(x: list[float], y: list[float]) -> float | None:
    if len(x) < 2 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return None
    from scipy import stats  # loaded only for weighted boards

    return float(stats.spearmanr(x, y).statistic)


def check_weights(selected: Reviews, weights: dict[str, dict[str, float]], fixed: dict[str, float] | None,
                  unit: Unit, reference: str | None = None, truth: dict | None = None) -> WeightCheck:
    """The check for the battles ``selected`` and each weighted method's reviewer ``weights``;
    ``truth``: the ``reference``'s verdicts per pair, when the board has a reference apart from
    the ranking reviewers."""
    as_contestant, _ = reviewer_roles(selected, fixed)
    checked = [r for r, c in zip(selected.reviewers, as_contestant) if c >= 0]
    against = reference if truth is not None else OTHERS
    rows = []
    for reviewer in checked:
        own = verdicts(selected.by([reviewer]), unit=unit)
        others = [r for r in selected.reviewers if r != reviewer]
        yardstick = truth if truth is not None else (verdicts(selected.by(others), unit=unit) if others else {})
        examples, share = _agreement(own, yardstick) if yardstick else (0, None)
        rows.append(ReviewerAgreement(reviewer=reviewer, examples=examples, agreement=share))
    used = {method: {r: w[r] for r in checked} for method, w in weights.items()}
    found = WeightCheck(against=against, unit=unit, reviewers=rows, weights=used, correlation={}, holds=None)
    measured = [row for row in rows if row.agreement is not None]
    if len(measured) < MIN_REVIEWERS:
        found.reason = (f"needs at least {MIN_REVIEWERS} reviewers weighed by their own score and compared with "
                        f"{against}; here {len(measured)}")
        return found
    agreement = [row.agreement for row in measured]
    found.correlation = {method: _spearman([w[row.reviewer] for row in measured], agreement) for method, w in used.items()}
    known = {m: c for m, c in found.correlation.items() if c is not None}
    if not known:
        found.reason = "the weights, or the agreements, are all equal: there is no order to compare"
        return found
    failed = {m: c for m, c in known.items() if c < THRESHOLD}
    found.holds = not failed
    if failed:
        worst = min(failed, key=failed.get)
        found.warning = (
            f"Weighting assumes that the reviewers who score best as contestants judge best, and here it does not "
            f"hold: the {', '.join(_NAMES.get(m, m) for m in failed)} weights rank the reviewers against their agreement with {against} "
            f"(Spearman {failed[worst]:+.2f}, below {THRESHOLD:g}), so the reviewers weighed most agree least. "
            "The weighted scores may be further from the truth than the unweighted ones.")
    return found
