"""The second worked example of docs/writing-a-game.md, take away: the hooks the first example does
not need (cases from a file, a path parameter, an Action, prompt_data, speakers, seat_problem,
rounds_needed, example_reply, metrics), played through a third-party package's entry point, by
scripted players and by model agents whose requests a local server records."""

from __future__ import annotations

import json
import re
import shutil
import sys
import tomllib
from pathlib import Path

import pytest

from arena.contract import plugins
from arena.contract.errors import ConfigError
from arena.contract.game import InvalidReply
from arena.contract.records import MatchSettings, MatchSpec
from arena.engine.match import play_match
from arena.run.scenario import parse_scenario
from arena.run.tournament import plan

from conformance_kit import BACKENDS, assert_conversation, local_only, mock_server, model_agent, play, scenario, seat_turns  # noqa: F401
from helpers import Recording, scripted

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "docs" / "examples"
STRATEGY_GUIDE = ROOT / "docs" / "writing-a-strategy.md"
SEATS = ("Player 1", "Player 2")


def make_site(root: Path) -> Path:
    """A directory that looks like site-packages after installing the package that
    docs/writing-a-strategy.md describes: its modules, registered by its pyproject's entry points
    (read from the guide, so that a guide which forgets one fails here)."""
    project = tomllib.loads(re.search(r"```toml\n(.*?)```", STRATEGY_GUIDE.read_text(encoding="utf-8"),
                                      re.DOTALL).group(1))
    site = root / "site"
    dist = site / "arena_take_away-0.1.dist-info"
    dist.mkdir(parents=True)
    for name in project["tool"]["setuptools"]["py-modules"]:
        shutil.copy(EXAMPLES / f"{name}.py", site / f"{name}.py")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: arena-take-away\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in points.items()) + "\n"
        for group, points in project["project"]["entry-points"].items()))
    return site


@pytest.fixture
def installed(tmp_path, monkeypatch):
    site = make_site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield site
    monkeypatch.undo()
    for module in ("take_away", "leave_a_multiple"):
        sys.modules.pop(module, None)
    plugins.refresh()


@pytest.fixture
def piles(tmp_path) -> str:
    path = tmp_path / "piles.jsonl"
    path.write_text('{"id": "p10", "stones": 10}\n{"id": "p8", "stones": 8}\n{"id": "p5", "stones": 5}\n', encoding="utf-8")
    return str(path)


def take(n: int) -> str:
    return json.dumps({"take": n})


def spec(piles, agents, case="p10", **params) -> MatchSpec:
    return MatchSpec(key=f"take/{case}", game="take_away", params={"piles": piles, "case": case, **params},
                     agents=tuple(agents), seed=3, shuffle_seats=False, settings=MatchSettings(turn_timeout=30))


def moves(record) -> list[tuple[int, str, int]]:
    return [(e.round, e.seat, e.action) for e in record.events if e.type == "action"]


async def test_the_player_who_leaves_a_multiple_of_four_takes_the_last_stone(installed, piles):
    agents = {"best": Recording(scripted("best", "leave_a_multiple")), "ones": scripted("ones", "fixed", params={"replies": [take(1)]})}
    record = await play_match(spec(piles, agents), agents)
    assert record.status == "finished", record.error
    # 10 -> best takes 2 (leaves 8), ones 1, best 3 (leaves 4), ones 1, best 3: the last stone
    assert moves(record) == [(1, "Player 1", 2), (2, "Player 2", 1), (3, "Player 1", 3), (4, "Player 2", 1),
                             (5, "Player 1", 3)]
    assert record.payoffs == {"Player 1": 1.0, "Player 2": 0.0}
    assert record.metrics == {"payoff": record.payoffs, "stones": {"Player 1": 8.0, "Player 2": 2.0}}
    notices = [m.content for m in record.messages if m.kind == "notice"]
    assert notices[-1] == "Player 1 took 3; 0 left. Player 1 took the last stone and wins."
    # one speaker a round, in seat order; everyone hears every move
    assert [t.round for t in agents["best"].turns] == [1, 3, 5]
    assert all(set(m.recipients) == {"Player 2"} for m in record.messages if m.kind == "reply" and m.sender == "Player 1")
    # prompt_data carries the prompt's two numbers; the last turn may take at most the 3 left
    last = agents["best"].turns[-1]
    assert last.prompt == '3 stones are left. Take 1 to 3: reply with JSON only, {"take": <stones>}.'
    assert last.prompt_data == {"left": 3, "most": 3}
    assert last.action_schema["properties"]["take"]["minimum"] == 1


async def test_a_move_larger_than_the_pile_is_asked_again_and_then_defaults_to_one(installed, piles):
    agents = {"greedy": scripted("greedy", "fixed", params={"replies": [take(3)]}), "ones": scripted("ones", "fixed", params={"replies": [take(1)]})}
    record = await play_match(spec(piles, agents, case="p5"), agents)
    assert record.status == "finished", record.error
    # 5 -> 2 (greedy takes 3) -> 1 -> greedy may take 1 only: three refusals, then the default, 1: 0 left
    assert moves(record) == [(1, "Player 1", 3), (2, "Player 2", 1), (3, "Player 1", 1)]
    failed = [e.reason for e in record.events if e.type == "turn_failed"]
    assert failed == ["You may take 1 to 1 stones now; you asked for 3."] * 3
    assert record.payoffs == {"Player 1": 1.0, "Player 2": 0.0}


@pytest.mark.parametrize(("reply", "reason"), [
    ("2", 'Reply with a JSON object such as {"take": 2} and nothing else.'),
    ('{"take": 0}', 'Reply with a JSON object such as {"take": 2} and nothing else.'),
    ('{"take": 2, "why": "x"}', 'Reply with a JSON object such as {"take": 2} and nothing else.'),
    ('{"take": 4}', "You may take 1 to 3 stones now; you asked for 4."),
])
def test_parse_reads_the_action_model(installed, piles, reply, reason):
    game_cls = plugins.load("game", "take_away")
    game = game_cls(game_cls.Params(piles=piles, case="p10"), SEATS, dict.fromkeys(SEATS, "Player"), None)
    assert game.parse("Player 1", '{"take": 3}', 1) == 3
    with pytest.raises(InvalidReply) as caught:
        game.parse("Player 1", reply, 1)
    assert caught.value.reason == reason


def test_cases_plan_one_match_per_pile_and_the_rounds_are_checked(installed, piles, tmp_path):
    raw = {"name": "piles", "seed": 1, "agents": {n: {"backend": "scripted", "strategy": "leave_a_multiple"} for n in "ab"},
           "games": [{"game": "take_away", "params": {"piles": "piles.jsonl"}}]}
    specs = plan(parse_scenario(raw, base=tmp_path))
    assert sorted(s.params["case"] for s in specs) == ["p10", "p5", "p8"]
    assert all(s.params["piles"] == piles for s in specs)  # read from the scenario's folder
    with pytest.raises(ConfigError) as caught:  # rounds_needed: the 10-stone pile may take 10 rounds
        parse_scenario({**raw, "match": {"max_rounds": 6}}, base=tmp_path)
    assert "a match of take_away can take 10 rounds, more than match.max_rounds (6)" in str(caught.value)


def test_seat_problem_refuses_a_pile_too_small_for_the_table(installed, tmp_path):
    (tmp_path / "piles.jsonl").write_text('{"id": "big", "stones": 9}\n{"id": "tiny", "stones": 2}\n', encoding="utf-8")
    raw = {"name": "piles", "seed": 1, "agents": {n: {"backend": "scripted", "strategy": "leave_a_multiple"} for n in "abc"},
           "games": [{"game": "take_away", "params": {"piles": "piles.jsonl"}, "tournament": {"format": "fixed"}}]}
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw, base=tmp_path)
    assert "every player moves at least once, so a pile needs 3 stones; tiny has fewer" in str(caught.value)


def test_a_bad_pile_file_names_the_line(installed, tmp_path):
    (tmp_path / "piles.jsonl").write_text('{"id": "a", "stones": 4}\n{"id": "b"}\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"piles.jsonl, line 2: not a pile"):
        plugins.load("game", "take_away").cases(plugins.load("game", "take_away").Params(piles=str(tmp_path / "piles.jsonl")))


# -- what a model is sent -------------------------------------------------------------------------
def best_move(body) -> dict:
    """Answers as a model that plays well would, from the request's last prompt alone."""
    from mock_llm import body_text

    left, most = map(int, re.findall(r"(\d+) stones are left\. Take 1 to (\d+)", body_text(body))[-1])
    return {"take": left % (most + 1) or 1}


@pytest.mark.parametrize("backend", BACKENDS)
async def test_every_request_holds_the_seats_conversation_and_the_pile_it_must_decide_on(installed, tmp_path, backend):
    pile = tmp_path / "pile.jsonl"
    pile.write_text('{"id": "p7", "stones": 7}\n', encoding="utf-8")
    with mock_server(backend, best_move) as mock:
        agents = {n: model_agent(backend, mock) for n in ("m1", "m2")}
        raw = scenario("take", agents, "take_away", {"piles": str(pile)}, tournament={"format": "fixed", "seating": "rotate"})
        (record,) = await play(tmp_path, raw)
        requests = mock.answered()
    # 7: the first player takes 3 and leaves 4, a multiple of 4; it takes the last stone in round 3
    assert [(e.round, e.seat, e.action) for e in record.events if e.type == "action"] == [
        (1, "Player 1", 3), (2, "Player 2", 1), (3, "Player 1", 3)]
    assert record.payoffs == {"Player 1": 1.0, "Player 2": 0.0}
    turns, outside = seat_turns(record, requests)
    assert not outside and [(t.round, t.seat) for t in turns] == [(1, "Player 1"), (2, "Player 2"), (3, "Player 1")]
    for turn, left in zip(turns, (7, 4, 3)):
        assert_conversation(record, turn)  # the rules, every earlier prompt, its replies and what it heard
        assert turn.text.endswith(f'{left} stones are left. Take 1 to 3: reply with JSON only, {{"take": <stones>}}.')
        body = turn.request.body
        schema = body["response_format"]["json_schema"]["schema"] if backend == "openai" else body["tools"][0]["input_schema"]
        assert schema["properties"]["take"]["minimum"] == 1 and schema["additionalProperties"] is False
    # Player 1's second turn heard Player 2's move, and the referee's word on it
    assert '{"take": 1}' in turns[2].text and "Player 2 took 1; 3 left." in turns[2].text
