"""Peer discussion over a run, as PRD reports it: the game's summary tables.

Read from the last notice of every discussion (``FinalNotice``), whose data describes the two
reviewers: ``reviewers`` by seat, each with its ``position`` (leader or follower), ``initial``
and ``final`` preference, ``altered``/``held`` and ``changed_after_agreement``; and for the match
``label``, ``outcome``, ``agreed``, ``disagreed_at_start`` and ``turns`` (peer_discussion writes it).

- Opinion altering (OA) and holding (OH), PRD section 4.3 and Figure 7: counted over the
  discussions that began in disagreement, where a reviewer either ends where it started (held)
  or not (altered); per reviewer and position (leader or follower), so the ordering effect
  (leaders alter less) can be read off.
- Accuracy against the label: each reviewer's initial and final preference, and the
  discussion's outcome (PRD's peer discussion accuracy, PDA), per reviewer, per position and
  per pair of reviewers with who led (PRD's Table 8: R1 lead, R2 lead, either).

Only preferences a reviewer stated count. An ``initial`` or ``final`` of None (a reviewer that
stated no preference) is left out of every accuracy and counted as ``no_preference``; a
discussion without an ``outcome`` is left out of the discussion accuracy and counted as
``no_outcome``; a discussion is agreed (or disagreed) at the start only when both initial
preferences were stated (``agreed_at_start``; older runs without it: both initial preferences
given and not ``disagreed_at_start``).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass

from pydantic import BaseModel

from arena.contract import Column, FinalNotice, MatchRecord, Summary, Table
from arena.contract.summaries import notices_of, share

POSITIONS = ("leader", "follower")


class OpinionRow(BaseModel):
    """One reviewer (or every reviewer: agent None) in one position (or either: position "any")."""

    agent: str | None
    position: str
    discussions: int
    labelled: int
    initial_accuracy: float | None
    final_accuracy: float | None
    disagreed: int  # discussions that began in disagreement: where OA and OH are counted
    altered: int
    held: int
    altered_share: float | None
    changed_after_agreement: int
    no_preference: int = 0  # discussions in which this reviewer never stated a preference


class PairRow(BaseModel):
    """Two reviewers' discussions, with one of them leading (or either: leader None)."""

    reviewers: tuple[str, str]
    leader: str | None
    discussions: int
    labelled: int
    agreed: int  # discussions that ended in agreement
    no_outcome: int = 0  # discussions without an outcome: a reviewer stated no preference
    initial_accuracy: dict[str, float | None]
    final_accuracy: dict[str, float | None]
    discussion_accuracy: float | None  # the outcome against the label: PRD's PDA


class DiscussionSummary(BaseModel):
    group: str
    discussions: int
    labelled: int
    mean_turns: float
    agreed_at_start: int  # both initial preferences stated, and the same
    agreed_at_end: int
    no_outcome: int = 0  # discussions in which a reviewer never stated a preference: no outcome, no agreement
    changed_after_agreement: int  # discussions in which a reviewer changed its mind after they had agreed
    initial_accuracy: float | None  # every reviewer's initial preference
    final_accuracy: float | None
    discussion_accuracy: float | None
    reviewers: list[OpinionRow]
    pairs: list[PairRow]
    expert_ties: list[str] = []  # how even splits of expert judgments became labels (LFQA), as the matches say


@dataclass
class _Stand:
    """One reviewer in one discussion."""

    agent: str
    position: str
    initial: int | None  # None: stated no preference
    final: int | None
    altered: bool
    after_agreement: bool
    label: int | None
    disagreed: bool


@dataclass
class _Discussion:
    stands: list[_Stand]
    label: int | None
    outcome: int | None
    agreed: bool
    turns: int
    agreed_at_start: bool
    expert_ties: str | None = None

    @property
    def leader(self) -> str:
        return next(s.agent for s in self.stands if s.position == "leader")


def _discussion(record: FinalNotice) -> _Discussion | None:
    data = record.data
    reviewers = data.get("reviewers")
    if not isinstance(reviewers, dict) or len(reviewers) != 2 or \
            {r.get("position") for r in reviewers.values() if isinstance(r, dict)} != set(POSITIONS):
        return None
    label, disagreed = data.get("label"), bool(data.get("disagreed_at_start"))
    stands = [_Stand(record.agent_of(seat), r["position"], r.get("initial"), r.get("final"), bool(r.get("altered")),
                     bool(r.get("changed_after_agreement")), label, disagreed) for seat, r in reviewers.items()]
    stated = all(s.initial is not None for s in stands)
    agreed_at_start = bool(data["agreed_at_start"]) if "agreed_at_start" in data else stated and not disagreed
    return _Discussion(stands, label, data.get("outcome"), bool(data.get("agreed")), int(data.get("turns", 0)),
                       agreed_at_start, data.get("expert_ties"))


def _right(stands: list[_Stand], which: str) -> tuple[int, int]:
    """How many of these stands' stated (``which``: initial or final) preferences match the label,
    out of how many were stated on a labelled case."""
    given = [s for s in stands if s.label is not None and getattr(s, which) is not None]
    return sum(getattr(s, which) == s.label for s in given), len(given)


def _outcomes(found: list[_Discussion]) -> tuple[int, int]:
    """Discussions whose outcome matches the label, out of the labelled ones with an outcome."""
    given = [d for d in found if d.label is not None and d.outcome is not None]
    return sum(d.outcome == d.label for d in given), len(given)


def _opinions(agent: str | None, position: str, stands: list[_Stand]) -> OpinionRow:
    labelled = [s for s in stands if s.label is not None]
    disagreed = [s for s in stands if s.disagreed]
    altered = sum(s.altered for s in disagreed)
    return OpinionRow(
        agent=agent, position=position, discussions=len(stands), labelled=len(labelled),
        initial_accuracy=share(*_right(stands, "initial")), final_accuracy=share(*_right(stands, "final")),
        disagreed=len(disagreed), altered=altered, held=len(disagreed) - altered,
        altered_share=share(altered, len(disagreed)), changed_after_agreement=sum(s.after_agreement for s in stands),
        no_preference=sum(s.final is None for s in stands))


def _pair(reviewers: tuple[str, str], leader: str | None, found: list[_Discussion]) -> PairRow:
    labelled = [d for d in found if d.label is not None]
    stands = [s for d in labelled for s in d.stands]

    def accuracy(agent: str, which: str) -> float | None:
        return share(*_right([s for s in stands if s.agent == agent], which))

    return PairRow(reviewers=reviewers, leader=leader, discussions=len(found), labelled=len(labelled),
                   agreed=sum(d.agreed for d in found), no_outcome=sum(d.outcome is None for d in found),
                   initial_accuracy={a: accuracy(a, "initial") for a in dict.fromkeys(reviewers)},
                   final_accuracy={a: accuracy(a, "final") for a in dict.fromkeys(reviewers)},
                   discussion_accuracy=share(*_outcomes(found)))


def discussion_summaries(records: Iterable[MatchRecord | FinalNotice]) -> list[DiscussionSummary]:
    """One summary per scenario entry whose matches are discussions, in the order entries appear.
    ``records``: the matches' final notices, or their records."""
    records = notices_of(list(records))
    by_group: dict[str, list[_Discussion]] = {r.group: [] for r in records}
    for record in sorted(records, key=lambda r: r.key):
        found = _discussion(record)
        if found is not None:
            by_group[record.group].append(found)
    out = []
    for group, found in by_group.items():
        if not found:
            continue
        stands = [s for d in found for s in d.stands]
        labelled = [d for d in found if d.label is not None]
        agents = sorted({s.agent for s in stands})
        rows = []
        for agent in agents:
            mine = [s for s in stands if s.agent == agent]
            rows += [_opinions(agent, p, [s for s in mine if s.position == p]) for p in POSITIONS]
            rows.append(_opinions(agent, "any", mine))
        rows += [_opinions(None, p, [s for s in stands if s.position == p]) for p in POSITIONS]
        rows.append(_opinions(None, "any", stands))
        pairs: dict[tuple[str, str], list[_Discussion]] = defaultdict(list)
        for d in found:
            pairs[tuple(sorted(s.agent for s in d.stands))].append(d)
        pair_rows = []
        for reviewers, members in sorted(pairs.items()):
            for leader in dict.fromkeys(reviewers) if len(set(reviewers)) == 2 else ():
                pair_rows.append(_pair(reviewers, leader, [d for d in members if d.leader == leader]))
            pair_rows.append(_pair(reviewers, None, members))
        out.append(DiscussionSummary(
            group=group, discussions=len(found), labelled=len(labelled),
            mean_turns=sum(d.turns for d in found) / len(found),
            agreed_at_start=sum(d.agreed_at_start for d in found), agreed_at_end=sum(d.agreed for d in found),
            no_outcome=sum(d.outcome is None for d in found),
            changed_after_agreement=sum(any(s.after_agreement for s in d.stands) for d in found),
            initial_accuracy=share(*_right(stands, "initial")), final_accuracy=share(*_right(stands, "final")),
            discussion_accuracy=share(*_outcomes(found)),
            reviewers=[r for r in rows if r.discussions], pairs=pair_rows,
            expert_ties=sorted({d.expert_ties for d in found if d.expert_ties is not None})))
    return out


_SPLITS = {"tie": "an even split of the experts is a tie", "first": "an even split goes to the first expert, as PRD's code"}


def _labels(s: DiscussionSummary) -> str:
    """Which rule made the labels, when they were folded from expert judgments (PRD's LFQA file)."""
    if not s.expert_ties:
        return ""
    return f" (labels: the experts' majority; {' / '.join(_SPLITS.get(r, r) for r in s.expert_ties)})"


def _tables(s: DiscussionSummary) -> list[Table]:
    head = (f"{s.discussions} peer discussions ({s.labelled} labelled), {s.mean_turns:.1f} turns on average; agreed at "
            f"the start {s.agreed_at_start}, at the end {s.agreed_at_end}; a reviewer changed its mind after they had "
            f"agreed in {s.changed_after_agreement}. Accuracy against the labels: initial {_text(s.initial_accuracy, 3)}, "
            f"final {_text(s.final_accuracy, 3)}, the discussion's outcome (PDA) {_text(s.discussion_accuracy, 3)}")
    opinions = Table(
        name="discussion", group=s.group, note=head,
        title=f"{s.group}: each reviewer as leader and follower. Accuracy: initial and final preference against the "
              f"label{_labels(s)}; OA: opinion altered, OH: held, over the discussions that began apart (a leader that alters less "
              "than a follower shows PRD's ordering effect); changed after agreeing: discussions in which it changed "
              "its mind once they had agreed",
        columns=[Column(name="Reviewer", numeric=False), Column(name="Position", numeric=False),
                 *(Column(name=n, digits=2) for n in ("Discussions", "Initial accuracy", "Final accuracy",
                                                      "Began apart", "OA", "OH", "OA share", "Changed after agreeing"))],
        rows=[[r.agent or "all reviewers", r.position, r.discussions, r.initial_accuracy, r.final_accuracy, r.disagreed,
               r.altered, r.held, r.altered_share, r.changed_after_agreement] for r in s.reviewers])
    pairs = Table(
        name="discussion_pairs", group=s.group,
        note="As PRD's Table 8: each reviewer's accuracy before and after (in the order the pair is named), and the "
             "accuracy of the discussion's outcome (PRD's peer discussion accuracy, PDA), with either reviewer leading.",
        title=f"{s.group}: per pair of reviewers A / B and who led{_labels(s)}",
        columns=[Column(name="A / B", numeric=False), Column(name="Led by", numeric=False),
                 *(Column(name=n, digits=2) for n in ("Discussions", "Agreed at end", "Initial accuracy",
                                                      "Final accuracy", "Discussion accuracy"))],
        rows=[[" / ".join(p.reviewers), p.leader or "either", p.discussions, p.agreed,
               " / ".join(_text(v) for v in p.initial_accuracy.values()),
               " / ".join(_text(v) for v in p.final_accuracy.values()), p.discussion_accuracy] for p in s.pairs])
    return [opinions, pairs]


def _text(value: float | None, digits: int = 2) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def summarize(notices: list[FinalNotice]) -> list[Summary]:
    found = discussion_summaries(notices)
    if not found:
        return []
    return [Summary(name="discussion", data=[s.model_dump() for s in found],
                    tables=[t for s in found for t in _tables(s)])]
