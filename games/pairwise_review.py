"""Pairwise review with FairEval's calibration: judges compare contestants' answers to a question.

One match is one question (the tournament plays every question of the set).
Round 1: every contestant answers, privately. Then every judge compares every
pair of answers, each comparison in its own round so that its samples are
independent (a judge is shown only the rules and the comparison at hand):

- templates: verdict first, or evidence first (FairEval's evidence calibration,
  EC: explain, then score);
- output: two scores from 1 to 10, or a choice (1, 2 or tie);
- multiple evidence calibration (MEC): ``samples`` comparisons of each pair;
- balanced position calibration (BPC): each pair shown in both orders
  (``swap``), the verdict being the mean over both orders of each order's mean
  over its samples (with every sample given, the mean of the 2k results);
- balanced position diversity entropy (BPDE): the entropy of those 2k results
  (which side won, or a tie), per judge and pair, reported with the verdicts.

Every comparison, as shown, is one of the game's reviews, with its sample,
its order and the score difference (or choice) the judge gave, so ``arena
rank`` calibrates them as the game does: one verdict per judge and pair, the
one recorded in the match's last, seat-less notice beside its BPDE. A
contestant's payoff is its share of those verdicts won (ties half); a judge's
payoff is 0 (judges are ranked by peer rank's weights, not here).
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Mapping
from functools import lru_cache
from itertools import combinations
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import (AnswersOnce, Game, HasCases, InvalidReply, Notice, PlaysComparisons, ReportsReviews, Review,
                            Task, nobody_hears_anyone, path_field)
from arena.contract.game import example_prose
from arena.contract.panels import PANEL, TIE, PanelItem, PanelRecord, vote

from .closing import plain
from .questions import case_of, load_questions
from .verdicts import as_text, choice_field, object_schema, score_field, text_field

if TYPE_CHECKING:
    import networkx as nx


class PairwiseParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    questions: str = path_field(description="A JSONL question set (id, question), relative to the scenario file.")
    case: str | None = Field(None, description="The question of this match; the tournament sets it.")
    contestants: int = Field(2, ge=0, description="The first seats answer; the others judge (0 with fixed answers).")
    answers: list[str] | None = path_field(
        None,
        description="Fixed answers instead of contestants: JSONL files of {question_id, text} lines, one file per "
        "source, named by its model_id field or the file name (Vicuna80's generations work as they are).",
    )
    peer: bool = Field(False, description="Contestants also judge (PRD's peer review).")
    template: Literal["verdict_first", "evidence_first"] = Field("evidence_first", description="evidence_first: FairEval's EC.")
    output: Literal["scores", "choice"] = Field("scores", description="Two scores from 1 to 10, or 1 / 2 / tie.")
    samples: int = Field(1, ge=1, description="Comparisons of each pair in each order (MEC's k).")
    swap: bool = Field(True, description="Show each pair in both orders (BPC).")
    pair: list[str] | None = Field(
        None, min_length=2, max_length=2,
        description="Only this pair of fixed answers' sources, shown in both orders (an adaptive schedule sets it).")
    answer_only: bool = Field(False, description="One contestant answers the question and nothing is judged (an "
                              "adaptive schedule with live contestants sets it, to ask each answer once).")
    given: dict[str, str] | None = Field(
        None, description="Answers given inline, by contestant name: the pair's kept answers (an adaptive schedule "
        "with live contestants sets it).")
    panel: Literal["vote", "mean"] | None = Field(
        None, description="The judges as one panel: each pair's verdict is their majority (vote) or the sign of their "
        "mean score difference (mean), and the contestants' payoffs count that one verdict per pair.")


_TWO_SCORES = re.compile(r"^\W*(\d+(?:\.\d+)?)\s*(?:,|\s|/|and)\s*(\d+(?:\.\d+)?)\W*$")
# a label before the verdict on its line, as models write one: "Verdict: 2", "**Scores:** 7 8", "Assistant 2"
_LABEL = re.compile(r"^(?:(?:my|final|the)\s+)*(?:(?:verdict|scores?|choice|preference)\s*(?:is\s*)?[:=\-\u2013\u2014]?\s*)?"
                    r"(?:(?:assistant|answer)\s*(?=[12]\b))?", re.IGNORECASE)
_CHOICE = {"1": -1, "2": 1, "tie": 0}  # the verdict from the first-shown answer's side: -1 first better


def entropy(verdicts: list[int]) -> float:
    """BPDE: the entropy (natural log) of the results over first better / tie / second better (-1, 0, 1)."""
    counts = Counter(verdicts)
    total = len(verdicts)
    return -sum(n / total * math.log(n / total) for n in counts.values()) + 0.0


def _sign(value: float) -> int:
    return 0 if abs(value) < 1e-12 else (1 if value > 0 else -1)


class PairwiseReview(Game, HasCases, ReportsReviews, PlaysComparisons, AnswersOnce):
    description = "Judges compare answers pair by pair; FairEval's calibrations (EC, MEC, BPC, BPDE)."
    Params = PairwiseParams
    min_seats = 1  # one judge of fixed answers; seat_problem says what contestants and judges need
    rotating_roles = ("Contestant",)  # a role swap reorders the contestants; judges stay judges
    answers_field = "answers"  # the last notice's answers, by seat or source: style control measures them

    @classmethod
    def seat_roles(cls, params: PairwiseParams, n_seats: int) -> list[str]:
        return ["Contestant"] * min(params.contestants, n_seats) + ["Judge"] * max(0, n_seats - params.contestants)

    @classmethod
    def seat_problem(cls, params: PairwiseParams, n_seats: int) -> str | None:
        if params.answer_only:
            if params.answers is not None or params.given is not None or params.contestants != 1 or n_seats != 1:
                return "answer_only seats one live contestant alone: contestants: 1, one seat, no fixed answers"
            return None
        if params.given is not None:
            if params.answers is not None or params.contestants or params.pair is None:
                return "given answers are compared as a pair: set pair, contestants: 0 and no answers files"
            missing = [name for name in params.pair if name not in params.given]
            if missing or params.pair[0] == params.pair[1]:
                return f"pair names two different contestants of the given answers; it names {', '.join(params.pair)}"
            if not params.swap:
                return "a single pair is always shown in both orders: remove swap: false"
            if params.panel is not None and n_seats < 2:
                return f"a panel needs two judges or more; this match has {n_seats}"
            return None
        if params.answers is not None:
            if params.contestants:
                return "with fixed answers every seat judges: set contestants: 0"
            if len(params.answers) < 2:
                return "fixed answers need at least two sources (files) to compare"
            sources = fixed_answers(tuple(params.answers))  # read now, so a bad file is reported before play
            if params.pair is not None:
                unknown = [name for name in params.pair if name not in sources]
                if unknown or params.pair[0] == params.pair[1]:
                    return (f"pair names two different sources of the answers ({', '.join(sources)}); "
                            f"it names {', '.join(params.pair)}")
                if not params.swap:  # both orders in one match, or position bias goes uncalibrated
                    return "a single pair is always shown in both orders: remove swap: false"
            if params.panel is not None and n_seats < 2:
                return f"a panel needs two judges or more; this match has {n_seats}"
            return None
        if params.pair is not None:
            return "pair chooses two sources of fixed answers: give `answers` too"
        if params.contestants < 2:
            return "set contestants to 2 or more, or give fixed answers"
        if n_seats < params.contestants:
            return f"{params.contestants} contestants need at least {params.contestants} seats; there are {n_seats}"
        if n_seats == params.contestants and not params.peer:
            return "no seat is left to judge: add judges, or set peer: true so contestants judge each other"
        judges = n_seats - params.contestants + (params.contestants if params.peer else 0)
        if params.panel is not None and judges < 2:
            return f"a panel needs two judges or more; this match has {judges}"
        return None

    @classmethod
    def cases(cls, params: PairwiseParams) -> list[str]:
        return list(load_questions(params.questions))

    @classmethod
    def compared(cls, params: PairwiseParams) -> list[str] | None:
        # live contestants: an adaptive schedule asks each one alone (answer_only), then compares kept answers
        return None if params.answers is None else list(fixed_answers(tuple(params.answers)))

    @classmethod
    def comparison(cls, params: PairwiseParams, first: str, second: str) -> dict[str, Any]:
        return {"pair": [first, second], "swap": True}

    @classmethod
    def answering(cls, params: PairwiseParams, agents: list[str]) -> tuple[list[str], list[str]] | None:
        if params.answers is not None or params.given is not None or params.answer_only:
            return None
        contestants = list(agents[:params.contestants])  # the first seats answer, as at a table of every agent
        judges = list(agents[params.contestants:])
        return contestants, (contestants + judges if params.peer else judges)

    @classmethod
    def answer_only(cls, params: PairwiseParams) -> dict[str, Any]:
        return {"answer_only": True, "contestants": 1, "peer": False, "panel": None}

    @classmethod
    def comparing(cls, params: PairwiseParams, first: str, second: str, texts: Mapping[str, str]) -> dict[str, Any]:
        return {"pair": [first, second], "swap": True, "contestants": 0, "peer": False,
                "given": {first: texts[first], second: texts[second]}}

    @classmethod
    def rounds_needed(cls, params, n_seats):
        if params.answer_only:
            return 1
        sources = len(params.answers) if params.answers is not None else min(params.contestants, n_seats)
        sources = 2 if params.pair is not None else sources
        pairs = sources * (sources - 1) // 2
        return 1 + pairs * (2 if params.swap else 1) * params.samples  # answers, then one round per comparison

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.question = case_of(load_questions(params.questions), params.case)
        self.contestants = [s for s in self.seats if self.roles[s] == "Contestant"]
        self.judges = [s for s in self.seats if self.roles[s] == "Judge"] + (self.contestants if params.peer else [])
        self.answers: dict[str, str] = {}  # by seat, or by source name for fixed answers
        self.fixed = None
        if params.answers is not None:
            self.fixed = {source: texts.get(self.question.id, "") for source, texts in fixed_answers(tuple(params.answers)).items()
                          if params.pair is None or source in params.pair}
        if params.given is not None:  # kept answers of live contestants, by name: judged as fixed ones are
            self.fixed = {name: params.given[name] for name in params.pair}
        sources = list(self.fixed) if self.fixed is not None else self.contestants
        if params.pair is not None:  # one chosen comparison: that pair alone, in the order given
            sources = list(params.pair)
        if params.answer_only:  # the answer is the match: nothing is compared
            sources = []
        orders = (0, 1) if params.swap else (0,)
        # (pair, order, sample): order 0 shows the pair's first contestant first
        self.tasks = [(pair, order, k) for pair in combinations(sources, 2) for order in orders
                      for k in range(params.samples)]
        self.results: dict[tuple[str, tuple[str, str]], list[float | None]] = {}  # per judge and pair, from the pair's side
        self.given: dict[tuple[str, tuple[str, str]], list[tuple[int, int]]] = {}  # each result's (order, sample)

    # -- what seats are told and asked ------------------------------------------------
    def rules(self, seat: str) -> str:
        if self.roles[seat] == "Contestant" and seat not in self.judges:
            return f"You are {seat}. You will be asked a question; answer it as well as you can."
        text = (f"You are {seat}, a careful and impartial reviewer. You will be shown a question and two answers to "
                "it, from Assistant 1 and Assistant 2, and asked which is better: more helpful, relevant, accurate "
                "and appropriately detailed. The order in which they are shown says nothing about their quality, "
                "and neither does their length.")
        if seat in self.contestants:
            text = f"You are {seat}. First you answer a question; later you review pairs of answers to it.\n" + text
        return text

    def _task(self, round: int):
        return self.tasks[round - 2]

    def _shown(self, round: int) -> tuple[str, str]:
        (a, b), order, _ = self._task(round)
        return (a, b) if order == 0 else (b, a)

    def speakers(self, round: int) -> list[str]:
        return list(self.contestants) if round == 1 else list(self.judges)

    def prompt(self, seat: str, round: int) -> str:
        if round == 1:
            return f"Question: {self.question.question}\n\nWrite your answer."
        first, second = (self.answers[s] or "(no answer)" for s in self._shown(round))
        p = self.params
        verdict = ("two scores from 1 to 10, for Assistant 1 and then Assistant 2, separated by a space"
                   if p.output == "scores" else "1 if Assistant 1's answer is better, 2 if Assistant 2's is, or tie")
        if p.template == "verdict_first":
            how = f"On the first line write only {verdict}. Then explain your judgement."
        else:
            how = (f"First explain, point by point, what each answer does well and badly. Then, on the last line, "
                   f"write only {verdict}.")
        return (f"[Question]\n{self.question.question}\n\n[Assistant 1]\n{first}\n[End of Assistant 1]\n\n"
                f"[Assistant 2]\n{second}\n[End of Assistant 2]\n\n{how}")

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        # only what the prompt says: the question's id and category are not shown to a model, so not given here
        q = self.question
        if round == 1:
            return {"task": Task.ANSWER, "question": q.question}
        return {"task": Task.JUDGE, "question": q.question, "answers": [self.answers[s] for s in self._shown(round)],
                "output": self.params.output, "template": self.params.template}

    def turn_schema(self, seat: str, round: int) -> dict[str, Any] | None:
        return None if round == 1 else verdict_schema(self.params.output, self.params.template)

    def reply_text(self, seat: str, round: int, reply: str) -> str:
        if round == 1:
            return reply
        p = self.params

        def render(value: dict[str, Any]) -> str:
            verdict = (f"{value['score_1']} {value['score_2']}" if p.output == "scores" else str(value["choice"]))
            explanation = str(value["explanation"]).strip()
            return f"{verdict}\n{explanation}" if p.template == "verdict_first" else f"{explanation}\n{verdict}"

        return as_text(reply, verdict_schema(p.output, p.template), render)

    def history(self, seat: str, round: int, messages: tuple) -> tuple:
        return tuple(m for m in messages if m.kind == "rules")  # every comparison stands alone

    def hears(self, round: int) -> nx.DiGraph:
        return nobody_hears_anyone(self.seats)

    # -- replies ----------------------------------------------------------------------
    def parse(self, seat: str, reply: str, round: int) -> Any:
        if round == 1:  # the contestants' answers
            if not reply.strip():
                raise InvalidReply("Your answer is empty. Write an answer to the question.")
            return reply.strip()
        lines = [line.strip() for line in self.reply_text(seat, round, reply).strip().splitlines() if line.strip()]
        if not lines:
            raise InvalidReply("Your review is empty.")
        line = _LABEL.sub("", plain(lines[0] if self.params.template == "verdict_first" else lines[-1]))
        where = "first" if self.params.template == "verdict_first" else "last"
        if self.params.output == "choice":
            choice = line.strip(" .*").lower()
            if choice not in _CHOICE:
                raise InvalidReply(f"The {where} line must be only 1, 2 or tie; it was {line!r}.")
            return {"choice": choice, "difference": _CHOICE[choice]}
        match = _TWO_SCORES.match(line)
        scores = [float(match.group(1)), float(match.group(2))] if match else []
        if not scores or not all(1 <= s <= 10 for s in scores):
            raise InvalidReply(f"The {where} line must be only two scores from 1 to 10 separated by a space; it was {line!r}.")
        return {"scores": scores, "difference": scores[1] - scores[0]}  # > 0: the second shown is better

    def default_action(self, seat: str, round: int) -> Any:
        return "" if round == 1 else None  # no answer; or no verdict, left out of the calibration

    def example_reply(self, seat: str, round: int) -> str:
        if round == 1:
            return example_prose(200, "the question")
        verdict = "7 8" if self.params.output == "scores" else "2"
        evidence = example_prose(120, "the two answers")
        return f"{verdict}\n{evidence}" if self.params.template == "verdict_first" else f"{evidence}\n{verdict}"

    def apply(self, round: int, actions: Mapping[str, Any]) -> list[Notice]:
        if round == 1:
            self.answers = dict(self.fixed) if self.fixed is not None else {seat: actions[seat] for seat in self.contestants}
            if self.params.answer_only:  # kept for the comparisons to come; an empty (defaulted) answer is none
                kept = {seat: text for seat, text in self.answers.items() if text}
                said = "answered" if kept else "gave no answer to"
                return [Notice(to=(), text=f"The contestant {said} question {self.question.id}.",
                               data={"question": self.question.id, "question_text": self.question.question,
                                     "answers": kept})]
            return []
        (a, b), order, sample = self._task(round)
        for judge in self.judges:
            action = actions.get(judge)
            value = None if action is None else action["difference"] * (1 if order == 0 else -1)  # back to (a, b)'s side
            self.results.setdefault((judge, (a, b)), []).append(value)
            self.given.setdefault((judge, (a, b)), []).append((order, sample))
        if round < 1 + len(self.tasks):
            return []
        summary = [{"judge": j, "pair": list(pair), "results": r, "orders": [o for o, _ in self.given[(j, pair)]],
                    "verdict": self._verdict(r, self.given[(j, pair)]), "bpde": self._bpde(r)}
                   for (j, pair), r in self.results.items()]
        # the answers judged, by seat (or by source, for fixed answers, in the scenario's order): for people to judge too
        data = {"question": self.question.id, "question_text": self.question.question, "verdicts": summary,
                "answers": dict(self.answers)}
        text = f"{len(summary)} calibrated verdicts on question {self.question.id}."
        if self.params.panel is not None:
            data[PANEL] = self._panel_record().model_dump(mode="json")
            text += f" The judges' panel ({self.params.panel}) decided each pair."
        return [Notice(to=(), text=text, data=data)]

    def _pairs(self) -> list[tuple[str, str]]:
        return list(dict.fromkeys(pair for _, pair in self.results))

    def _panel_verdict(self, pair: tuple[str, str]) -> int | None:
        """The judges' one verdict on a pair (+1: its second is better): the majority of their
        calibrated verdicts, or the sign of the mean of their calibrated score differences."""
        found = {j: self._calibrated(self.results[(j, pair)], self.given[(j, pair)]) for j in self.judges
                 if (j, pair) in self.results}
        given = [v for v in found.values() if v is not None]
        if not given:
            return None
        if self.params.panel == "mean":
            return _sign(sum(given) / len(given))
        said = vote({j: None if v is None else str(_sign(v)) for j, v in found.items()})
        return None if said is None else (0 if said == TIE else int(said))

    def _panel_record(self) -> PanelRecord:
        def named(pair: tuple[str, str], verdict: int | None) -> str | None:
            return None if verdict is None else (TIE if verdict == 0 else pair[(verdict + 1) // 2])

        items = [PanelItem(item=str(self.question.id), options=list(pair), verdict=named(pair, self._panel_verdict(pair)),
                           members={j: named(pair, self._verdict(self.results[(j, pair)], self.given[(j, pair)]))
                                    for j in self.judges if (j, pair) in self.results})
                 for pair in self._pairs()]
        return PanelRecord(name="judges", rule=self.params.panel, members_are="seats", items=items)

    @classmethod
    def _verdict(cls, results: list[float | None], given: list[tuple[int, int]]) -> int | None:
        """The sign of the calibrated score difference: the verdict (+1: the pair's second is better)."""
        value = cls._calibrated(results, given)
        return None if value is None else _sign(value)

    @staticmethod
    def _calibrated(results: list[float | None], given: list[tuple[int, int]]) -> float | None:
        """MEC then BPC: each order's mean over its samples, then the mean of the orders' means,
        of the score differences (or choices). Both orders weigh the same even when a sample is
        missing, so a judge's lean towards one position cancels out."""
        by_order: dict[int, list[float]] = {}
        for value, (order, _) in zip(results, given):
            if value is not None:
                by_order.setdefault(order, []).append(value)
        if not by_order:
            return None
        return sum(sum(v) / len(v) for v in by_order.values()) / len(by_order)

    @staticmethod
    def _bpde(results: list[float | None]) -> float | None:
        given = [_sign(r) for r in results if r is not None]
        return entropy(given) if given else None

    def is_over(self, round: int) -> bool:
        return round >= 1 + len(self.tasks)

    def payoffs(self) -> dict[str, float]:
        """Contestant seats: their share of comparisons won (with a panel, of the panel's one verdict
        per pair); judges (and fixed-answer runs): 0."""
        if self.params.answer_only:
            return {}  # an answer alone wins nothing: it is scored in the comparisons that show it
        won, met = Counter(), Counter()
        if self.params.panel is not None:
            decided = [(pair, self._panel_verdict(pair)) for pair in self._pairs()]
        else:
            decided = [(pair, self._verdict(results, self.given[(j, pair)])) for (j, pair), results in self.results.items()]
        for (a, b), verdict in decided:
            if verdict is None:
                continue
            won[a] += (1 - verdict) / 2
            won[b] += (1 + verdict) / 2
            met[a] += 1
            met[b] += 1
        return {s: (won[s] / met[s] if met[s] else 0.0) if self.roles[s] == "Contestant" else 0.0 for s in self.seats}


    def reviews(self) -> list[Review]:
        """Every comparison as it was shown (A: the answer shown first), with its sample, its order
        (0: the pair's own, 1: swapped) and the judge's score difference (or choice) in the
        review's direction: peer rank averages them into the notice's verdicts, and its bias
        diagnostics see each order on its own. A comparison without a valid verdict is left out."""
        out = []
        for key, results in self.results.items():
            judge, (a, b) = key
            for value, (order, sample) in zip(results, self.given[key]):
                if value is None:
                    continue
                first, second, shown = (a, b, value) if order == 0 else (b, a, -value)
                out.append(Review(self.question.id, first, second, judge, _sign(shown), sample=sample, order=order,
                                  difference=shown + 0.0))
        return out


@lru_cache(maxsize=4)
def verdict_schema(output: str, template: str) -> dict[str, Any]:
    """A comparison's reply as JSON: the explanation, then the verdict (the other way round for
    verdict_first); shared, do not modify it."""
    explanation = ("explanation", text_field("What each answer does well and badly, point by point."))
    if output == "scores":
        verdict = [("score_1", score_field("Assistant 1's score, from 1 to 10.", 1, 10)),
                   ("score_2", score_field("Assistant 2's score, from 1 to 10.", 1, 10))]
    else:
        verdict = [("choice", choice_field("1 if Assistant 1's answer is better, 2 if Assistant 2's is, or tie.",
                                           ["1", "2", "tie"]))]
    fields = [*verdict, explanation] if template == "verdict_first" else [explanation, *verdict]
    return object_schema("Verdict", fields)


@lru_cache(maxsize=16)
def fixed_answers(paths: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """Source name -> question id -> answer text, from one JSONL file per source."""
    sources: dict[str, dict[str, str]] = {}
    for path in paths:
        file = Path(path).expanduser()
        if not file.is_file():
            raise ValueError(f"no answers file at {file}")
        texts, name = {}, None
        for number, line in enumerate(file.read_text(encoding="utf-8").splitlines(), start=1):
            if not line.strip():
                continue
            try:
                raw = json.loads(line)
                texts[str(raw["question_id"])] = str(raw["text"])
            except (ValueError, KeyError, TypeError):
                raise ValueError(f"{file}, line {number}: expected an object with question_id and text") from None
            name = name or raw.get("model_id")
        name = name or file.stem.removeprefix("answer_")
        if name in sources:
            raise ValueError(f"{file}: a second file of answers by {name!r}")
        sources[name] = texts
    return sources
