"""The worked example of docs/writing-a-strategy.md: a strategy in a package of its own, found
through its entry point, plays the guide's scenario from the command line; and the built-in
`fixed` strategy, which says its replies one per turn of the seat's own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import textwrap
import sys
from pathlib import Path

import pytest

from arena.contract import Strategy
from arena.engine.match import play_match

from helpers import Recording, scripted
from test_example_take_away import installed, make_site, moves, spec, take  # noqa: F401  (installed: a fixture)

ROOT = Path(__file__).resolve().parent.parent
GUIDE = ROOT / "docs" / "writing-a-strategy.md"


def guide_block(language: str, first_line: str) -> str:
    text = GUIDE.read_text(encoding="utf-8")
    return re.search(rf"```{language}\n({re.escape(first_line)}.*?)```", text, re.DOTALL).group(1)


def cli(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "160", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=300)


def test_the_guides_scenario_runs_the_strategy_from_its_entry_point(tmp_path):
    site = make_site(tmp_path)
    (tmp_path / "take_away.yaml").write_text(guide_block("yaml", "# take_away.yaml"), encoding="utf-8")
    (tmp_path / "piles.jsonl").write_text(guide_block("json", '{"id": "p10"'), encoding="utf-8")
    checked = cli(tmp_path, site, "validate", "take_away.yaml")
    assert checked.returncode == 0, checked.stdout + checked.stderr
    # the strategy's Params are the scenario's: a misspelt one is refused before anything is played
    (tmp_path / "typo.yaml").write_text(guide_block("yaml", "# take_away.yaml").replace("strategy: leave_a_multiple}",
                                        "strategy: leave_a_multiple, params: {slipp: 0.1}}", 1), encoding="utf-8")
    refused = cli(tmp_path, site, "validate", "typo.yaml")
    assert refused.returncode != 0 and "slipp" in refused.stdout + refused.stderr
    done = cli(tmp_path, site, "run", "take_away.yaml", "--quiet", "--run-dir", "run")
    assert done.returncode == 0, done.stdout + done.stderr
    records = [json.loads(line) for line in cli(tmp_path, site, "export", "run").stdout.splitlines()]
    assert len(records) == 4  # two piles, two repeats: each player moves first once on each
    agent_of = lambda record, seat: next(s["agent"] for s in record["seats"] if s["label"] == seat)  # noqa: E731
    for record in records:
        assert record["status"] == "finished"
        assert {agent_of(record, seat): p for seat, p in record["payoffs"].items()} == {"perfect": 1.0, "ones": 0.0}
    # on 10 stones, moving first, it takes 2 and then keeps leaving a multiple of 4
    (first,) = [r for r in records if r["params"]["case"] == "p10" and agent_of(r, "Player 1") == "perfect"]
    said = [(m["sender"], json.loads(m["content"])["take"]) for m in first["messages"] if m["kind"] == "reply"]
    assert said == [("Player 1", 2), ("Player 2", 1), ("Player 1", 3), ("Player 2", 1), ("Player 1", 3)]


async def test_a_slip_takes_one_stone_and_hands_the_win_over(installed, piles):
    agents = {"slips": scripted("slips", "leave_a_multiple", params={"slip": 1.0}),
              "perfect": scripted("perfect", "leave_a_multiple")}
    record = await play_match(spec(piles, agents), agents)
    assert record.status == "finished", record.error
    # 10: a slip leaves 9, and the perfect player leaves 8, 4, 0
    assert moves(record) == [(1, "Player 1", 1), (2, "Player 2", 1), (3, "Player 1", 1), (4, "Player 2", 3),
                             (5, "Player 1", 1), (6, "Player 2", 3)]
    assert record.payoffs == {"Player 1": 0.0, "Player 2": 1.0}


# -- fixed: one reply per turn of the seat's own ---------------------------------------------------
@pytest.fixture
def piles(tmp_path) -> str:
    path = tmp_path / "piles.jsonl"
    path.write_text('{"id": "p10", "stones": 10}\n{"id": "p12", "stones": 12}\n', encoding="utf-8")
    return str(path)


async def test_fixed_says_its_replies_in_order_by_its_own_turns_when_it_speaks_in_even_rounds_only(installed, piles):
    second = Recording(scripted("second", "fixed", params={"replies": [take(2), take(3), take(1)]}))
    agents = {"first": scripted("first", "fixed", params={"replies": [take(1)]}), "second": second}
    record = await play_match(spec(piles, agents, case="p12"), agents)
    assert record.status == "finished", record.error
    # Player 2 speaks in rounds 2, 4, 6, 8 and says replies 0, 1, 2 and then 0 again: 12 -> 11, 9, 8, 5, 4, 3, 2, 0
    assert [(r, take_) for r, seat, take_ in moves(record) if seat == "Player 2"] == [(2, 2), (4, 3), (6, 1), (8, 2)]
    assert not [e for e in record.events if e.type == "turn_failed"]
    assert record.payoffs == {"Player 1": 0.0, "Player 2": 1.0}
    # what it counts: its own earlier turns, as the engine counts them and its conversation shows them
    assert [t.turn for t in second.turns] == [0, 1, 2, 3]
    assert [sum(m.kind == "prompt" for m in t.history) for t in second.turns] == [0, 1, 2, 3]  # as its text shows


async def test_fixed_by_round_says_reply_i_in_round_i_plus_1(installed, piles):
    agents = {"first": scripted("first", "fixed", params={"replies": [take(1)]}),
              "second": scripted("second", "fixed", params={"replies": [take(2), take(3), take(1)], "cycle": "round"})}
    record = await play_match(spec(piles, agents, case="p12"), agents)
    assert record.status == "finished", record.error
    # rounds 2, 4, 6 take replies 1, 0, 2: 12 -> 11, 8, 7, 5, 4, 3, 2; in round 8 reply 1 (3 stones) is too
    # many for the 2 left, so it is refused on every attempt and defaults to 1; Player 1 takes the last
    assert [(r, take_) for r, seat, take_ in moves(record) if seat == "Player 2"] == [(2, 3), (4, 2), (6, 1), (8, 1)]
    assert [e.reply for e in record.events if e.type == "turn_failed"] == [take(3)] * 3
    assert record.payoffs == {"Player 1": 1.0, "Player 2": 0.0}


def test_the_guide_shows_the_example_file_and_code_the_tests_run():
    blocks = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    assert blocks[0] == (ROOT / "docs" / "examples" / "leave_a_multiple.py").read_text(encoding="utf-8")
    here = Path(__file__).read_text(encoding="utf-8")
    for block in blocks[1:]:  # each further snippet is a piece of this test file, indented as in a test
        assert textwrap.indent(block, "    ") in here, block


class _Draws(Strategy):
    """Draws in every way the standard generator offers, so the reply shows what its rng gave."""

    def reply(self, turn, rng):
        bag = list(range(10))
        rng.shuffle(bag)
        return json.dumps([rng.random(), rng.randint(1, 6), rng.choice("abcdef"), bag, rng.sample(range(50), 3),
                           rng.gauss(0, 1), rng.gauss(0, 1), rng.getrandbits(70), rng.randbytes(4).hex(),
                           rng.choices("xyz", k=4), rng.uniform(1, 2), rng.normalvariate(0, 1)])


class _Nothing(Strategy):
    def reply(self, turn, rng):
        return "no draw"


def test_a_strategy_draws_what_a_generator_seeded_with_the_turns_seed_draws():
    """The generator a scripted agent hands its strategy is seeded only when first drawn from;
    whatever is drawn, and however, equals what `random.Random(turn.seed)` gives, turn by turn."""
    import random

    from arena.contract import plugins
    from arena.contract.messages import Turn

    plugins.register("strategy", "test-draws", _Draws)
    plugins.register("strategy", "test-nothing", _Nothing)
    try:
        agent, idle = scripted("a", "test-draws"), scripted("b", "test-nothing")
    finally:
        plugins.unregister("strategy", "test-draws")
        plugins.unregister("strategy", "test-nothing")
    for seed in (0, 7, 2**63 + 5):
        turn = Turn(match="m", seat="P", role="P", round=1, history=(), prompt="go", seed=seed)
        assert agent.reply_now(turn) == _Draws(_Draws.Params()).reply(turn, random.Random(seed))
        assert idle.reply_now(turn) == "no draw"
