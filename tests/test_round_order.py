"""A simultaneous round shown as it happened, proven by the request bodies a backend sends.

In a round where several seats are asked at once, none of them reads another's reply before
writing its own. Every later request of a seat must say so: its own reply of that round comes
first, then a referee's line saying the others were written at the same time, then the others'
replies, whole and in seat order; the request that answers the round carries nothing of it. The
games are played by model agents against the local OpenAI and Anthropic mocks
(tests/mock_llm.py), and every recorded request is compared, message by message, with the
conversation built here from the run's record alone.
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from arena.contract.messages import REFEREE, SIMULTANEOUS, Message
from arena.contract.records import MatchRecord

from conformance_kit import (
    BACKENDS,
    local_only,  # noqa: F401  (an autouse fixture)
    mock_server,
    model_agent,
    play,
    replies,
    scenario,
    seat_turns,
    seen,
)
from mock_llm import Recorded
from test_conformance import ANSWER_A, ANSWER_B, QUESTION, debate_reply, discussion_reply, pairs_file
from test_conformance_judging import DIALOGUE, FACT, RESPONSE, scoring_reply

pytestmark = pytest.mark.parametrize("backend", BACKENDS)

LINE = SIMULTANEOUS  # the referee's words go out as written: its voice is the user role itself


# -- what a request must be, from the record alone ----------------------------------------------------
def lived(record: MatchRecord, seat: str, before: int) -> list[tuple[str, str]]:
    """The seat's conversation up to round ``before``, as (role, text) chat turns, round by round in
    the order the seat lived it: what the referee gave it before anyone replied (rules, its prompt),
    its own reply, then, when it was asked in that round, the referee's line and the other seats'
    replies it hears (written at the same time), then what the referee said after them."""
    chat: list[tuple[str, str]] = []
    mine = [m for m in record.messages if m.round < before and m.visible_to(seat)]
    for round in sorted({m.round for m in mine}):
        of_round = [m for m in mine if m.round == round]
        first_reply = min((m.index for m in record.messages if m.round == round and m.kind == "reply"), default=None)

        def phase(m: Message) -> int:
            if m.sender == seat:
                return 1
            if m.kind == "reply":
                return 2
            return 0 if first_reply is None or m.index < first_reply else 3

        asked = any(m.kind == "prompt" for m in of_round)
        introduced = False
        for m in sorted(of_round, key=lambda m: (phase(m), m.index)):
            if phase(m) == 1:
                chat.append(("assistant", m.content))
                continue
            if phase(m) == 2 and asked and not introduced:
                chat.append(("user", LINE))
                introduced = True
            chat.append(("user", seen(m, seat) if m.sender == REFEREE else f"{m.sender} said:\n{seen(m, seat)}"))
    return chat


def expected_request(record: MatchRecord, seat: str, prompt: Message, backend: str) -> list[tuple[str, str]]:
    chat = lived(record, seat, prompt.round) + [("user", seen(prompt, seat))]
    if backend == "anthropic":  # its API takes alternating turns: neighbours of one role are joined
        merged: list[tuple[str, str]] = []
        for role, text in chat:
            if merged and merged[-1][0] == role:
                merged[-1] = (role, merged[-1][1] + "\n\n" + text)
            else:
                merged.append((role, text))
        chat = merged
    return chat


def sent(request: Recorded) -> list[tuple[str, str]]:
    out = []
    for message in request.messages:
        content = message["content"]
        if isinstance(content, list):
            content = "\n\n".join(block.get("text", "") for block in content)
        out.append((message["role"], content))
    return out


def check_every_turn(record: MatchRecord, requests: list[Recorded], backend: str) -> dict[str, int]:
    """Every seat's every request against the record; returns how many requests read a simultaneous
    round after it happened, and how many answered one, so each test can say what it covered."""
    turns, outside = seat_turns(record, requests)
    assert not outside
    counted = Counter()
    for turn in turns:
        seat, body = turn.seat, sent(turn.request)
        assert body == expected_request(record, seat, turn.prompt, backend), f"{seat}, round {turn.round}"
        text = turn.text
        # nothing of the round being answered: no other seat's reply of it, no line about it
        assert not any(m.content in text or (m.shown or m.content) in text
                       for m in replies(record) if m.round == turn.round and m.sender != seat), (seat, turn.round)
        # every earlier round it answered alongside others: its reply, the line, theirs, in that order
        for r in sorted({m.round for m in replies(record, seat, before=turn.round)}):
            theirs = [m for m in replies(record) if m.round == r and m.sender != seat and seat in m.recipients]
            if not theirs:
                continue
            (own,) = [m for m in replies(record, seat) if m.round == r]
            at_own = text.index(own.content)
            at_line = text.index(LINE, at_own)
            expect = at_line + len(LINE)
            for other in theirs:  # right after the line, one after another, whole
                block = f"\n\n{other.sender} said:\n{seen(other, seat)}"
                assert text[expect:expect + len(block)] == block, (seat, turn.round, other.sender)
                expect += len(block)
            counted["read"] += 1
        if any(m.round == turn.round and m.sender != seat for m in replies(record)):
            counted["answered"] += 1
        assert text.count(SIMULTANEOUS) == sum(1 for _, t in lived(record, seat, turn.round) if t == LINE)
    return counted


# -- PRD's peer discussion: the initial reviews are written at once -----------------------------------
@pytest.mark.parametrize("seed", [3, 4])  # the drawn leader is Reviewer 1 under one, Reviewer 2 under the other
async def test_each_reviewer_reads_its_own_initial_review_before_the_others(backend, seed, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "max_turns": 4, "leader": "drawn"}
    with mock_server(backend, discussion_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock)}
        (record,) = await play(tmp_path, scenario("discussion", agents, "peer_discussion", params, seed=seed))
        requests = mock.answered()
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    leader, follower = data["leader"], data["follower"]
    assert len(requests) == 6
    # both answer round 1 at once; every later turn (4) reads it back, the follower's included
    assert check_every_turn(record, requests, backend) == {"answered": 2, "read": 4}
    follower_turns = [t for t in seat_turns(record, requests)[0] if t.seat == follower and t.round > 1]
    assert len(follower_turns) == 2
    for turn in follower_turns:  # the case the audit found: its own review used to come after the leader's
        mine, theirs = (next(m.content for m in replies(record, s) if m.round == 1) for s in (follower, leader))
        assert turn.text.index(mine) < turn.text.index(LINE) < turn.text.index(theirs)
        for fact in (QUESTION, ANSWER_A, ANSWER_B):
            assert fact in turn.text


# -- ChatEval: simultaneous talk, with and without a summarizer -------------------------------------------
def signed_debate_reply(body) -> str:
    """A debater that says which model it is: with the filter on, the others read that name withheld."""
    return f"I am {body['model']}. " + debate_reply(body)


@pytest.mark.parametrize("anonymity", [False, True])
async def test_debaters_talking_at_once_read_their_own_words_first_every_turn(backend, anonymity, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "strategy": "simultaneous_talk", "turns": 3}
    models = {"ann": "gpt-4o", "bob": "claude-3-5-sonnet", "cid": "mistral-large"}
    with mock_server(backend, signed_debate_reply) as mock:
        agents = {name: model_agent(backend, mock, model=model) for name, model in models.items()}
        extra = {"anonymity": {}} if anonymity else {"anonymity": False}  # the filter is on unless turned off
        (record,) = await play(tmp_path, scenario("debate", agents, "chateval_debate", params,
                                                  tournament={"role_swap": False}, **extra))
        requests = mock.answered()
    assert len(requests) == 9
    # 3 debaters x 3 turns, each with the others; turn 2 reads turn 1 back, turn 3 reads turns 1 and 2
    assert check_every_turn(record, requests, backend) == {"answered": 9, "read": 9}
    turns = seat_turns(record, requests)[0]
    assert all(t.text.count(SIMULTANEOUS) == 2 for t in turns if t.round == 3)
    for turn in turns:  # its own words as it wrote them; the others' as the filter left them, when it is on
        agent = next(s.agent for s in record.seats if s.label == turn.seat)
        others = [m for m in models if m != agent]
        if turn.round > 1:
            assert f"I am {models[agent]}." in turn.text
        assert any(f"I am {models[o]}." in turn.text for o in others) == (turn.round > 1 and not anonymity)


async def test_with_a_summarizer_no_debater_hears_another_and_no_line_is_added(backend, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "strategy": "simultaneous_talk_with_summarizer",
              "turns": 2}
    with mock_server(backend, debate_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        (record,) = await play(tmp_path, scenario("debate", agents, "chateval_debate", params,
                                                  tournament={"role_swap": False}))
        requests = mock.answered()
    assert len(requests) == 6
    # the 4 debater turns answer at once, but nobody hears another debater; the summarizer reads
    # their words after a round it was not asked in: nothing is read back as simultaneous
    assert check_every_turn(record, requests, backend) == {"answered": 4}
    assert not any(SIMULTANEOUS in r.text for r in requests)
    summaries = [m for m in replies(record, "Summarizer")]
    for turn in seat_turns(record, requests)[0]:
        if turn.seat != "Summarizer" and turn.round > 1:  # its own words, then the summary of them
            (own,) = [m for m in replies(record, turn.seat) if m.round == turn.round - 2]
            (summary,) = [m for m in summaries if m.round == turn.round - 1]
            assert turn.text.index(own.content) < turn.text.index(summary.content)


@pytest.mark.parametrize("strategy", ["simultaneous_talk", "simultaneous_talk_with_summarizer"])
async def test_debaters_scoring_a_response_at_once_read_their_own_scores_first(backend, strategy, tmp_path):
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "g1", "context": DIALOGUE, "fact": FACT, "response": RESPONSE}) + "\n",
                         encoding="utf-8")
    params = {"responses": str(responses), "dimensions": ["naturalness", "groundedness"], "scale": [0, 3],
              "strategy": strategy, "turns": 2}
    with mock_server(backend, scoring_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        (record,) = await play(tmp_path, scenario("scoring", agents, "chateval_scoring", params,
                                                  tournament={"role_swap": False}))
        requests = mock.answered()
    assert len(requests) == 6
    covered = check_every_turn(record, requests, backend)
    if strategy == "simultaneous_talk":  # 3 debaters answer each turn together; turn 2 reads turn 1
        assert covered == {"answered": 6, "read": 3}
    else:
        assert covered == {"answered": 4} and not any(SIMULTANEOUS in r.text for r in requests)
    for request in requests:
        for fact in ("\n".join(DIALOGUE), FACT, RESPONSE):
            assert fact in request.text
