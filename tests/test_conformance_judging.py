"""The judging games' new flows, played by model agents against the local OpenAI and Anthropic
mocks (tests/mock_llm.py), checked at every turn against what the request bodies carried:
peer discussion run to PRD's fixed number of turns with reviewers who agree and then change
their minds, each reviewer's own initial review listed before the other's; ChatEval's debate with position calibration, each
order in a match of its own; and ChatEval's scoring of one dialogue response on named dimensions.
The responders answer from the request text alone."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest

from arena.contract import plugins
from arena.contract.messages import SIMULTANEOUS
from arena.results.dimensions import dimension_scores
from arena.results.verdicts import verdict_scores

from conformance_kit import (
    BACKENDS,
    assert_conversation,
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
from test_conformance import ANSWER_A, ANSWER_B, QUESTION, own_turns, pairs_file, token

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


# -- peer discussion: PRD's four turns, agreement and a change of mind after it ----------------------
def discussion_reply(body) -> str:
    """Reviewer 1 first backs answer 1, Reviewer 2 answer 2. In the discussion the leader holds its
    view once, then goes over to the other answer; the follower adopts the leader's last word. A
    reviewer knows it leads when it has heard the other as often as it has spoken."""
    text = body_text(body)
    seat = re.search(r"You are (Reviewer \d)", text).group(1)
    other = re.search(r"\(the other is (Reviewer \d)\)", text).group(1)
    heard = re.findall(rf"{other} said:\n.*?Preference: (1|2|tie)", text, re.S)
    own = re.findall(r"Preference: (1|2|tie)", "\n".join(m["content"] for m in body["messages"]
                                                         if m["role"] == "assistant" and isinstance(m["content"], str)))
    spoken = own_turns(body)
    if spoken == 0:
        preference, why = ("1" if seat == "Reviewer 1" else "2"), "my first reading"
    elif len(heard) == spoken:  # the leader
        preference = own[-1] if spoken == 1 else {"1": "2", "2": "1"}[own[-1]]
        why = "I hold my view" if spoken == 1 else "on reflection I change my mind"
    else:
        preference, why = heard[-1], f"{other} convinced me"
    return f"{seat}, message {spoken + 1} [{token(text)}]: {why}; I have heard {other} {len(heard)} times.\nPreference: {preference}"


@pytest.mark.parametrize("seed, leader", [(3, "Reviewer 1"), (4, "Reviewer 2")])
async def test_peer_discussion_runs_its_turns_past_agreement_and_every_request_carries_the_whole_talk(
        backend, seed, leader, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "max_turns": 4, "leader": "drawn"}
    with mock_server(backend, discussion_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock)}
        (record,) = await play(tmp_path, scenario("discussion", agents, "peer_discussion", params, seed=seed))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    follower = "Reviewer 2" if leader == "Reviewer 1" else "Reviewer 1"
    game = plugins.load("game", "peer_discussion")
    assert record.rounds == 5 == game.rounds_needed(game.Params.model_validate(params), 2)
    assert [(t.round, t.seat) for t in turns] == sorted([(1, leader), (1, follower), (2, leader), (3, follower),
                                                        (4, leader), (5, follower)])
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    first, second = ("1", "2") if leader == "Reviewer 1" else ("2", "1")
    code = {"1": -1, "2": 1}
    # they agree at turn 2; the leader changes its mind at turn 3; the follower follows at turn 4
    assert [(x["turn"], x["seat"], x["preference"]) for x in data["said"]] == [
        (0, leader, code[first]), (0, follower, code[second]), (1, leader, code[first]), (2, follower, code[first]),
        (3, leader, code[second]), (4, follower, code[second])]
    assert data["leader"] == leader and data["agreed_at"] == 2 and data["agreed"]
    assert all(r["changed_after_agreement"] for r in data["reviewers"].values())  # both left what they agreed on
    assert (data["reviewers"][leader]["changes"], data["reviewers"][follower]["changes"]) == (1, 2)
    for turn in turns:
        assert_conversation(record, turn)
        for fact in (QUESTION, ANSWER_A, ANSWER_B):
            assert fact in turn.text
        if turn.round == 1:
            assert " said:\n" not in turn.text  # nobody else's words yet
            continue
        # the initial reviews: the seat's own first, as it wrote it without the other's in front of it,
        # then the other's, introduced as written at the same time (so the leader's comes first for the
        # leader, as PRD lists them, and second for the follower)
        reviews = [m.content for m in replies(record) if m.round == 1]
        assert reviews[0].startswith(f"{leader}, message 1")
        own, others = sorted(reviews, key=lambda r: not r.startswith(f"{turn.seat},"))
        at = [turn.text.find(p) for p in (own, f"\n\n{SIMULTANEOUS}\n\n", others)]
        assert min(at) >= 0 and at == sorted(at) and turn.text.count(SIMULTANEOUS) == 1
        other = follower if turn.seat == leader else leader
        assert replies(record, other, before=turn.round)[-1].content in turn.text
        assert f"Remember: you are {turn.seat}, and you answer {other}." in turn.asked
    # the leader's change of mind came with the agreement in front of it
    change = next(t for t in turns if t.round == 4)
    agreed = next(m for m in replies(record, follower) if m.round == 3)
    assert agreed.content.endswith(f"Preference: {first}") and agreed.content in change.text


# -- ChatEval's debate with position calibration --------------------------------------------------
def debate_reply(body) -> str:
    """Scores the longer answer 8 and the other 4, in the order shown; says whom it has read."""
    text = body_text(body)
    first = between(text, "[Answer 1]\n", "\n[End of Answer 1]")
    second = between(text, "[Answer 2]\n", "\n[End of Answer 2]")
    if first is None or second is None:
        return "I was not shown the answers."
    heard = sorted(set(re.findall(r"(Debater \d+|Summarizer) said:\n", text)))
    if "You follow a debate" in text:
        return f"Summary [{token(text)}]: I have read {', '.join(heard) or 'nobody yet'}."
    seat = re.search(r"You are (Debater \d+)", text).group(1)
    scores = "8 4" if len(first) > len(second) else "4 8"
    return f"{seat} [{token(text)}] has read {', '.join(heard) or 'nobody yet'}.\nScores: {scores}"


async def test_a_calibrated_debate_shows_each_order_in_its_own_match_at_every_turn(backend, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "strategy": "one_by_one", "turns": 2, "output": "scores",
              "position_calibration": True}
    with mock_server(backend, debate_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        records = await play(tmp_path, scenario("debate", agents, "chateval_debate", params,
                                                tournament={"role_swap": False}))
        requests = mock.answered()
    assert sorted(r.params["case"] for r in records) == ["p1", "p1@swapped"]
    claimed = 0
    for record in records:
        turns, outside = seat_turns(record, [q for q in requests if any(
            m.content in q.text for m in record.messages if m.kind == "rules")])
        assert not outside and len(turns) == 6
        claimed += len(turns)
        swapped = record.params["case"].endswith("@swapped")
        shown_first, shown_second = (ANSWER_B, ANSWER_A) if swapped else (ANSWER_A, ANSWER_B)
        for turn in turns:
            assert_conversation(record, turn)
            assert f"[Answer 1]\n{shown_first}\n[End of Answer 1]" in turn.text
            assert f"[Answer 2]\n{shown_second}\n[End of Answer 2]" in turn.text
            assert "'Scores: X Y'" in turn.text
            # nothing of the other order's debate reaches this one
            other = next(r for r in records if r is not record)
            assert not any(m.content in turn.text for m in replies(other))
        (data,) = [m.data for m in record.messages if m.kind == "notice"]
        # the longer answer (A) scored 8 wherever it was shown
        assert data["verdict"] == (4.0 if swapped else -4.0) and data["label"] == (1 if swapped else -1)
    assert claimed == len(requests)  # every request belongs to one seat of one of the two matches
    (score,) = verdict_scores(records)
    assert (score.calibrated, score.examples, score.accuracy, score.as_shown_accuracy) == (True, 1, 1.0, 1.0)


# -- ChatEval's scoring of one response on named dimensions -------------------------------------------
DIALOGUE = ["A: I finally planted a vegetable garden this spring.", "B: Nice! What did you grow?",
            "A: Mostly tomatoes and beans. The tomatoes are taking forever to ripen."]
FACT = "Tomatoes ripen faster when night temperatures stay above about 10 degrees Celsius."
RESPONSE = "Cold nights slow them down; they ripen faster once nights stay above ten degrees. Are your nights chilly?"


def scoring_reply(body) -> str:
    """Reads the dimensions and the scale from the rules and gives each a score from the response's
    length and the dimension's place: all from the text."""
    text = body_text(body)
    heard = sorted(set(re.findall(r"(Debater \d+|Summarizer) said:\n", text)))
    if "You follow a debate" in text:
        return f"Summary [{token(text)}]: I have read {', '.join(heard) or 'nobody yet'}."
    seat = re.search(r"You are (Debater \d+)", text).group(1)
    response = between(text, "[Response]\n", "\n[End of Response]")
    scale = re.search(r"a whole number from (\d+) to (\d+)", text)
    dimensions = re.findall(r"'([\w -]+): N'", text)
    if response is None or scale is None or not dimensions or between(text, "[Dialogue]\n", "\n[End of Dialogue]") is None:
        return "I was not shown the dialogue, the response and what to score."
    low, high = int(scale.group(1)), int(scale.group(2))
    n = int(seat.split()[-1])
    lines = [f"{d}: {low + (len(response.split()) + i + n) % (high - low + 1)}" for i, d in enumerate(dimensions)]
    return f"{seat} [{token(text)}] has read {', '.join(heard) or 'nobody yet'}.\n" + "\n".join(lines)


@pytest.mark.parametrize("strategy", ["one_by_one", "simultaneous_talk", "simultaneous_talk_with_summarizer"])
async def test_scoring_debaters_see_the_dialogue_the_fact_and_the_response_at_every_turn(backend, strategy, tmp_path):
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "g1", "context": DIALOGUE, "fact": FACT, "response": RESPONSE,
                                     "human": {"naturalness": 3, "groundedness": 1}}) + "\n", encoding="utf-8")
    params = {"responses": str(responses), "dimensions": ["naturalness", "groundedness"], "scale": [0, 3],
              "strategy": strategy, "turns": 2}
    with mock_server(backend, scoring_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        (record,) = await play(tmp_path, scenario("scoring", agents, "chateval_scoring", params,
                                                  tournament={"role_swap": False}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    debaters = ["Debater 1", "Debater 2", "Debater 3"] if strategy != "simultaneous_talk_with_summarizer" else [
        "Debater 1", "Debater 2"]
    assert Counter(t.seat for t in turns) == Counter({**{d: 2 for d in debaters},
                                                      **({"Summarizer": 2} if len(debaters) == 2 else {})})
    for turn in turns:
        assert_conversation(record, turn)
        for fact in ("\n".join(DIALOGUE), FACT, RESPONSE):
            assert fact in turn.text
        if turn.seat != "Summarizer":
            assert "'naturalness: N', 'groundedness: N'" in turn.text and "a whole number from 0 to 3" in turn.text
            assert turn.asked == "Your turn in the debate: give your arguments, then your scores."
        now = [m for m in replies(record) if m.sender != turn.seat and m.round == turn.round]
        assert not any(m.content in turn.text for m in now)
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    words = len(RESPONSE.split())
    expected = {d: {"naturalness": float((words + int(d.split()[-1])) % 4),
                    "groundedness": float((words + 1 + int(d.split()[-1])) % 4)} for d in debaters}
    assert data["scores"] == expected
    assert data["mean"] == {k: pytest.approx(sum(e[k] for e in expected.values()) / len(debaters))
                            for k in ("naturalness", "groundedness")}
    assert data["human"] == {"naturalness": 3, "groundedness": 1}
    (found,) = dimension_scores([record])
    assert found.responses == 1 and all(c.spearman is None for c in found.correlations)  # one response: no correlation
