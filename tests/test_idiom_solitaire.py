"""Idiom solitaire: the rules, judged move by move, and scripted games with known outcomes."""

from __future__ import annotations

import random

import pytest

from arena.games.idiom_solitaire import IdiomSolitaire, SolitaireParams, dictionary, successors
from arena.contract.game import InvalidReply
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
from arena.results.payoffs import role_tables
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario

from helpers import play, score_rows, scripted


def game(**params) -> IdiomSolitaire:
    seats = ["Early", "Late"]
    return IdiomSolitaire(SolitaireParams(start="一丝不苟", **params), seats, {"Early": "Early", "Late": "Late"}, random.Random(0))


def test_the_dictionary_is_real_and_indexed_by_first_character():
    idioms, by_first = dictionary()
    assert len(idioms) == 29502 and "守株待兔" in idioms and "你好世界" not in idioms
    assert all(i[0] == "苟" for i in by_first["苟"]) and "苟延残喘" in by_first["苟"]


def test_each_rule_is_judged_right():
    g = game()
    assert g.judge("苟延残喘") is None  # connects, is an idiom, is new
    assert "does not start with 「苟」" in g.judge("守株待兔")
    assert "not in the dictionary" in g.judge("苟苟苟苟")
    g.apply(1, {"Early": "苟延残喘"})
    assert g.chain == ["一丝不苟", "苟延残喘"] and g.hits == {"Early": 1, "Late": 0}
    assert g.judge(None) == "gave no idiom"
    # an idiom that ends with its own first character connects to itself, but may not be used twice
    loop = next(i for i in sorted(dictionary()[0]) if i[0] == i[-1])
    g.chain = [loop]
    assert "already used" in g.judge(loop)


def test_the_homophone_rule_matches_by_pinyin():
    g = game(homophone=True)
    # 苟 is "gou"; 狗 is "gou" too
    dog = next(i for i in dictionary()[0] if i[0] == "狗")
    assert g.judge(dog) is None
    assert game().judge(dog) is not None  # not without the rule
    assert set(successors("苟", True)) >= set(successors("苟", False))


def test_replies_that_are_not_four_characters_are_asked_again():
    g = game()
    assert g.parse("Early", " 「苟延残喘」。") == "苟延残喘"  # punctuation and spaces are not part of it
    for reply in ("I pass", "我的成语是：苟延残喘", "苟延"):
        with pytest.raises(InvalidReply, match="exactly one four-character"):
            g.parse("Early", reply)


async def test_a_full_vocabulary_beats_a_small_one_and_the_hits_are_counted():
    agents = {"scholar": scripted("scholar", "idiom_player"), "pupil": scripted("pupil", "idiom_player", params={"vocabulary": 50})}
    record = await play_match(MatchSpec(key="s", game="idiom_solitaire", agents=("scholar", "pupil"), seed=3, shuffle_seats=False,
                                        params={"max_moves": 40}), agents)
    assert record.status == "finished"
    (final,) = [m.data for m in record.messages if m.kind == "notice" and "chain" in m.data]
    assert final["loser"] == "Late" and "does not start with" in final["reason"]  # the pupil ran out of idioms
    assert record.payoffs == {"Early": 1.0, "Late": 0.0}
    assert final["hits"]["Early"] == final["hits"]["Late"] + 1 and len(final["chain"]) == 1 + sum(final["hits"].values())
    chain = final["chain"]
    assert all(b[0] == a[-1] for a, b in zip(chain, chain[1:])) and len(set(chain)) == len(chain)


async def test_two_full_vocabularies_play_to_a_draw_and_both_orders_are_played():
    scenario = parse_scenario({
        "name": "idioms", "agents": {"a": {"backend": "scripted", "strategy": "idiom_player"},
                                     "b": {"backend": "scripted", "strategy": "idiom_player", "params": {"vocabulary": 30, "seed": 1}}},
        "games": [{"game": "idiom_solitaire", "params": {"max_moves": 12}}], "tournament": {"repeats": 2},
    })
    result, records = await play(scenario)
    assert [r.key.split(":")[1] for r in records] == ["a+b", "b+a", "a+b", "b+a"]  # role swap: both orders
    (table,) = role_tables(score_rows(records))
    assert table.roles == ("Early", "Late")
    assert table.row_means["a"] >= table.row_means["b"]  # the bigger vocabulary does better, whichever side
    starts = {next(m.data["start"] for m in r.messages if m.kind == "notice" and "start" in m.data) for r in records}
    assert len(starts) > 1  # the start is drawn per match from its seed
    # hits by position: the role table of the `hits` metric, against the chains' own counts
    (hits,) = role_tables(score_rows(records, "hits"), metric="hits")
    by_hand: dict[tuple[str, str], list[float]] = {}
    for r in records:
        final = next(m.data for m in r.messages if m.kind == "notice" and "hits" in (m.data or {}))
        for seat in r.seats:
            by_hand.setdefault((seat.agent, seat.role), []).append(final["hits"][seat.label])
    assert hits.roles == ("Early", "Late")
    for agent in ("a", "b"):
        assert hits.row_means[agent] == pytest.approx(sum(by_hand[(agent, "Early")]) / 2)
        assert hits.column_means[agent] == pytest.approx(sum(by_hand[(agent, "Late")]) / 2)
