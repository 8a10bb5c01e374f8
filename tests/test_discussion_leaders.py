"""Peer discussion with `leader: both`: each case discussed twice, each reviewer leading once, proven by
the request bodies two model agents send to the local mock (tests/mock_llm.py) at every turn."""

from __future__ import annotations

import re

import pytest

from arena.games.discussion_summary import discussion_summaries

from conformance_kit import (
    BACKENDS,
    assert_conversation,
    local_only,  # noqa: F401  (an autouse fixture)
    mock_server,
    model_agent,
    play,
    replies,
    scenario,
    seat_turns,
)
from test_conformance import pairs_file
from test_conformance_judging import discussion_reply

pytestmark = pytest.mark.parametrize("backend", BACKENDS)
MODELS = {"ann": "ann-model", "bob": "bob-model"}


def requests_of(record, requests):
    """The requests one match sent: those whose seat (named by the rules they carry) holds the agent of
    the model they were sent to; both matches seat the same two agents, in the other order."""
    agent_of = {s.label: s.agent for s in record.seats}
    mine = []
    for request in requests:
        seat = re.search(r"You are (Reviewer \d)", request.text)
        if seat and MODELS[agent_of[seat.group(1)]] == request.body["model"]:
            mine.append(request)
    return mine


async def test_leader_both_discusses_each_case_once_under_either_leader(backend, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "max_turns": 2, "leader": "both"}
    with mock_server(backend, discussion_reply) as mock:
        agents = {name: model_agent(backend, mock, model=model) for name, model in MODELS.items()}
        records = await play(tmp_path, scenario("both", agents, "peer_discussion", params))
        requests = [r for r in mock.answered() if not r.is_probe]
    # two matches of the one case, keyed by who holds the leading role
    assert sorted(r.key for r in records) == ["peer_discussion/p1#1:Reviewer 1=0,Reviewer 2=1",
                                              "peer_discussion/p1#1:Reviewer 1=1,Reviewer 2=0"]
    leaders = []
    for record in records:
        agent_of = {s.label: s.agent for s in record.seats}
        (data,) = [m.data for m in record.messages if m.kind == "notice"]
        assert data["leader"] == "Reviewer 1" and data["reviewers"]["Reviewer 1"]["position"] == "leader"
        leader, follower = agent_of["Reviewer 1"], agent_of["Reviewer 2"]
        leaders.append(leader)
        turns, outside = seat_turns(record, requests_of(record, requests))
        assert not outside
        # the leader reviews, then speaks first in the discussion: each turn went to its own agent's model
        assert [(t.round, t.seat, t.request.body["model"]) for t in turns] == [
            (1, "Reviewer 1", MODELS[leader]), (1, "Reviewer 2", MODELS[follower]),
            (2, "Reviewer 1", MODELS[leader]), (3, "Reviewer 2", MODELS[follower])]
        for turn in turns:
            assert_conversation(record, turn)
        # the leader's initial review is listed first, and the leader's first discussion turn carries it
        # before the follower's
        lead_review, follow_review = [m.content for m in replies(record) if m.round == 1]
        assert lead_review.startswith("Reviewer 1, message 1") and follow_review.startswith("Reviewer 2, message 1")
        second = next(t for t in turns if t.round == 2).text
        assert 0 <= second.find(lead_review) < second.find(follow_review)
    assert sorted(leaders) == ["ann", "bob"]  # each reviewer led once
    (summary,) = discussion_summaries(records)
    led = {p.leader: p.discussions for p in summary.pairs}
    assert led == {"ann": 1, "bob": 1, None: 2}  # the pair's table says who led each discussion
    positions = {(r.agent, r.position): r.discussions for r in summary.reviewers if r.agent}
    assert positions[("ann", "leader")] == positions[("ann", "follower")] == 1
    assert positions[("bob", "leader")] == positions[("bob", "follower")] == 1
