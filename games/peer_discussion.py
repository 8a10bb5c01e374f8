"""Peer discussion (PRD, section 3.2): two reviewers discuss which of two answers is better.

One match is one case of a pairs file: a question and two fixed answers (JSONL lines
``{"id", "question", "answer_a", "answer_b"}``, optional ``source_a``/``source_b`` naming who wrote
them and ``label``: -1 when answer A is better, 1 when B is, 0 for a tie; PRD's released LFQA
file, ``{"question", "answer_a", "answer_b", "answer_a_type", "answer_b_type",
"overall_preference"}``, is read as it is, its repeated judgments folded to their majority; where
the experts split evenly, ``expert_ties`` decides: ``tie`` (the default) or ``first``, the first
expert's vote, which is what PRD's code does and what the paper's reported human win rates on
LFQA come from. The last notice's ``expert_ties`` says which rule gave the label).

Round 1: both reviewers review the answers on their own and state a preference; the leader's
review is listed first, as in PRD. The leader is the first seat, one drawn per match, or, with
``leader: both``, each in turn: the seats are then the roles Reviewer 1 (who leads) and Reviewer 2,
and the tournament's role swap plays each case twice, once in each order, for PRD's ordering
analysis (who altered their opinion as leader and as follower). Then they take turns, the leader first, each seeing everything
said so far. PRD runs a fixed number of turns (four) and lets reviewers change their minds even
after they have agreed: that is ``stop: turns``, the default, where ``max_turns`` is the number of
turns. ``stop: agreement`` ends the discussion as soon as both state the same preference, after
at most ``max_turns``.

A preference is only what a reviewer wrote as the last line of its message, alone:
``Preference: 1``, ``Preference: 2`` or ``Preference: tie`` (markdown emphasis aside); with
``allow_tie: false`` a reviewer must pick 1 or 2, as PRD's prompts ask, and a tie is asked again
with the reason (the outcome of a discussion that ends apart is still ``on_disagreement``'s). A reply whose
last line is anything else, an echo of the instruction included ("End every message with a line
'Preference: 1', ..."), states none: it is asked again with the reason, and when no valid reply
comes the turn is recorded as defaulted and the reviewer's last stated preference stands. A
reviewer that never stated one has no preference: never a tie. It gives no review (nothing for
peer rank), its payoff is 0, and the discussion has no outcome and is neither agreed nor
disagreed at the start (that takes two stated initial preferences); agreement at any turn takes
two stated preferences.

A reviewer's payoff is 1 when its final preference matches the case's label (0 otherwise, and
when there is no label or no preference). The match's last notice records, per reviewer, its position (leader or
follower), initial and final preference, whether it altered or held its opinion (PRD's OA/OH:
final against initial) and whether it changed its mind after the two had agreed; and for the
discussion, whether they began in disagreement or in agreement (both None without two stated
initial preferences), the turn they first agreed at, every stated preference in order and the
turns each reviewer left without one. ``discussion_summary`` (its summary) aggregates these over a run.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import (FinalNotice, Game, HasCases, InvalidReply, Notice, ReportsReviews, Review, Summarized, Summary, Task,
                            everyone_hears_everyone, path_field)
from arena.contract.game import example_prose

from . import discussion_summary
from .closing import closing_lines, plain, shown
from .verdicts import as_text, choice_field, object_schema, text_field
from .questions import EXPERT_TIES_HELP, ExpertTies, case_of, load_pairs


class DiscussionParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pairs: str = path_field(description="A JSONL file of pairs of answers to discuss (or PRD's LFQA file).")
    case: str | None = Field(None, description="The pair of this match; the tournament sets it.")
    max_turns: int = Field(4, ge=0, description="Discussion turns after the initial reviews: all of them under "
                           "stop: turns (PRD's four), at most this many under stop: agreement.")
    stop: Literal["turns", "agreement"] = Field(
        "turns", description="turns: discuss for max_turns turns whatever happens (PRD); agreement: stop once they agree.")
    leader: Literal["first", "drawn", "both"] = Field(
        "first", description="Who speaks first: the first seat; drawn per match; or both: each pair discussed twice, "
        "each reviewer leading once (the seats become the roles Reviewer 1, who leads, and Reviewer 2, so the "
        "tournament's role swap plays a case once in each order, as two matches).")
    role_reminder: bool = Field(True, description="Remind each reviewer of its role at every turn (PRD's role prompt).")
    criteria: bool = Field(True, description="Spell out what to judge: unsupported information, core information, coherence.")
    on_disagreement: Literal["tie", "leader", "follower"] = Field(
        "tie", description="The outcome when they still disagree at the end.")
    allow_tie: bool = Field(True, description="Let a reviewer prefer neither answer ('Preference: tie'). false: "
                            "each must choose answer 1 or 2, as PRD's prompts ask; a tie is asked again with the reason.")
    expert_ties: ExpertTies = Field("tie", description=EXPERT_TIES_HELP)


# the whole closing line: "Preference: 1", "My preference is: Answer 2", "Final preference - tie."
_PREFERENCE = re.compile(r"(?:(?:my|final|current)\s+)*preference\s*(?:is\s*)?[:=\-\u2013\u2014]?\s*(?:answer\s*)?(1|2|tie)\s*[.!]?",
                         re.IGNORECASE)
_WORD = {"1": -1, "2": 1, "tie": 0}  # -1: answer 1 (A) better
# a reply held to this schema is turned back into the message it stands for (``reply_text``)
_SCHEMAS = {tie: object_schema("Review", [
    ("message", text_field("Your message to the other reviewer: your points first, before your preference.")),
    ("preference", choice_field(f"Which answer you prefer now: {'1, 2 or tie' if tie else '1 or 2'}.",
                                ["1", "2", "tie"] if tie else ["1", "2"])),
]) for tie in (True, False)}
_LINES = {True: "'Preference: 1', 'Preference: 2' or 'Preference: tie'",
          False: "'Preference: 1' or 'Preference: 2' (a tie is not an option: choose the better answer)"}
_NO_TIE = ("A tie is not an option here: choose the answer you find better, even by a little, and end with "
           "'Preference: 1' or 'Preference: 2'.")


def _ask(allow_tie: bool) -> str:
    return f"End your message with your preference alone on its last line: {_LINES[allow_tie]}."


class PeerDiscussion(Game, HasCases, ReportsReviews, Summarized):
    description = "Two reviewers discuss which of two answers is better, for a fixed number of turns or until they agree (PRD's peer discussion)."
    Params = DiscussionParams
    min_seats = max_seats = 2
    summary_fields = ("reviewers",)  # the last notice's data describes the discussion: discussion_summary reads it
    answers_field = "answers"  # the two answers discussed, by source: style control measures them

    @classmethod
    def seat_roles(cls, params, n_seats):
        if params.leader == "both":  # two roles, so that the role swap seats each pair both ways; labels as ever
            return [f"Reviewer {i + 1}" for i in range(n_seats)]
        return ["Reviewer"] * n_seats

    @classmethod
    def summaries(cls, notices: list[FinalNotice]) -> list[Summary]:
        return discussion_summary.summarize(notices)

    @classmethod
    def cases(cls, params: DiscussionParams) -> list[str]:
        return list(load_pairs(params.pairs, params.expert_ties))

    @classmethod
    def rounds_needed(cls, params, n_seats):
        return 1 + params.max_turns

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.case = case_of(load_pairs(params.pairs, params.expert_ties), params.case)
        first, second = self.seats
        self.order = [first, second] if params.leader != "drawn" or rng.random() < 0.5 else [second, first]
        # each reviewer's standing preference after each of its turns: the last it stated (a defaulted
        # turn states none), None until it has stated one
        self.preferences: dict[str, list[int | None]] = {s: [] for s in self.seats}
        self.missed: dict[str, list[int]] = {s: [] for s in self.seats}  # turns a reviewer left without a preference
        self.stated: dict[str, int] = {}  # the last preference each reviewer wrote
        self.said: list[dict[str, Any]] = []  # every stated preference in order: turn (0: the initial reviews), seat
        self.agreed_at: int | None = None  # the first turn after which both held the same preference
        self.agreed_on: int | None = None  # and that preference

    def rules(self, seat: str) -> str:
        other = next(s for s in self.seats if s != seat)
        return (f"You are {seat}, one of two reviewers (the other is {other}). You will compare two answers to a "
                "question and then discuss your reviews with the other reviewer, aiming at a verdict you both "
                "accept; change your mind only when the other's arguments convince you. End every message with your "
                f"preference alone on its last line: {_LINES[self.params.allow_tie]}.")

    def _material(self) -> str:
        c = self.case
        text = f"[Question]\n{c.question}\n\n[Answer 1]\n{c.answer_a}\n[End of Answer 1]\n\n[Answer 2]\n{c.answer_b}\n[End of Answer 2]"
        if self.params.criteria:
            text += ("\n\nJudge, in this order of importance: unsupported information (anything without support "
                     "counts as false), core information (does it actually answer the question?), and coherence.")
        return text

    def speakers(self, round: int) -> list[str]:
        if round == 1:
            return list(self.order)  # replies are listed in speaking order: the leader's review comes first
        return [self.order[(round - 2) % 2]]

    def prompt(self, seat: str, round: int) -> str:
        if round == 1:
            return self._material() + "\n\nWrite your review: compare the answers point by point, then state your preference."
        text = ("Continue the discussion: answer the other reviewer's points, say whether they change your view, "
                "and state your current preference.")
        if self.params.role_reminder:
            text = f"Remember: you are {seat}, and you answer {next(s for s in self.seats if s != seat)}. " + text
        return text

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        return {"task": Task.REVIEW if round == 1 else Task.DISCUSS, "question": self.case.question,
                "answers": [self.case.answer_a, self.case.answer_b],
                "others": {s: p for s, p in self.stated.items() if s != seat}}

    def hears(self, round: int):
        return everyone_hears_everyone(self.seats)  # initial reviews are shown once round 1 closes

    def turn_schema(self, seat: str, round: int) -> dict[str, Any]:
        return _SCHEMAS[self.params.allow_tie]

    def reply_text(self, seat: str, round: int, reply: str) -> str:
        return as_text(reply, self.turn_schema(seat, round),
                       lambda v: f"{str(v['message']).strip()}\n\nPreference: {v['preference']}")

    def parse(self, seat: str, reply: str, round: int) -> int:
        last = closing_lines(self.reply_text(seat, round, reply))
        found = _PREFERENCE.fullmatch(plain(last[0])) if last else None
        if found is None:
            said = f" Your last line was {shown(last[0])}." if last else " Your message was empty."
            raise InvalidReply(_ask(self.params.allow_tie) + said)
        if found.group(1).lower() == "tie" and not self.params.allow_tie:
            raise InvalidReply(_NO_TIE + f" Your last line was {shown(last[0])}.")
        return _WORD[found.group(1).lower()]

    def default_action(self, seat: str, round: int) -> int | None:
        return None  # no preference stated: never a tie; the previous one, if any, stands

    def example_reply(self, seat: str, round: int) -> str:
        # the reviewers hold opposite views to the end: the discussion takes all its turns
        side = "1" if seat == self.seats[0] else "2"
        if round == 1:
            return f"{example_prose(200, 'the two answers')}\n\nPreference: {side}"
        return f"{example_prose(120, 'what the other reviewer said')}\n\nPreference: {side}"

    def apply(self, round: int, actions: Mapping[str, int | None]) -> list[Notice]:
        for seat, preference in actions.items():
            if preference is not None:
                self.stated[seat] = preference
                self.said.append({"turn": round - 1, "seat": seat, "preference": preference})
            else:
                self.missed[seat].append(round - 1)
                preference = self.stated.get(seat)
            self.preferences[seat].append(preference)
        if self.agreed_at is None and self._agree():
            self.agreed_at, self.agreed_on = round - 1, self.preferences[self.seats[0]][-1]
        if not self.is_over(round):
            return []
        return [Notice(to=(), text=self._outcome_text(), data=self.summary())]

    def _outcome_text(self) -> str:
        silent = [s for s in self.seats if self._standing(s) is None]
        if silent:
            return f"Outcome: none: {' and '.join(silent)} stated no preference."
        return f"Outcome: {self.outcome()}."

    def _standing(self, seat: str) -> int | None:
        return self.preferences[seat][-1] if self.preferences[seat] else None

    def _agree(self) -> bool:
        """Both reviewers hold the same stated preference (one without a preference agrees with nothing)."""
        now = [self._standing(s) for s in self.seats]
        return None not in now and len(set(now)) == 1

    def is_over(self, round: int) -> bool:
        return round >= 1 + self.params.max_turns or (self.params.stop == "agreement" and self._agree())

    def outcome(self) -> int | None:
        """The discussion's verdict; None when a reviewer never stated a preference."""
        if any(self._standing(s) is None for s in self.seats):
            return None
        if self._agree():
            return self.preferences[self.seats[0]][-1]
        rule = self.params.on_disagreement
        return 0 if rule == "tie" else self.preferences[self.order[0] if rule == "leader" else self.order[1]][-1]

    def summary(self) -> dict[str, Any]:
        leader, follower = self.order
        initial = (self.preferences[leader][0], self.preferences[follower][0])
        stated = None not in initial  # agreeing or not at the start takes two stated initial preferences
        return {
            "case": self.case.id, "label": self.case.label, "outcome": self.outcome(), "agreed": self._agree(),
            "expert_ties": self.case.expert_ties, "allow_tie": self.params.allow_tie,
            "stop": self.params.stop, "leader": leader, "follower": follower,
            "turns": sum(len(p) for p in self.preferences.values()) - len(self.seats),
            "disagreed_at_start": initial[0] != initial[1] if stated else None,
            "agreed_at_start": initial[0] == initial[1] if stated else None,
            "agreed_at": self.agreed_at, "said": list(self.said),
            "missed": {s: list(t) for s, t in self.missed.items()},  # turns (0: the initial reviews) without a preference
            "reviewers": {s: self._reviewer(s) for s in self.seats},
            "answers": {self.case.source_a: self.case.answer_a, self.case.source_b: self.case.answer_b},
        }

    def _reviewer(self, seat: str) -> dict[str, Any]:
        """One reviewer's course: PRD's opinion altering (final differs from initial) or holding."""
        mine = [x for x in self.said if x["seat"] == seat]
        after = [x["preference"] for x in mine if self.agreed_at is not None and x["turn"] > self.agreed_at]
        p = self.preferences[seat]
        known = p[0] is not None  # then its final preference is a stated one too
        return {"position": "leader" if seat == self.order[0] else "follower", "initial": p[0], "final": p[-1],
                "altered": p[0] != p[-1] if known else None, "held": p[0] == p[-1] if known else None,
                "changes": sum(a["preference"] != b["preference"] for a, b in zip(mine, mine[1:])),
                "changed_after_agreement": any(x != self.agreed_on for x in after)}

    def payoffs(self) -> dict[str, float]:
        label = self.case.label
        return {s: float(label is not None and p[-1] is not None and p[-1] == label) for s, p in self.preferences.items()}

    def reviews(self) -> list[Review]:
        """Each reviewer's final preference: one verdict of one sample, in the case's order. A reviewer
        that never stated a preference gave no verdict, so no review."""
        c = self.case
        return [Review(c.id, c.source_a, c.source_b, seat, p[-1], sample=0) for seat, p in self.preferences.items()
                if p[-1] is not None]
