"""What a model reads at the start of every user turn, for every built-in game, from the request
bodies the local OpenAI mock (tests/mock_llm.py) recorded.

Small models copy what they read: a user turn that opens with a speaker tag ("[Referee] ") comes back
as a reply that opens with it. So the referee's voice is the user role itself: its text goes out as
the match records it, and nothing else stands before it; another seat's words come after a line
naming its seat ("Player 2 said:"), never its agent. Each user message must be exactly one of these.
"""

from __future__ import annotations

import pytest

from arena.contract import plugins
from arena.contract.messages import REFEREE, SIMULTANEOUS

from conformance_kit import local_only, play  # noqa: F401  (an autouse fixture: no real key, no proxy)
from mock_llm import OpenAIMock
from test_dryrun import GAMES, entry, model


def test_every_built_in_game_is_played_here():
    assert set(GAMES) == set(plugins.names("game"))


@pytest.mark.parametrize("game", sorted(GAMES))
async def test_no_user_turn_starts_with_a_speaker_tag(game, tmp_path):
    with OpenAIMock(responder=GAMES[game]) as mock:
        raw_entry, seated = entry(game, tmp_path)
        agents = {name: model(mock) for name in seated}
        if "referee" in raw_entry:
            agents["judge"] = model(mock, max_tokens=600)
        raw = {"name": f"turns-{game}", "seed": 11, "agents": agents, "games": [{**raw_entry, "agents": seated}],
               "match": {"max_retries": 0, "turn_timeout": 600}}
        records = await play(tmp_path, raw)
        requests = mock.answered()
    assert records and requests
    referee, heard, rules = set(), set(), set()
    for record in records:
        for m in record.messages:
            if m.sender == REFEREE:
                referee.add(m.content)
                rules.update([m.content] if m.kind == "rules" else [])
            else:  # as written, and as the anonymity filter left it for the others
                heard.update(f"{m.sender} said:\n{text}" for text in (m.content, m.shown) if text is not None)
    found = {"referee": 0, "simultaneous": 0, "heard": 0, "outside": 0}
    for request in requests:
        user = [m["content"] for m in request.messages if m["role"] == "user"]
        assert user, request.body
        for text in user:  # the first bytes a model reads in each user turn
            assert not text.startswith(f"[{REFEREE}]"), text[:80]
        if user[0] not in rules:  # a referee's outside judge: its brief stands alone, untagged
            assert len(user) == 1 and not user[0].startswith("["), user[0][:80]
            found["outside"] += 1
            continue
        for text in user:
            kind = ("referee" if text in referee else "simultaneous" if text == SIMULTANEOUS else
                    "heard" if text in heard else None)
            assert kind, f"{game}: a user turn that is none of the match's texts: {text[:120]!r}"
            found[kind] += 1
    assert found["referee"] >= len(rules)
    hears = game not in ("public_goods", "pairwise_review")  # there no seat reads another's words
    assert (found["heard"] > 0) == hears, found
    assert (found["simultaneous"] > 0) == (game == "peer_discussion"), found  # its reviews are written at once
    assert (found["outside"] > 0) == ("referee" in raw_entry), found
