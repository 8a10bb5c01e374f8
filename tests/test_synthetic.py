"""Synthetic contestants and judges, driven in-process with hand-built turns."""

from __future__ import annotations

import random
import re

import pytest
from pydantic import ValidationError

from arena.contract import plugins
from arena.agents.synthetic import (
    SyntheticContestant,
    SyntheticContestantParams,
    SyntheticJudge,
    SyntheticJudgeParams,
    perceived_quality,
    signature,
    true_quality,
    word_count,
)
from arena.contract.messages import Turn

QUESTION = "How should a small city plan its public transport network over the next decade?"
SEEDS = range(200)
FORMATS = [(o, t) for o in ("scores", "choice") for t in ("verdict_first", "evidence_first")]


# ---------------------------------------------------------------- a parser following the judging rules


def parse_verdict(text: str, output: str, template: str):
    """(score1, score2) for output "scores", "1" / "2" / "tie" for "choice"; ValueError if malformed."""
    lines = text.strip().splitlines()
    if len(lines) < 2:
        raise ValueError("a verdict and an explanation are both required")
    if template == "verdict_first":
        verdict, explanation = lines[0], lines[1:]
    else:
        verdict, explanation = lines[-1], lines[:-1]
    if not any(line.strip() for line in explanation):
        raise ValueError("empty explanation")
    if output == "scores":
        m = re.fullmatch(r"(\d+) (\d+)", verdict)
        if not m:
            raise ValueError(f"not two scores: {verdict!r}")
        a, b = int(m[1]), int(m[2])
        if not (1 <= a <= 10 and 1 <= b <= 10):
            raise ValueError(f"score out of range: {verdict!r}")
        return a, b
    if verdict not in ("1", "2", "tie"):
        raise ValueError(f"not a choice: {verdict!r}")
    return verdict


# ---------------------------------------------------------------- building turns


def answer_turn(seed: int = 1, question: str = QUESTION) -> Turn:
    data = {"task": "answer", "question_id": "q1", "question": question, "category": None}
    return Turn(match="m", seat="Model A", role="Contestant", round=1, history=(), prompt=question,
                seed=seed, prompt_data=data)


def judge_turn(answers, seed: int = 1, output: str = "choice", template: str = "verdict_first") -> Turn:
    data = {"task": "judge", "question_id": "q1", "question": QUESTION, "answers": list(answers),
            "output": output, "template": template}
    return Turn(match="m", seat="Judge", role="Judge", round=2, history=(), prompt="Compare the answers.",
                seed=seed, prompt_data=data)


def answer(seed: int = 1, **params) -> str:
    params.setdefault("name", "writer")
    strategy = SyntheticContestant(SyntheticContestantParams(**params))
    turn = answer_turn(seed)
    return strategy.reply(turn, random.Random(turn.seed))


def judge(answers, seed: int = 1, output: str = "choice", template: str = "verdict_first", **params):
    strategy = SyntheticJudge(SyntheticJudgeParams(**params))
    turn = judge_turn(answers, seed, output, template)
    return parse_verdict(strategy.reply(turn, random.Random(turn.seed)), output, template)


def tally(verdicts) -> dict[str, int]:
    counts = {"1": 0, "2": 0, "tie": 0}
    for v in verdicts:
        counts[v] += 1
    return counts


# ---------------------------------------------------------------- contestants


def test_registered_as_strategies():
    assert plugins.load("strategy", "synthetic_contestant") is SyntheticContestant
    assert plugins.load("strategy", "synthetic_judge") is SyntheticJudge


def test_answers_are_deterministic_per_seed_and_vary_across_seeds():
    assert answer(seed=5, quality=0.6) == answer(seed=5, quality=0.6)
    assert len({answer(seed=s, quality=0.6) for s in range(10)}) > 1


@pytest.mark.parametrize("quality", [0.0, 0.1, 0.35, 0.5, 0.7, 1.0])
def test_answers_carry_their_quality_and_mention_the_question(quality):
    text = answer(quality=quality)
    assert perceived_quality(text) == true_quality({"quality": quality}) == round(quality * 10) / 10
    assert text.count('"How should a small city plan its public') >= 1 + round(quality * 10)


def test_length_follows_verbosity_not_quality():
    lengths = {q: word_count(answer(quality=q / 10)) for q in range(11)}
    assert max(lengths.values()) - min(lengths.values()) < 25
    assert word_count(answer(quality=0.5, verbosity=2)) > 1.7 * word_count(answer(quality=0.5, verbosity=1))


def test_signature_closes_the_answer_and_defaults_differ_between_names():
    assert answer(quality=0.4, style="Cheers from the north.").splitlines()[-1] == "Cheers from the north."
    a, b = signature({"quality": 0.4, "name": "alice"}), signature({"quality": 0.4, "name": "bob"})
    assert a != b
    assert answer(quality=0.4, name="alice").splitlines()[-1] == a


def test_params_are_checked():
    with pytest.raises(ValidationError):
        SyntheticContestantParams(quality=1.5)
    with pytest.raises(ValidationError):
        SyntheticContestantParams()  # the contestant's quality has no default
    with pytest.raises(ValidationError):
        SyntheticJudgeParams(skill=-1)
    with pytest.raises(ValidationError):
        SyntheticJudgeParams(bias=0.1)  # unknown names are refused


def test_other_requests_get_a_short_text():
    contestant = SyntheticContestant(SyntheticContestantParams(quality=0.5))
    judge_ = SyntheticJudge(SyntheticJudgeParams())
    plain = answer_turn().model_copy(update={"prompt_data": None})
    odd = answer_turn().model_copy(update={"prompt_data": {"task": "dance"}})
    broken = judge_turn(["only one"])
    for strategy in (contestant, judge_):
        for turn in (plain, odd):
            out = strategy.reply(turn, random.Random(0))
            assert isinstance(out, str) and 0 < len(out) < 100
    assert "judge" in contestant.reply(judge_turn(["a", "b"]), random.Random(0))
    assert len(judge_.reply(broken, random.Random(0))) < 100


def test_a_judge_persona_also_answers():
    params = {"quality": 0.8, "name": "peer"}
    turn = answer_turn(seed=3)
    own = SyntheticJudge(SyntheticJudgeParams(**params, skill=0.3)).reply(turn, random.Random(turn.seed))
    assert own == answer(seed=3, **params)


# ---------------------------------------------------------------- judges


@pytest.mark.parametrize(("output", "template"), FORMATS)
@pytest.mark.parametrize("seed", range(5))
def test_replies_parse_in_every_format(output, template, seed):
    pair = [answer(seed=seed, quality=0.3, name="x"), answer(seed=seed, quality=0.9, name="y")]
    noisy = {"skill": 0.3, "position_bias": 0.1, "verbosity_bias": 0.05, "self_preference": 0.2}
    verdict = judge(pair, seed, output, template, **noisy)
    assert verdict is not None


@pytest.mark.parametrize("template", ["verdict_first", "evidence_first"])
def test_a_perfect_judge_reads_qualities_exactly(template):
    for low, high in [(0.2, 0.6), (0.3, 0.4), (0.7, 1.0)]:
        a, b = answer(quality=low, name="a"), answer(quality=high, name="b")
        assert judge([a, b], output="scores", template=template) == (round(10 * low), round(10 * high))
        assert judge([b, a], output="scores", template=template) == (round(10 * high), round(10 * low))
        assert judge([a, b], template=template) == "2"
        assert judge([b, a], template=template) == "1"
    same1, same2 = answer(seed=1, quality=0.6, name="a"), answer(seed=2, quality=0.6, name="b")
    assert judge([same1, same2], output="scores", template=template) == (6, 6)
    assert judge([same1, same2], template=template) == "tie"


def test_position_bias_favours_the_first_answer():
    a, b = answer(seed=1, quality=0.5, name="a"), answer(seed=2, quality=0.5, name="b")
    fair = tally(judge([a, b], seed=s, skill=0.1, tie_margin=0) for s in SEEDS)
    biased = tally(judge([a, b], seed=s, skill=0.1, tie_margin=0, position_bias=0.1) for s in SEEDS)
    assert biased["1"] > fair["1"] + 40
    assert biased["1"] > 0.65 * len(SEEDS)  # about 76% expected: P(N(0, 0.14) > -0.1)
    # Shown the other way round, the same bias now helps the other answer.
    swapped = tally(judge([b, a], seed=s, skill=0.1, tie_margin=0, position_bias=0.1) for s in SEEDS)
    assert swapped["1"] > 0.65 * len(SEEDS)


def test_verbosity_bias_favours_the_longer_of_equal_answers():
    short, long = answer(quality=0.5, verbosity=0.6, name="a"), answer(quality=0.5, verbosity=1.6, name="b")
    assert word_count(long) > word_count(short) + 200
    assert judge([short, long]) == "tie"
    assert judge([short, long], verbosity_bias=0.05) == "2"
    assert judge([long, short], verbosity_bias=0.05) == "1"
    scores = judge([short, long], output="scores", verbosity_bias=0.1)
    assert scores[1] > scores[0]


def test_self_preference_favours_its_own_style():
    me = {"name": "judge-persona", "quality": 0.5}
    mine = answer(seed=1, **me)
    other = answer(seed=2, quality=0.5, name="someone else")
    assert judge([mine, other], **me) == "tie"
    assert judge([mine, other], **me, self_preference=0.1) == "1"
    assert judge([other, mine], **me, self_preference=0.1) == "2"
    # An explicit style is recognised too, whoever wrote it.
    styled = answer(seed=3, quality=0.5, style="Yours, the night shift.")
    assert judge([other, styled], style="Yours, the night shift.", self_preference=0.1) == "2"


def test_noise_causes_disagreement_but_the_better_answer_usually_wins():
    better, worse = answer(quality=0.7, name="a"), answer(quality=0.5, name="b")
    verdicts = [judge([worse, better], seed=s, skill=0.15) for s in SEEDS]
    counts = tally(verdicts)
    assert counts["2"] > 0.7 * len(SEEDS)
    assert counts["1"] + counts["tie"] > 0  # not every seed agrees
    scores = {judge([worse, better], seed=s, output="scores", skill=0.15) for s in SEEDS}
    assert len(scores) > 5


def test_judging_is_deterministic_per_seed():
    pair = [answer(quality=0.4, name="a"), answer(quality=0.6, name="b")]
    strategy = SyntheticJudge(SyntheticJudgeParams(skill=0.3))
    turn = judge_turn(pair, seed=9, output="scores", template="evidence_first")
    assert strategy.reply(turn, random.Random(turn.seed)) == strategy.reply(turn, random.Random(turn.seed))
