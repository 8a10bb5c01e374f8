"""Idiom solitaire: the rules, judged move by move, and scripted games with known outcomes."""

from __future__ import annotations

import random
import re

import pytest

from arena.games.idiom_solitaire import IdiomSolitaire, SolitaireParams, dictionary, successors
from arena.contract.game import InvalidReply
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
from arena.results.payoffs import role_tables
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario

from conformance_kit import between, current_prompt, local_only, mock_server, model_agent, scenario  # noqa: F401
from conformance_kit import play as play_stored
from helpers import play, score_rows, scripted
from mock_llm import body_text


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
    assert g.parse("Early", " 「苟延残喘」。", 1) == "苟延残喘"  # punctuation and spaces are not part of it
    for reply in ("I pass", "我的成语是：苟延残喘", "苟延"):
        with pytest.raises(InvalidReply, match="exactly one four-character"):
            g.parse("Early", reply, 1)


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
    assert [tuple(s.agent for s in r.seats) for r in records] == [("a", "b"), ("b", "a")] * 2  # role swap: both orders
    assert [r.key.split(":")[1] for r in records] == ["Early=0,Late=1", "Early=1,Late=0"] * 2
    (table,) = role_tables(score_rows(records))
    assert table.roles == ("Early", "Late")
    assert table.row_means["a"] >= table.row_means["b"]  # the bigger vocabulary does better, whichever side
    starts = [next(m.data["start"] for m in r.messages if m.kind == "notice" and "start" in m.data) for r in records]
    # the role swap is a controlled comparison: both orders of a repeat start alike; each repeat draws anew
    assert starts[0] == starts[1] and starts[2] == starts[3] and starts[0] != starts[2]
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


# -- the role swap, as the models see it ------------------------------------------------------------
def _connecting_idiom(body) -> str:
    """An unused idiom that continues the chain the prompt shows."""
    prompt = current_prompt(body)
    chain = re.findall(r"「(.{4})」", between(prompt, "The chain so far", "The last idiom") or "")
    options = [i for i in successors(chain[-1][-1], False) if i not in chain] if chain else []
    return min(options) if options else "不知"


@pytest.mark.parametrize("backend", ["openai", "anthropic"])
async def test_both_orders_of_a_pair_start_from_the_same_idiom_and_each_repeat_from_another(backend, tmp_path):
    """What each model is sent: in a repeat, the agent moving first and, in the swapped match, the
    other agent moving first are told the same starting idiom; another repeat starts elsewhere."""
    with mock_server(backend, _connecting_idiom) as mock:
        agents = {name: model_agent(backend, mock, model=f"{name}-model") for name in ("ann", "bob")}
        records = await play_stored(tmp_path, scenario("swap", agents, "idiom_solitaire", {"max_moves": 2},
                                                tournament={"repeats": 3}))
        requests = mock.answered()
    assert sorted((r.repeat, tuple(s.agent for s in r.seats)) for r in records) == [
        (repeat, order) for repeat in (1, 2, 3) for order in (("ann", "bob"), ("bob", "ann"))]
    start_of = {r.key: next(m.data["start"] for m in r.messages if m.kind == "notice" and "start" in (m.data or {}))
                for r in records}
    by_repeat = {}
    for r in records:
        by_repeat.setdefault(r.repeat, set()).add(start_of[r.key])
    assert all(len(starts) == 1 for starts in by_repeat.values()), by_repeat  # both orders: one start
    assert len({s for starts in by_repeat.values() for s in starts}) == 3  # three repeats, three starts
    # the requests, read as a model reads them: who it is, which seat, the start it was told
    told = set()
    for request in requests:
        text = body_text(request.body)
        seat = re.search(r"You are (Early|Late) in a game of idiom solitaire", text).group(1)
        start = re.search(r"The game starts with 「(.{4})」", text).group(1)
        told.add((request.body["model"], seat, start))
        assert f"The chain so far, none of which may be used again: 「{start}」" in text  # the chain begins there
    expected = {(f"{s.agent}-model", s.label, start_of[r.key]) for r in records for s in r.seats}
    assert told == expected
    for starts in by_repeat.values():
        (start,) = starts
        # the same idiom to the agent moving first in one order and to the other one in the swapped order
        assert {("ann-model", "Early", start), ("bob-model", "Early", start)} <= told
