"""Judges do not learn who they judge: with ``anonymity: {}`` (agent names, their models and vendor
names scrubbed) and contestants whose words say who they are, no request a judge is sent, seated
(pairwise review) or outside the match (llm_judge, through the match's desk), names anyone."""

from __future__ import annotations

import json
import re

import pytest

from arena.run.scenario import VENDOR_TERMS

from conformance_kit import (
    BACKENDS,
    between,
    current_prompt,
    local_only,  # noqa: F401  (an autouse fixture)
    mock_server,
    model_agent,
    play,
    replies,
    scenario,
    seat_turns,
)
from mock_llm import body_text

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

# who is behind each model: the mock reads the request's model, as a model knows its own name
WHO = {"gpt-4o": ("alice", "OpenAI"), "claude-3-5-sonnet": ("bob", "Anthropic"), "mistral-large": ("carol", "Mistral")}
WITHHELD = "[name withheld]"


def names_in(body) -> list[str]:
    """Every agent name, model or vendor name a request's text holds (its own `model` field aside)."""
    text = body_text(body).lower()
    terms = [t for agent, vendor in WHO.values() for t in (agent, vendor)] + list(WHO) + list(VENDOR_TERMS)
    return [t for t in terms if re.search(rf"(?<![a-z]){re.escape(t.lower())}", text)]


def signed(body, words: str) -> str:
    agent, vendor = WHO[body["model"]]
    return f"Answer by {body['model']} ({vendor}), that is {agent}: {words}"


def pairwise_reply(body) -> str:
    text = body_text(body)
    if "Write your answer." in current_prompt(body):
        return signed(body, "boil it for " + ("eight minutes, then cool it in cold water." if "gpt" in body["model"]
                                              else "a while."))
    first = between(text, "[Assistant 1]\n", "\n[End of Assistant 1]") or ""
    second = between(text, "[Assistant 2]\n", "\n[End of Assistant 2]") or ""
    return "The longer one is better.\n" + ("8 3" if len(first) > len(second) else "3 8")


async def test_seated_judges_read_no_names_of_the_contestants(backend, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "How do I boil an egg?"}) + "\n", encoding="utf-8")
    with mock_server(backend, pairwise_reply) as mock:
        agents = {agent: model_agent(backend, mock, model=model) for model, (agent, _) in WHO.items()}
        raw = scenario("anonymous", agents, "pairwise_review", {"questions": str(questions), "peer": True},
                       tournament={"role_swap": False}, anonymity={})
        raw["games"][0]["agents"] = ["alice", "bob", "carol"]  # two contestants who also judge, and a judge
        (record,) = await play(tmp_path, raw)
        turns, _ = seat_turns(record, mock.answered())
    answers = [m.content for m in replies(record) if m.round == 1]
    assert len(answers) == 2 and all(names_in({"messages": [{"content": a}]}) for a in answers)  # they did sign
    judging = [t for t in turns if t.round > 1]
    assert len(judging) == 3 * 2  # three judges, one pair in both orders
    for turn in judging:
        assert names_in(turn.request.body) == [], (turn.seat, turn.round)
        assert turn.text.count(WITHHELD) >= 2  # the signatures, scrubbed
        assert "boil it for eight minutes, then cool it in cold water." in turn.text  # the substance is all there
    assert {r[3] for r in record.reviews} == {"alice", "bob", "carol"}  # and they judged


def code_reply(body) -> str | dict:
    text = body_text(body)
    if "You are the programmer" in text:
        return "```python\ndef add(a, b):\n    # written by alice, running gpt-4o from OpenAI\n    return a + b\n```"
    if "You are the code reviewer" in text:
        return "over"
    found = re.search(r"Score each of (.*?) on a scale", text)
    return {seat.strip(): {"evaluation": "fine", "score": 7} for seat in found.group(1).split(",")}


async def test_the_outside_judge_reads_no_names_either(backend, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "add", "entry_point": "add", "prompt": "def add(a, b):\n",
                                    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}) + "\n")
    with mock_server(backend, code_reply) as mock:
        agents = {agent: model_agent(backend, mock, model=model) for model, (agent, _) in WHO.items()}
        raw = scenario("anonymous-judge", agents, "code_review", {"problems": str(problems)},
                       referee=[{"use": "llm_judge", "agent": "carol"}], tournament={"role_swap": False}, anonymity={})
        raw["games"][0]["agents"] = ["alice", "bob"]
        (record,) = await play(tmp_path, raw)
        turns, outside = seat_turns(record, mock.answered())
    assert record.metrics["judge"] == {"Programmer": 7.0, "Reviewer": 7.0}
    (brief,) = outside
    assert names_in(brief.body) == [] and WITHHELD in brief.text and "return a + b" in brief.text
    reviewer = next(t for t in turns if t.seat == "Reviewer")
    assert names_in(reviewer.request.body) == [] and WITHHELD in reviewer.text  # the other seat did not learn it either
