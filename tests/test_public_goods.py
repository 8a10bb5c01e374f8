"""The public goods game: payoffs, what each mode reports, and reply parsing."""

from __future__ import annotations

import random
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arena.contract.game import InvalidReply
from arena.games.public_goods import PublicGoods, PublicGoodsParams
from arena.engine.match import play_match
from arena.contract.records import MatchSpec

from helpers import Recording, scripted


def make_game(n=4, **params) -> PublicGoods:
    seats = [f"Player {i + 1}" for i in range(n)]
    return PublicGoods(PublicGoodsParams(**params), seats, {s: "Player" for s in seats}, random.Random(0))


@settings(max_examples=200, deadline=None)
@given(
    n=st.integers(2, 8),
    rounds=st.integers(1, 6),
    endowment=st.integers(1, 20),
    alpha=st.sampled_from([0.5, 1.0, 1.2, 1.5, 2.0, 3.7]),
    data=st.data(),
)
def test_total_payoff_is_endowments_plus_the_pools_surplus(n, rounds, endowment, alpha, data):
    game = make_game(n, rounds=rounds, endowment=endowment, alpha=alpha)
    total_contributed = 0
    for r in range(1, rounds + 1):
        actions = {s: data.draw(st.integers(0, endowment)) for s in game.seats}
        total_contributed += sum(actions.values())
        game.apply(r, actions)
        assert game.is_over(r) == (r == rounds)
    expected = n * rounds * endowment + (Fraction(str(alpha)) - 1) * total_contributed
    assert sum(game.payoffs().values()) == pytest.approx(float(expected), abs=1e-9)


def test_each_player_keeps_what_it_did_not_give_plus_an_equal_share():
    game = make_game(3, rounds=1, endowment=10, alpha=1.2)
    game.apply(1, {"Player 1": 10, "Player 2": 0, "Player 3": 5})
    share = 1.2 * 15 / 3
    assert game.payoffs() == pytest.approx({"Player 1": 0 + share, "Player 2": 10 + share, "Player 3": 5 + share})


def test_mode_1_tells_each_player_only_its_own_income():
    game = make_game(3, mode=1, alpha=1.5)
    notices = game.apply(1, {"Player 1": 10, "Player 2": 4, "Player 3": 0})
    assert len(notices) == 3
    income = 1.5 * 14 / 3
    for seat, notice in zip(game.seats, notices):
        assert notice.to == (seat,)
        assert notice.data == {"round": 1, "income": pytest.approx(income)}
        assert "7" in notice.text  # 7 coins, written out for the model
        for other_contribution in ("10", "4 "):
            assert other_contribution not in notice.text


def test_mode_2_tells_everyone_the_sorted_contributions_and_nothing_else():
    game = make_game(4, mode=2)
    notices = game.apply(1, {"Player 1": 3, "Player 2": 10, "Player 3": 0, "Player 4": 7})
    assert len(notices) == 1
    (notice,) = notices
    assert notice.to == tuple(game.seats)
    assert notice.data == {"round": 1, "contributions": [10, 7, 3, 0]}
    assert "[10, 7, 3, 0]" in notice.text
    assert "Player" not in notice.text  # who gave what stays unknown


def test_rules_state_the_numbers_of_the_game():
    game = make_game(5, rounds=7, endowment=12, alpha=1.3, mode=2)
    text = game.rules("Player 2")
    for fact in ("Player 2", "5 players", "7 rounds", "12 coins", "1.3", "largest to smallest"):
        assert fact in text
    assert "JSON" in game.prompt("Player 2", 3) and "Round 3 of 7" in game.prompt("Player 2", 3)


@pytest.mark.parametrize(
    "reply, expected",
    [
        ('{"reason": "share", "coins": 7}', 7),
        ('```json\n{"reason": "share", "coins": 0}\n```', 0),
        ('  {"coins": 10, "reason": "all in", "extra": 1} ', 10),
        ('{"reason": "r", "coins": 4.0}', 4),
    ],
)
def test_valid_replies(reply, expected):
    assert make_game(endowment=10).parse("Player 1", reply, 1) == expected


@pytest.mark.parametrize(
    "reply, says",
    [
        ("I put in 5 coins", "not a JSON object"),
        ('["coins", 5]', "JSON object"),
        ('{"coins": 5}', '"reason"'),
        ('{"reason": "r", "coins": 11}', "0 to 10"),
        ('{"reason": "r", "coins": -1}', "0 to 10"),
        ('{"reason": "r", "coins": "5"}', "whole number"),
        ('{"reason": "r", "coins": 4.5}', "whole number"),
        ('{"reason": "r", "coins": true}', "whole number"),
        ('{"reason": "r"}', "whole number"),
    ],
)
def test_invalid_replies_are_rejected_with_a_reason(reply, says):
    with pytest.raises(InvalidReply) as caught:
        make_game(endowment=10).parse("Player 1", reply, 1)
    assert says in caught.value.reason


@pytest.mark.parametrize("mode", [1, 2])
async def test_a_full_match_obeys_the_payoff_identity_and_reports_by_mode(mode):
    names = ["all", "none", "tft", "cc", "rand"]
    strategies = ["always_all", "free_rider", "tit_for_tat", "conditional_cooperator", "random_contributor"]
    agents = {n: Recording(scripted(n, s)) for n, s in zip(names, strategies)}
    spec = MatchSpec(key="pg", game="public_goods", params={"mode": mode, "rounds": 5, "alpha": 1.5}, agents=tuple(names), seed=11)
    record = await play_match(spec, agents)
    assert record.status == "finished" and record.rounds == 5
    contributed = sum(e.action for e in record.events if e.type == "action")
    assert sum(record.payoffs.values()) == pytest.approx(5 * 5 * 10 + 0.5 * contributed)
    by_agent = {record.agent_of(s): v for s, v in record.payoffs.items()}
    assert by_agent["none"] > by_agent["all"]  # free riding pays in a one-shot world
    notices = [m for m in record.messages if m.kind == "notice"]
    if mode == 1:
        assert len(notices) == 5 * 5 and all(set(m.data) == {"round", "income"} for m in notices)
    else:
        assert len(notices) == 5 and all(set(m.data) == {"round", "contributions"} for m in notices)
    # contributions are private: no player ever reads another's reply
    for agent in agents.values():
        for turn in agent.turns:
            assert all(m.kind != "reply" or m.sender == turn.seat for m in turn.history)
