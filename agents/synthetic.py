"""Synthetic contestants and judges whose true quality and biases are known.

They exist to test judging methods: a contestant's answers encode its hidden
quality in a form a synthetic judge reads back exactly, and a judge adds known
amounts of position, length and self bias plus Gaussian noise. Because the truth
is a parameter, a bench can score any aggregation method against it.

How an answer looks (every part on its own line)::

    Here is my answer to "<question>".
    Point 1. <a sentence about the question>
    ...
    Point k. <...>                      # k = round(10 * quality) distinct points
    <filler sentences, as one paragraph> # about 250 x ``verbosity`` words in all
    <signature line>                    # the persona's ``style``

A reader recovers the quality by counting the distinct ``Point <n>.`` line
openings (see :func:`perceived_quality`), so quality is resolved in steps of 0.1.

Which class to configure:

* ``synthetic_contestant`` only writes answers. Asked to judge, it declines in a
  short line that no judging game will accept.
* ``synthetic_judge`` judges *and* answers (with its own ``quality``,
  ``verbosity``, ``name`` and ``style``), so one scripted agent can sit in a peer
  review as both author and reviewer, and its self-preference then applies to
  exactly the signature it writes.

In a discussion or a debate a judge reads the material once per match: its noisy
reading is drawn from the match and its seat, not from the turn, so it does not
change its mind by chance. It changes it by persuasion (``openness``: adopting a
different view the other reviewer states; in a debate, the majority or the mean
of the debaters it has heard) or, once the two reviewers agree, by going back to
its own reading (``reconsider``), which is PRD's post-agreement opinion altering.

Single responses to a dialogue (ChatEval's Topical-Chat setting) are scored per
dimension from what the text shows (see :func:`read_response`): whether the reply
picks up the last turn (coherence), uses the given fact (groundedness), brings
something new or asks back (engagingness), and is of a conversational length
without repeating itself (naturalness).
"""

from __future__ import annotations

import hashlib
import math
import random
import re
from collections import Counter
from typing import Any

from pydantic import Field

from arena.contract import Strategy, StrategyParams, Task, Turn


MAX_POINTS = 10
# Target answer length, in words, at verbosity 1 (signature line not counted).
WORDS_PER_VERBOSITY = 250
WORDS_PER_LENGTH_UNIT = 100

_POINT_LINE = re.compile(r"^\s*Point (\d+)\.\s", re.MULTILINE)

_POINT_TEMPLATES = (
    "Any serious take on {topic} has to begin by naming the assumptions it rests on.",
    "A concrete example makes {topic} much easier to reason about than an abstract rule.",
    "The strongest objection to the obvious view of {topic} deserves a direct reply.",
    "For {topic}, the edge cases show where the usual reasoning stops holding.",
    "Evidence about {topic} should be weighed by how it was gathered, not just by what it says.",
    "The costs and benefits around {topic} fall on different people, and that matters.",
    "Thinking about {topic} over a longer time span changes which option looks best.",
    "A simple check of {topic} against known cases catches most of the common mistakes.",
    "The terms used in {topic} need to be pinned down before anything can be compared.",
    "What would change my mind about {topic} is worth stating plainly.",
    "Treating {topic} in isolation hides how it interacts with nearby questions.",
    "The answer to {topic} depends on scale: what holds for a few cases may fail for many.",
)

_FILLER = (
    "This is an interesting question and there is a lot one could say about it.",
    "Many people have thought about matters like this over the years.",
    "It is worth keeping an open mind when considering something like this.",
    "Of course, reasonable people can see it differently.",
    "There are several ways of looking at it, each with its own appeal.",
    "In the end, much depends on the particular circumstances involved.",
    "It is a topic that comes up surprisingly often in everyday conversation.",
    "One should always be careful not to oversimplify things.",
    "That said, it is good to approach the matter step by step.",
    "Context matters a great deal here, as it does almost everywhere.",
    "I hope this gives a useful overall picture of the issue.",
    "Further reading on the subject can be rewarding for the curious.",
)

_ADJECTIVES = (
    "amber", "brisk", "candid", "dusky", "earnest", "frank", "gentle", "hollow",
    "idle", "jovial", "keen", "lucid", "mellow", "nimble", "quiet", "rustic",
)
_NOUNS = (
    "lantern", "harbour", "meadow", "compass", "orchard", "beacon", "ledger", "quill",
    "thicket", "anvil", "glacier", "pylon", "saddle", "trellis", "violin", "willow",
)


# ---------------------------------------------------------------- parameters


class SyntheticContestantParams(StrategyParams):
    quality: float = Field(
        ge=0, le=1,
        description="The hidden true quality of every answer: round(10 * quality) key points are written.",
    )
    verbosity: float = Field(
        1.0, ge=0,
        description=(
            f"Answer length, independent of quality: filler sentences are added after the key points until"
            f" the answer reaches {WORDS_PER_VERBOSITY} x verbosity words (none if the points alone reach it)."
        ),
    )
    verbosity_spread: float = Field(
        0.0, ge=0, le=1,
        description=(
            "How much the length varies from answer to answer: each answer's verbosity is drawn uniformly from"
            " verbosity x [1 - spread, 1 + spread] (0: every answer near the same length)."
        ),
    )
    name: str = Field(
        "",
        description="A label that only seeds the default signature; give each persona a different one.",
    )
    style: str | None = Field(
        None,
        description=(
            "The signature line closing every answer. Default: a phrase derived from `name` and `quality`"
            " (see `signature`)."
        ),
    )


class SyntheticJudgeParams(SyntheticContestantParams):
    quality: float = Field(
        0.5, ge=0, le=1,
        description="Quality of the answers this persona writes when it is asked to answer.",
    )
    skill: float = Field(
        0.0, ge=0,
        description="Standard deviation of the Gaussian error added to each perceived quality; 0 is a perfect reader.",
    )
    position_bias: float = Field(
        0.0,
        description="Added to the perceived quality of the answer shown first (quality units; may be negative).",
    )
    verbosity_bias: float = Field(
        0.0,
        description=(
            f"Added per {WORDS_PER_LENGTH_UNIT} words of answer length above `reference_words`"
            " (subtracted below it)."
        ),
    )
    reference_words: int = Field(
        WORDS_PER_VERBOSITY, ge=0,
        description="Answer length, in words, at which the verbosity bonus is zero.",
    )
    self_preference: float = Field(
        0.0,
        description="Added to the perceived quality of an answer that carries this persona's own signature line.",
    )
    openness: float = Field(
        0.3, ge=0, le=1,
        description=("Peer discussion: the chance, at a turn, of adopting the other reviewer's preference when it"
                     " differs. A debate: the chance of coming round to the debaters it has heard."),
    )
    reconsider: float = Field(
        0.0, ge=0, le=1,
        description=("Peer discussion: the chance, at a turn after the two agreed, of going back to its own reading"
                     " when that differs from what they agreed on."),
    )
    tie_margin: float = Field(
        0.05, ge=0,
        description="When asked to choose, a perceived difference smaller than this is called a tie.",
    )


# ---------------------------------------------------------------- helpers anyone may use


def true_quality(params: SyntheticContestantParams | dict[str, Any]) -> float:
    """The hidden quality behind a persona's answers, as a judge with skill 0 reads it."""
    if isinstance(params, dict):
        params = SyntheticJudgeParams.model_validate(params)
    return round(MAX_POINTS * params.quality) / MAX_POINTS


def signature(params: SyntheticContestantParams | dict[str, Any]) -> str:
    """The line a persona signs its answers with: its ``style``, or one derived from name and quality."""
    if isinstance(params, dict):
        params = SyntheticJudgeParams.model_validate(params)
    if params.style is not None:
        return params.style.strip()
    digest = hashlib.sha256(f"{params.name}|{params.quality:.6f}".encode()).digest()
    adjective = _ADJECTIVES[digest[0] % len(_ADJECTIVES)]
    noun = _NOUNS[digest[1] % len(_NOUNS)]
    number = int.from_bytes(digest[2:4], "big") % 1000
    return f"Signed, the {adjective} {noun} of desk {number:03d}."


def count_points(text: str) -> int:
    """How many distinct key points (``Point <n>.`` line openings, n from 1 to 10) a text has."""
    found = {int(n) for n in _POINT_LINE.findall(text)}
    return len({n for n in found if 1 <= n <= MAX_POINTS})


def perceived_quality(text: str) -> float:
    """The quality a bias-free, noise-free reader sees in an answer: its key points over 10."""
    return count_points(text) / MAX_POINTS


def word_count(text: str) -> int:
    return len(text.split())


def has_signature(text: str, sig: str) -> bool:
    """Whether one of the text's lines is exactly the signature (surrounding spaces ignored)."""
    sig = sig.strip()
    return bool(sig) and any(line.strip() == sig for line in text.splitlines())


def _topic(question: str) -> str:
    words = question.split()
    short = " ".join(words[:8]) + (" ..." if len(words) > 8 else "")
    short = short.rstrip(" ?.!:;")
    return f'"{short}"' if short else "this question"


def write_answer(params: SyntheticContestantParams, question: str, rng: random.Random) -> str:
    """An answer carrying ``round(10 * quality)`` key points, filler per verbosity, and the signature."""
    points = round(MAX_POINTS * params.quality)
    verbosity = params.verbosity
    if params.verbosity_spread:  # drawn only then, so answers without a spread are what they always were
        verbosity *= 1 + params.verbosity_spread * (2 * rng.random() - 1)
    target = round(WORDS_PER_VERBOSITY * verbosity)
    topic = _topic(question)
    templates = rng.sample(_POINT_TEMPLATES, points)
    lines = [f"Here is my answer to {topic}."]
    lines += [f"Point {i}. {template.format(topic=topic)}" for i, template in enumerate(templates, 1)]
    words = sum(word_count(line) for line in lines)
    filler: list[str] = []
    deck: list[str] = []
    while words < target:
        if not deck:  # go through every filler sentence, in a fresh order, before repeating any
            deck = rng.sample(_FILLER, len(_FILLER))
        filler.append(deck.pop())
        words += word_count(filler[-1])
    if filler:
        lines.append(" ".join(filler))
    sig = signature(params)
    if sig:
        lines.append(sig)
    return "\n".join(lines)


def _answer_turn(params: SyntheticContestantParams, data: dict[str, Any], rng: random.Random) -> str:
    question = data.get("question")
    if not isinstance(question, str) or not question.strip():
        return "I was asked to answer, but no question came with the request."
    return write_answer(params, question, rng)


_PREFERENCE = re.compile(r"Preference: (1|2|tie)\s*$")
_CODE = {-1: "1", 0: "tie", 1: "2"}
_WORD = re.compile(r"[a-z']+")
_STOPWORDS = frozenset(
    "about after again also been before being could does doing from have having here into just know like more most "
    "much only other over really some such than that their them then there these they thing think this those very "
    "want well were what when where which while will with would your yours".split())
DIMENSION_READERS = ("naturalness", "coherence", "engagingness", "groundedness")


def _content(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 4 and w not in _STOPWORDS}


def read_response(context: list[str], response: str, fact: str | None) -> dict[str, float]:
    """What a bias-free reader sees in a dialogue response, per dimension, from 0 to 1."""
    own, last, said = _content(response), _content(context[-1] if context else ""), _content(" ".join(context))
    words = _WORD.findall(response.lower())
    n = len(words)
    natural = 1.0 if 5 <= n <= 30 else (n / 5 if n < 5 else max(0.0, 1 - (n - 30) / 30))
    repeats = max((words.count(w) for w in own), default=0)
    natural = max(0.0, natural - (0.4 if repeats >= 3 else 0.0))
    grounded = 0.5 if not fact else min(1.0, len(own & _content(fact)) / max(1, min(4, len(_content(fact)))))
    return {
        "naturalness": natural,
        "coherence": min(1.0, (2 * len(own & last) + len(own & said)) / 5),
        "engagingness": min(1.0, 0.5 * ("?" in response) + len(own - said) / 10),
        "groundedness": grounded,
    }


def _round_score(perceived: float) -> int:
    """A perceived quality on the 1-10 scale: 10 x quality rounded half up, clamped (0 and 0.1 both give 1)."""
    return max(1, min(MAX_POINTS, math.floor(MAX_POINTS * perceived + 0.5)))


# ---------------------------------------------------------------- strategies


class SyntheticContestant(Strategy):
    """Answers every question at a fixed hidden quality; declines to judge."""

    Params = SyntheticContestantParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        data = turn.prompt_data or {}
        if data.get("task") == Task.ANSWER:
            return _answer_turn(self.params, data, rng)
        if data.get("task") == Task.JUDGE:
            return "I only write answers; I do not judge them."
        return "I have nothing to say to that."


class SyntheticJudge(Strategy):
    """Judges pairs of answers with known noise and biases, and answers questions like a contestant."""

    Params = SyntheticJudgeParams

    def reply(self, turn: Turn, rng: random.Random) -> str:
        data = turn.prompt_data or {}
        if data.get("task") == Task.ANSWER:
            return _answer_turn(self.params, data, rng)
        if data.get("task") == Task.JUDGE:
            return self.judge(data, rng)
        if data.get("task") in (Task.REVIEW, Task.DISCUSS):
            return self.discuss(data, turn, rng)
        if data.get("task") == Task.DEBATE:
            return self.debate(data, turn, rng)
        if data.get("task") == Task.SCORE:
            return self.score(data, turn, rng)
        if data.get("task") == Task.SUMMARIZE:
            return "The reviewers weighed how many distinct points each answer makes."
        return "I have nothing to say to that."

    @staticmethod
    def _reading(turn: Turn) -> random.Random:
        """The noise of this seat's reading of the match's material: the same at every turn."""
        return random.Random(f"{turn.match}|{turn.seat}")

    def _choose(self, first: float, second: float) -> str:
        return "tie" if abs(first - second) < self.params.tie_margin else ("1" if first > second else "2")

    def discuss(self, data: dict[str, Any], turn: Turn, rng: random.Random) -> str:
        """Peer discussion: a review ending in 'Preference: 1|2|tie'. At a turn of the discussion it
        adopts a different view the other reviewer states with probability ``openness`` (else it
        holds what it said last); once they agree, it goes back to its own reading with
        probability ``reconsider``."""
        answers = data.get("answers")
        if not isinstance(answers, (list, tuple)) or len(answers) != 2:
            return "I need exactly two answers to compare."
        answers = [a if isinstance(a, str) else "" for a in answers]
        own = self._choose(*self.perceive(answers, self._reading(turn)))
        reasons = f"Answer 1 makes {count_points(answers[0])} points, answer 2 makes {count_points(answers[1])}."
        others = list((data.get("others") or {}).values())
        if data.get("task") != Task.DISCUSS or not others:
            return f"{reasons}\nPreference: {own}"
        mine = [m.content for m in turn.history if m.sender == turn.seat and m.kind == "reply"]
        said = next((found.group(1) for text in reversed(mine) if (found := _PREFERENCE.search(text))), own)
        other = _CODE.get(others[0], said)
        if other != said:
            if rng.random() < self.params.openness:
                return f"Your arguments convince me.\nPreference: {other}"
            return f"{reasons} I keep my view.\nPreference: {said}"
        if own != said and rng.random() < self.params.reconsider:
            return f"On reflection I go back to my first reading. {reasons}\nPreference: {own}"
        return f"We agree.\nPreference: {said}"

    def debate(self, data: dict[str, Any], turn: Turn, rng: random.Random) -> str:
        """ChatEval's debate over two answers: its own reading, or, with probability ``openness``,
        the view of the debaters it has heard (their majority choice, or half way to their mean
        score difference)."""
        answers = data.get("answers")
        if not isinstance(answers, (list, tuple)) or len(answers) != 2:
            return "I need exactly two answers to compare."
        first, second = self.perceive([a if isinstance(a, str) else "" for a in answers], self._reading(turn))
        others = [v for v in (data.get("others") or {}).values() if isinstance(v, (int, float))]
        swayed = bool(others) and rng.random() < self.params.openness
        if data.get("output") == "scores":
            one, two = _round_score(first), _round_score(second)
            if swayed:  # keep its score of answer 1; answer 2's moves so the gap is half way to the others' mean gap
                two = max(1, min(MAX_POINTS, round(one + ((two - one) + sum(others) / len(others)) / 2)))
            return f"{'The others make a fair point.' if swayed else 'My reading of the two answers.'}\nScores: {one} {two}"
        verdict = self._choose(first, second)
        if swayed:
            (top, n), *rest = Counter(_CODE[int(v)] for v in others).most_common() + [(None, 0)]
            verdict = top if n > rest[0][1] else verdict
        return f"{'The others make a fair point.' if swayed else 'My reading of the two answers.'}\nVerdict: {verdict}"

    def score(self, data: dict[str, Any], turn: Turn, rng: random.Random) -> str:
        """A dialogue response scored on each dimension asked for, on the scale asked for: what
        :func:`read_response` sees, with this judge's noise (``skill``, on that 0 to 1 reading);
        with probability ``openness``, half way to the mean of the scores it has heard."""
        context, response, dimensions = data.get("context"), data.get("response"), data.get("dimensions")
        low, high = data.get("scale") or (1, 5)
        if not isinstance(response, str) or not isinstance(context, list) or not dimensions:
            return "I need the dialogue, the response and what to score it on."
        seen = read_response([str(c) for c in context], response, data.get("fact"))
        others = [v for v in (data.get("others") or {}).values() if isinstance(v, dict)]
        swayed = bool(others) and rng.random() < self.params.openness
        noise = self._reading(turn)
        lines = []
        for dimension in dimensions:
            value = seen.get(str(dimension).lower(), sum(seen.values()) / len(seen))
            value += noise.gauss(0.0, self.params.skill) if self.params.skill > 0 else 0.0
            own = low + value * (high - low)
            heard = [o[dimension] for o in others if isinstance(o.get(dimension), (int, float))]
            if swayed and heard:
                own = (own + sum(heard) / len(heard)) / 2
            lines.append(f"{dimension}: {max(low, min(high, math.floor(own + 0.5)))}")
        return ("The others make a fair point.\n" if swayed else "My reading of the response.\n") + "\n".join(lines)

    def perceive(self, answers: list[str], rng: random.Random) -> list[float]:
        """Perceived quality of each answer, in display order, biases and noise included."""
        p = self.params
        sig = signature(p)
        seen = []
        for position, text in enumerate(answers):
            value = perceived_quality(text)
            if position == 0:
                value += p.position_bias
            value += p.verbosity_bias * (word_count(text) - p.reference_words) / WORDS_PER_LENGTH_UNIT
            if has_signature(text, sig):
                value += p.self_preference
            value += rng.gauss(0.0, p.skill) if p.skill > 0 else 0.0
            seen.append(value)
        return seen

    def judge(self, data: dict[str, Any], rng: random.Random) -> str:
        answers = data.get("answers")
        if not isinstance(answers, (list, tuple)) or len(answers) != 2:
            return "I need exactly two answers to compare."
        answers = [a if isinstance(a, str) else "" for a in answers]
        output = data.get("output", "scores")
        template = data.get("template", "verdict_first")
        if output not in ("scores", "choice") or template not in ("verdict_first", "evidence_first"):
            return "I do not know how to give that kind of verdict."

        first, second = self.perceive(answers, rng)
        if output == "scores":
            verdict = f"{_round_score(first)} {_round_score(second)}"
        elif abs(first - second) < self.params.tie_margin:
            verdict = "tie"
        else:
            verdict = "1" if first > second else "2"

        evidence = [
            f"Assistant {i} makes {count_points(text)} distinct points in {word_count(text)} words."
            for i, text in enumerate(answers, 1)
        ]
        if abs(first - second) < self.params.tie_margin:
            evidence.append("Overall the two answers seem about equally good to me.")
        else:
            evidence.append(f"Overall Assistant {1 if first > second else 2} seems the stronger answer to me.")
        lines = [verdict, *evidence] if template == "verdict_first" else [*evidence, verdict]
        return "\n".join(lines)
