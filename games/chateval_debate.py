"""ChatEval's debate: N debaters with personas argue which of two answers is better.

One match is one case of a pairs file (the format of ``peer_discussion``). Each debater has a
persona (a built-in set, or the scenario's own, given in the scenario or in a YAML file) and,
every turn, says what it thinks and ends with its verdict. The built-in personas are Arena's own,
not the paper's role descriptions; ``scenarios/data/chateval-paper-personas.yaml`` describes the
paper's five roles in our words, for ``personas:`` to name. Three ways to talk:

- ``one_by_one``: debaters speak in turn, each seeing everything said before it, this turn too;
- ``simultaneous_talk``: all speak at once each turn, seeing only earlier turns;
- ``simultaneous_talk_with_summarizer``: all speak at once, privately; a summarizer (the last
  seat) condenses the turn, and the debaters see that summary, not each other's words.

Each debater's last verdict counts: the majority for choices, the mean for scores. A verdict is
only the message's own last line, alone (``Verdict: 2``, ``Scores: 7 4``; markdown emphasis
aside): a debater that echoes the instruction ("End each message with a line 'Verdict: 1', ...")
has stated none. A message without one is asked again with the reason, then the turn is recorded
as defaulted and gives no verdict: the debater's previous verdict stands, and one that never gave
a verdict has none (it counts in no vote, no mean, no review; never a tie). A debater's payoff is
1 when its final verdict matches the case's label (0 otherwise, or without a label or verdict).

Position calibration (``position_calibration: true``, as ChatEval runs its evaluations): every
pair is also debated with its answers the other way round, in a match of its own (case
``<id>@swapped``), so no debater's words about one order reach the other. Each match's verdict
is in the order it showed; ``debate_verdicts`` (its summary) maps the swapped one back and combines the
two as FairEval's BPC does, the sign of their mean: for scores the mean score difference, for
choices a vote in which two opposite verdicts make a tie. The last notice's data (case, pair,
swapped, calibrated, label, verdict, finals, firsts, output, strategy) is what it reads;
``expert_ties`` in it says how an even split of PRD's LFQA experts became the label (the
parameter of the same name: ``tie``, or ``first`` as PRD's code; see ``questions.expert_label``).
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import FinalNotice, Game, HasCases, InvalidReply, Notice, ReportsReviews, Review, Summarized, Summary, Task, path_field
from arena.contract.game import example_prose
from arena.contract.panels import PANEL, TIE, PanelItem, PanelRecord

from . import debate_verdicts
from .closing import closing_lines, plain, shown
from .questions import EXPERT_TIES_HELP, SWAPPED, ExpertTies, load_pairs, pair_of
from .verdicts import as_text, choice_field, object_schema, score_field, text_field

if TYPE_CHECKING:
    import networkx as nx

# Arena's own personas, written for this game; ChatEval's are in a file a scenario can name (see above)
PERSONAS = {
    "Everyday reader": "You read answers the way most people do: you want them clear, useful and to the point.",
    "Critic": "You look for what is wrong: errors, gaps, claims without support, padding.",
    "Domain expert": "You know the subject well and weigh accuracy and depth above style.",
    "Editor": "You care about structure, coherence and whether the answer says what it means plainly.",
    "Teacher": "You ask whether someone who did not know the answer would learn it from this text.",
}

def personas_of(params: BaseModel) -> dict[str, str]:
    """The debaters' personas, name -> description: the scenario's (a mapping, or a YAML file of one),
    else the built-in set. A ValueError, worded for a person, for a file that holds no such mapping."""
    given = params.personas
    if given is None:
        return PERSONAS
    return _personas_file(given) if isinstance(given, str) else given


@functools.lru_cache(maxsize=8)
def _personas_file(path: str) -> dict[str, str]:
    import yaml

    try:
        found = yaml.safe_load(open(path, encoding="utf-8").read())
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ValueError(f"personas file {path} cannot be read: {str(exc).splitlines()[0]}") from None
    if not isinstance(found, dict) or not found or not all(
            isinstance(k, str) and isinstance(v, str) and k.strip() and v.strip() for k, v in found.items()):
        raise ValueError(f"personas file {path}: expected a mapping of persona names to descriptions, one "
                         "`Name: description` a line (each a non-empty text)")
    return {k.strip(): " ".join(v.split()) for k, v in found.items()}


# each the whole closing line of a message
@functools.lru_cache(maxsize=2)
def debate_schema(output: str) -> dict[str, Any]:
    argument = ("argument", text_field("Your arguments this turn, before your verdict."))
    if output == "choice":
        return object_schema("Debate turn", [argument, ("verdict", choice_field(
            "1 if Answer 1 is better, 2 if Answer 2 is, or tie.", ["1", "2", "tie"]))])
    return object_schema("Debate turn", [argument, ("score_1", score_field("Answer 1's score, from 1 to 10.", 1, 10)),
                                         ("score_2", score_field("Answer 2's score, from 1 to 10.", 1, 10))])


_CHOICE = re.compile(r"(?:(?:my|final)\s+)*verdict\s*[:=\-\u2013\u2014]?\s*(?:answer\s*)?(1|2|tie)\s*[.!]?", re.IGNORECASE)
_SCORES = re.compile(r"(?:(?:my|final)\s+)*scores\s*[:=\-\u2013\u2014]?\s*(\d+(?:\.\d+)?)\s*(?:,|/|\s|and)\s*(\d+(?:\.\d+)?)\s*\.?",
                     re.IGNORECASE)


Talk = Literal["one_by_one", "simultaneous_talk", "simultaneous_talk_with_summarizer"]  # ChatEval's strategies


class DebateParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    pairs: str = path_field(description="A JSONL file of pairs of answers (peer_discussion's format, or PRD's LFQA file).")
    case: str | None = Field(None, description="The pair of this match; the tournament sets it.")
    strategy: Talk = "one_by_one"
    turns: int = Field(2, ge=1, description="Turns of debate.")
    output: Literal["choice", "scores"] = Field("choice", description="'Verdict: 1|2|tie', or 'Scores: X Y' (1 to 10).")
    personas: dict[str, str] | str | None = path_field(
        None, description="Name -> description, or a YAML file of them (read from the scenario's folder), given to the "
        "debaters in order; default: Arena's own five (scenarios/data/chateval-paper-personas.yaml: the paper's).")
    position_calibration: bool = Field(
        False, description="Debate every pair in both orders, a match each; the two verdicts are combined when scored.")
    expert_ties: ExpertTies = Field("tie", description=EXPERT_TIES_HELP)


class ChatEvalDebate(Game, HasCases, ReportsReviews, Summarized):
    description = "Debaters with personas argue which of two answers is better (ChatEval)."
    Params = DebateParams
    min_seats = 2
    rotating_roles = ("Debater",)  # a role swap changes the speaking order; the summarizer keeps its seat
    answers_field = "answers"  # the two answers debated, by source: style control measures them
    summary_fields = ("verdict",)  # the group verdict on a pair, which debate_verdicts scores against its label

    @classmethod
    def summaries(cls, notices: list[FinalNotice]) -> list[Summary]:
        return debate_verdicts.summarize(notices)

    @classmethod
    def seat_roles(cls, params: DebateParams, n_seats: int) -> list[str]:
        if params.strategy == "simultaneous_talk_with_summarizer":
            return ["Debater"] * (n_seats - 1) + ["Summarizer"]
        return ["Debater"] * n_seats

    @classmethod
    def seat_problem(cls, params: DebateParams, n_seats: int) -> str | None:
        debaters = n_seats - (params.strategy == "simultaneous_talk_with_summarizer")
        if debaters < 2:
            return "a debate needs at least two debaters (and, with a summarizer, one seat more)"
        try:
            personas = personas_of(params)
        except ValueError as exc:
            return str(exc)
        if debaters > len(personas):
            return f"{debaters} debaters but only {len(personas)} personas: add personas"
        return None

    @classmethod
    def cases(cls, params: DebateParams) -> list[str]:
        ids = list(load_pairs(params.pairs, params.expert_ties))
        return [c for i in ids for c in (i, i + SWAPPED)] if params.position_calibration else ids

    @classmethod
    def rounds_needed(cls, params, n_seats):
        debaters = n_seats - (params.strategy == "simultaneous_talk_with_summarizer")
        per_turn = {"one_by_one": debaters, "simultaneous_talk": 1, "simultaneous_talk_with_summarizer": 2}
        return params.turns * per_turn[params.strategy]

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.case = self.load_case(params)
        self.debaters = [s for s in self.seats if self.roles[s] == "Debater"]
        self.summarizer = next((s for s in self.seats if self.roles[s] == "Summarizer"), None)
        personas = list(personas_of(params).items())
        self.persona = {seat: personas[i] for i, seat in enumerate(self.debaters)}
        self.verdicts: dict[str, list[float]] = {s: [] for s in self.debaters}  # the verdicts each debater gave
        self.first_turn: dict[str, Any] = {}  # each debater's verdict at its first turn (None: it gave none)
        self.schedule = self._schedule()  # speakers of each engine round

    def _schedule(self) -> list[list[str]]:
        rounds: list[list[str]] = []
        for _ in range(self.params.turns):
            if self.params.strategy == "one_by_one":
                rounds += [[d] for d in self.debaters]
            elif self.params.strategy == "simultaneous_talk":
                rounds.append(list(self.debaters))
            else:
                rounds += [list(self.debaters), [self.summarizer]]
        return rounds

    # -- what is debated: a pair of answers here; a subclass may debate something else ------------
    subject = "which of the two answers is better"

    @staticmethod
    def load_case(params) -> Any:
        return pair_of(load_pairs(params.pairs, params.expert_ties), params.case)

    def material(self) -> str:
        c = self.case
        return f"[Question]\n{c.question}\n\n[Answer 1]\n{c.answer_a}\n[End of Answer 1]\n\n[Answer 2]\n{c.answer_b}\n[End of Answer 2]"

    def verdict_format(self) -> str:
        return "your verdict alone on its last line: 'Verdict: 1', 'Verdict: 2' or 'Verdict: tie'" \
            if self.params.output == "choice" else \
            "your scores alone on its last line: 'Scores: X Y' (Answer 1's and Answer 2's score, from 1 to 10)"

    def material_data(self) -> dict[str, Any]:
        return {"question": self.case.question, "answers": [self.case.answer_a, self.case.answer_b]}

    def rules(self, seat: str) -> str:
        if seat == self.summarizer:
            return (f"You follow a debate between reviewers about {self.subject}. After each turn, write a short, "
                    "neutral summary of the arguments and of where each reviewer stands.\n\n" + self.material())
        name, description = self.persona[seat]
        return (f"You are {seat}, a reviewer in a debate, speaking as: {name}. {description} Decide with the others "
                f"{self.subject}; weigh their arguments, but judge for yourself. End each message with "
                f"{self.verdict_format()}.\n\n" + self.material())

    def speakers(self, round: int) -> list[str]:
        return list(self.schedule[round - 1])

    def prompt(self, seat: str, round: int) -> str:
        if seat == self.summarizer:
            return "Summarize this turn of the debate."
        return "Your turn in the debate: give your arguments, then your verdict."

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        if seat == self.summarizer:
            return {"task": Task.SUMMARIZE, **self.material_data()}
        return {"task": Task.DEBATE, **self.material_data(), **self.verdict_data(), "others": self.heard(seat)}

    def heard(self, seat: str) -> dict[str, Any]:
        """The last verdict of every other debater whose words this seat has read: all of them, except
        with a summarizer, whose summary is all a debater reads."""
        if self.summarizer is not None:
            return {}
        return {d: v[-1] for d, v in self.verdicts.items() if d != seat and v}

    def verdict_data(self) -> dict[str, Any]:
        """How a debater is told to give its verdict, in structured form (only debaters are told)."""
        return {"output": self.params.output}

    def hears(self, round: int) -> nx.DiGraph:
        import networkx as nx  # loaded when a match plays: listing the games needs no graph library

        graph = nx.DiGraph()
        graph.add_nodes_from(self.seats)
        if self.params.strategy == "simultaneous_talk_with_summarizer":
            if self.summarizer in self.schedule[round - 1]:
                graph.add_edges_from((self.summarizer, d) for d in self.debaters)  # the summary reaches everyone
            else:
                graph.add_edges_from((d, self.summarizer) for d in self.debaters)  # raw words reach the summarizer only
        else:
            graph.add_edges_from((a, b) for a in self.debaters for b in self.debaters if a != b)
        return graph

    def turn_schema(self, seat: str, round: int) -> dict[str, Any] | None:
        return None if seat == self.summarizer else self.verdict_schema()

    def verdict_schema(self) -> dict[str, Any]:
        """A debater's message as JSON: its arguments, then its verdict (see games/verdicts.py)."""
        return debate_schema(self.params.output)

    def verdict_lines(self, value: dict[str, Any]) -> str:
        """The closing line(s) a debater's JSON verdict stands for, as ``verdict_format`` asks for them."""
        if self.params.output == "choice":
            return f"Verdict: {value['verdict']}"
        return f"Scores: {value['score_1']} {value['score_2']}"

    def reply_text(self, seat: str, round: int, reply: str) -> str:
        if seat == self.summarizer:
            return reply
        return as_text(reply, self.verdict_schema(),
                       lambda value: f"{str(value['argument']).strip()}\n\n{self.verdict_lines(value)}")

    def parse(self, seat: str, reply: str, round: int) -> Any:
        if seat == self.summarizer:
            if not reply.strip():
                raise InvalidReply("The summary is empty.")
            return reply.strip()
        return self.parse_verdict(self.reply_text(seat, round, reply))

    def parse_verdict(self, reply: str) -> Any:
        last = closing_lines(reply)
        line = plain(last[0]) if last else ""
        said = f" Your last line was {shown(last[0])}." if last else " Your message was empty."
        if self.params.output == "choice":
            found = _CHOICE.fullmatch(line)
            if found is None:
                raise InvalidReply("End your message with your verdict alone on its last line: 'Verdict: 1', "
                                   "'Verdict: 2' or 'Verdict: tie'." + said)
            return {"1": -1, "2": 1, "tie": 0}[found.group(1).lower()]
        found = _SCORES.fullmatch(line)
        scores = [float(x) for x in found.groups()] if found else []
        if not scores or not all(1 <= x <= 10 for x in scores):
            raise InvalidReply("End your message with your scores alone on its last line: 'Scores: X Y', two scores "
                               "from 1 to 10." + said)
        return scores[1] - scores[0]  # > 0: answer 2 better

    def default_action(self, seat: str, round: int) -> Any:
        return None  # no verdict (never a tie): a debater's previous verdict, if any, stands

    def example_reply(self, seat: str, round: int) -> str:
        if seat == self.summarizer:
            return example_prose(100, "this turn of the debate")
        first = self.debaters.index(seat) % 2 == 0
        verdict = ("Verdict: 1" if first else "Verdict: 2") if self.params.output == "choice" else \
            ("Scores: 8 6" if first else "Scores: 6 8")
        return f"{example_prose(150, 'the two answers')}\n\n{verdict}"

    def apply(self, round: int, actions: Mapping[str, Any]) -> list[Notice]:
        for seat, value in actions.items():
            if seat not in self.verdicts:
                continue
            self.first_turn.setdefault(seat, value)
            if value is not None:
                self.verdicts[seat].append(value)
        if not self.is_over(round):
            return []
        return [Notice(to=(), text=self.verdict_text(), data=self.summary())]

    def verdict_text(self) -> str:
        return f"Debate verdict: {self.verdict()}."

    def finals(self) -> dict[str, float]:
        return {s: v[-1] for s, v in self.verdicts.items() if v}

    def verdict(self) -> float | None:
        """Majority vote for choices (a tie when no side has most votes), the mean score difference for scores."""
        finals = list(self.finals().values())
        if not finals:
            return None
        if self.params.output == "scores":
            return sum(finals) / len(finals)
        (top, n), *rest = Counter(finals).most_common() + [(None, 0)]
        return top if n > rest[0][1] else 0

    def summary(self) -> dict[str, Any]:
        return {"case": self.case.id, "pair": self.case.id.removesuffix(SWAPPED),
                "swapped": self.case.id.endswith(SWAPPED), "calibrated": self.params.position_calibration,
                "label": self.case.label, "expert_ties": getattr(self.case, "expert_ties", None),
                "strategy": self.params.strategy,
                "output": self.params.output, "finals": self.finals(), "verdict": self.verdict(),
                "firsts": {s: v for s, v in self.first_turn.items() if v is not None},
                "personas": {s: p[0] for s, p in self.persona.items()}, PANEL: self.panel_record(),
                "answers": {self.case.source_a: self.case.answer_a, self.case.source_b: self.case.answer_b}}

    def panel_record(self) -> dict[str, Any]:
        """The debaters as a panel: each one's final verdict and the group's, by the side shown
        better (a debater without a verdict has none), for the members' agreement."""
        options = ["Assistant 1", "Assistant 2"]  # as shown: a swapped match's are the pair's the other way round

        def side(value: float | None) -> str | None:
            return None if value is None else (TIE if value == 0 else options[1 if value > 0 else 0])

        finals = self.finals()
        item = PanelItem(item=self.case.id, options=options, verdict=side(self.verdict()),
                         members={s: side(finals.get(s)) for s in self.debaters})
        rule = "mean" if self.params.output == "scores" else "vote"
        return PanelRecord(name="debaters", rule=rule, members_are="seats", items=[item]).model_dump(mode="json")

    def is_over(self, round: int) -> bool:
        return round >= len(self.schedule)

    def payoffs(self) -> dict[str, float]:
        label, finals = self.case.label, self.finals()
        sign = lambda x: (x > 0) - (x < 0)
        return {s: float(label is not None and s in finals and sign(finals[s]) == label) if s in self.verdicts else 0.0
                for s in self.seats}

    def reviews(self) -> list[Review]:
        """Each debater's final verdict (its score difference, or choice): one sample, in the case's order."""
        c = self.case
        # both orders of a calibrated pair are one question to peer rank, which then sees the position bias
        return [Review(c.id.removesuffix(SWAPPED), c.source_a, c.source_b, seat, (v > 0) - (v < 0), sample=0,
                       order=int(c.id.endswith(SWAPPED)), difference=float(v))
                for seat, v in self.finals().items()]
