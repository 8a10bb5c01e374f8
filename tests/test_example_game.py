"""The worked example of docs/writing-a-game.md: the guide shows the real file, and the
file works as a third-party plugin, from the command line and in-process."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
from fractions import Fraction
from pathlib import Path

import pytest
import trio

from arena.contract import plugins
from arena.contract.agent import Agent
from arena.agents.scripted import ScriptedAgent, ScriptedConfig
from arena.contract.game import InvalidReply
from arena.engine.match import play_match
from arena.contract.records import MatchSettings, MatchSpec
from arena.contract.messages import Turn
from arena.results.payoffs import summarize

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "guess_two_thirds.py"
GUIDE = ROOT / "docs" / "writing-a-game.md"
SEATS = ("Player 1", "Player 2", "Player 3")

# Three players with fixed guesses over the default 3 rounds. Worked out from the rules:
#   round 1: 30, 50, 90 -> mean 170/3 = 56.67, target 340/9 = 37.78; distances 7.78, 12.22, 52.22 -> low wins
#   round 2: 30, 50, 10 -> mean 30, target 20; distances 10, 30, 10 -> low and high tie, both score
#   round 3: 30, 30, 90 -> mean 50, target 100/3 = 33.33; distances 3.33, 3.33, 56.67 -> low and mid tie
GUESSES = {"low": [30, 30, 30], "mid": [50, 50, 30], "high": [90, 10, 90]}
POINTS = {"low": 3.0, "mid": 1.0, "high": 1.0}
ROUNDS = [  # what the referee tells everyone after each round
    {"round": 1, "mean": Fraction(170, 3), "target": Fraction(340, 9), "winning_guesses": [30]},
    {"round": 2, "mean": Fraction(30), "target": Fraction(20), "winning_guesses": [10, 30]},
    {"round": 3, "mean": Fraction(50), "target": Fraction(100, 3), "winning_guesses": [30]},
]


def guess(n: int) -> str:
    return json.dumps({"guess": n})


def fixed(name: str, *replies: str) -> ScriptedAgent:
    return ScriptedAgent(name, ScriptedConfig(strategy="fixed", params={"replies": list(replies)}))


def make_site(root: Path) -> Path:
    """A directory that looks like site-packages after `pip install arena-example-plugin`."""
    site = root / "site"
    dist = site / "arena_example_plugin-0.1.dist-info"
    dist.mkdir(parents=True)
    shutil.copy(EXAMPLE, site / "guess_two_thirds.py")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: arena-example-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[arena.games]\nguess_two_thirds = guess_two_thirds:GuessTwoThirds\n")
    return site


@pytest.fixture
def installed(tmp_path, monkeypatch):
    """The example plugin, visible to this process through its entry point."""
    site = make_site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield site
    monkeypatch.undo()
    sys.modules.pop("guess_two_thirds", None)
    plugins.refresh()


class Recording(Agent):
    """Keeps every turn handed to the wrapped agent: exactly what a model would be shown."""

    def __init__(self, inner: Agent):
        super().__init__(inner.name, inner.config)
        self.inner, self.turns = inner, []

    async def reply(self, turn: Turn) -> str:
        self.turns.append(turn)
        return await self.inner.reply(turn)


class Learner(Agent):
    """Answers in prose first and with JSON once told what is wrong."""

    async def reply(self, turn: Turn) -> str:
        return guess(40) if turn.retries else "I would say forty."


def spec(agents, params=None, **settings) -> MatchSpec:
    return MatchSpec(key="two_thirds#1", game="guess_two_thirds", params=params or {}, agents=tuple(agents), seed=11,
                     shuffle_seats=False, settings=MatchSettings(turn_timeout=5, **settings))


# -- (a) the guide shows the file ------------------------------------------------------


def test_guide_shows_the_example_file_verbatim():
    source = EXAMPLE.read_bytes()
    assert source.count(b"\n") < 80, "the example must stay under 80 lines"
    blocks = re.findall(rb"^```python\n(.*?)^```$", GUIDE.read_bytes(), re.MULTILINE | re.DOTALL)
    assert blocks, "the guide has no ```python block"
    assert blocks[0] == source, "the first ```python block of the guide must be docs/examples/guess_two_thirds.py"


# -- (b) a separate package registers it; the command line lists and runs it ---------------


def cli(tmp_path: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "160", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=tmp_path, env=env,
                          capture_output=True, text=True, encoding="utf-8", timeout=120)


def test_plugin_package_is_listed_by_arena_games(tmp_path):
    site = make_site(tmp_path)
    done = cli(tmp_path, site, "games", "--json")
    assert done.returncode == 0, done.stderr
    listing = {game["name"]: game for game in json.loads(done.stdout)}
    assert "public_goods" in listing  # the built-in is still there
    game = listing["guess_two_thirds"]
    assert game["description"] == "Guess 0-100; the guesses closest to 2/3 of the mean score a point."
    assert (game["min_seats"], game["max_seats"], game["referee"]) == (2, None, "rules")
    params = {p["name"]: (p["type"], p["default"], p["required"]) for p in game["params"]}
    assert params == {"rounds": ("int", 3, False), "numerator": ("int", 2, False), "denominator": ("int", 3, False)}


def test_plugin_package_runs_a_scenario_from_the_command_line(tmp_path):
    site = make_site(tmp_path)
    agents = "\n".join(
        f"  {name}: {{backend: scripted, strategy: fixed, params: {{replies: {json.dumps([guess(g) for g in gs])}}}}}"
        for name, gs in GUESSES.items()
    )
    (tmp_path / "two_thirds.yaml").write_text(textwrap.dedent("""\
        name: two_thirds_demo
        seed: 1
        agents:
        {agents}
        games:
          - game: guess_two_thirds
            agents: [low, mid, high]
        tournament: {{repeats: 2}}
        match: {{turn_timeout: 30, max_retries: 2}}
        """).format(agents=agents))
    done = cli(tmp_path, site, "run", "two_thirds.yaml", "--plain")
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    assert "2 of 2 matches finished." in out
    assert "Round 1: mean guess 56.67, target 37.78, winning guess 30." in out
    assert "Round 2: mean guess 30.00, target 20.00, winning guess 10 and 30." in out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|]", line) if c.strip()]
        if cells and cells[0] in GUESSES:
            rows[cells[0]] = cells[1:]
    # Agent | Matches | Mean | 95% CI | Std | Invalid | Defaulted | Valid (turns, with their share of the
    # agent's 6: three rounds in each of two matches); seat order changes nothing here
    assert rows == {
        name: ["2", f"{points:.2f}", f"[{points:.2f}, {points:.2f}]", "0.00", "0", "0 (0%)", "6 (100%)"]
        for name, points in POINTS.items()
    }
    assert "note:" not in out  # every turn was valid: nothing to say about what the table stands on
    assert [name for name in rows] == ["low", "high", "mid"]  # best mean first, then by name


# -- (c) in-process, with scripted agents ----------------------------------------------------


async def test_fixed_guesses_score_as_the_rules_say(installed):
    agents = {name: Recording(fixed(name, *map(guess, gs))) for name, gs in GUESSES.items()}
    record = await play_match(spec(GUESSES), agents)
    assert record.status == "finished", record.error
    assert record.rounds == 3
    assert {record.agent_of(seat): points for seat, points in record.payoffs.items()} == POINTS

    notices = [m for m in record.messages if m.kind == "notice"]
    assert [n.recipients for n in notices] == [SEATS] * 3
    for notice, expected in zip(notices, ROUNDS):
        assert notice.data == {**expected, "mean": pytest.approx(float(expected["mean"])),
                               "target": pytest.approx(float(expected["target"]))}
    assert notices[1].content == "Round 2: mean guess 30.00, target 20.00, winning guess 10 and 30."

    # Guesses are private: no reply is addressed to anyone, so in round 2 "mid" sees its rules,
    # what it was asked in round 1, its own guess and the referee's notice, and nothing of the other players.
    assert all(m.recipients == () for m in record.messages if m.kind == "reply")
    seen = agents["mid"].turns[1].history
    assert [(m.kind, m.sender) for m in seen] == [("rules", "Referee"), ("prompt", "Referee"), ("reply", "Player 2"),
                                                   ("notice", "Referee")]
    assert "Player 2, one of 3 players in a game of 3 rounds" in seen[0].content
    assert seen[1].content == agents["mid"].turns[0].prompt
    assert agents["mid"].turns[1].prompt == 'Round 2 of 3: reply with one JSON object only: {"guess": <0 to 100>}'

    again = await play_match(spec(GUESSES), {name: fixed(name, *map(guess, gs)) for name, gs in GUESSES.items()})
    assert again.messages == record.messages and again.payoffs == record.payoffs


@pytest.mark.parametrize(
    ("params", "guesses", "points"),
    [
        ({}, {"a": [40], "b": [40]}, {"a": 3.0, "b": 3.0}),  # equal guesses always tie: both score every round
        ({"rounds": 2, "numerator": 1, "denominator": 2}, {"a": [0], "b": [100]}, {"a": 2.0, "b": 0.0}),  # target 25
        ({"rounds": 1}, {"a": [100], "b": [100], "c": [0]}, {"a": 0.0, "b": 0.0, "c": 1.0}),  # target 44.44
    ],
)
async def test_params_and_ties(installed, params, guesses, points):
    record = await play_match(spec(guesses, params), {n: fixed(n, *map(guess, g)) for n, g in guesses.items()})
    assert record.status == "finished", record.error
    assert record.rounds == record.params["rounds"] == params.get("rounds", 3)
    assert {record.agent_of(seat): p for seat, p in record.payoffs.items()} == points


async def test_invalid_replies_are_asked_again_then_default_to_50(installed, tmp_path):
    agents = {
        "sharp": fixed("sharp", guess(30)),
        "prose": Recording(fixed("prose", "about forty")),
        "wild": fixed("wild", guess(101)),
        "learner": Recording(Learner("learner", ScriptedConfig(strategy="fixed"))),
    }
    record = await play_match(spec(agents, max_retries=2), agents)
    assert record.status == "finished", record.error
    # 30, 50 (default), 50 (default), 40 -> mean 42.5, target 85/3 = 28.33: 30 wins every round
    first = next(m for m in record.messages if m.kind == "notice")
    assert first.data["mean"] == 42.5 and first.data["target"] == pytest.approx(85 / 3)
    assert {record.agent_of(seat): p for seat, p in record.payoffs.items()} == {
        "sharp": 3.0, "prose": 0.0, "wild": 0.0, "learner": 0.0}

    actions = {(e.round, record.agent_of(e.seat)): e for e in record.events if e.type == "action"}
    for r in (1, 2, 3):
        assert (actions[r, "prose"].action, actions[r, "prose"].attempts, actions[r, "prose"].defaulted) == (50, 3, True)
        assert (actions[r, "wild"].action, actions[r, "wild"].defaulted) == (50, True)
        assert (actions[r, "learner"].action, actions[r, "learner"].attempts, actions[r, "learner"].defaulted) == (40, 2, False)
    reasons = {record.agent_of(e.seat): e.reason for e in record.events if e.type == "turn_failed"}
    assert reasons == {
        "prose": 'Reply with a JSON object such as {"guess": 33} and nothing else.',
        "wild": '"guess" must be a whole number from 0 to 100; you gave 101.',
        "learner": 'Reply with a JSON object such as {"guess": 33} and nothing else.',
    }

    # The seat is asked again with its failed reply and the reason, as a model would see it.
    round_1 = [t for t in agents["prose"].turns if t.round == 1]
    assert [t.attempt for t in round_1] == [0, 1, 2]
    chat = round_1[2].as_chat()
    assert chat[-2] == {"role": "assistant", "content": "about forty"}
    assert chat[-1]["content"].startswith('Reply with a JSON object such as {"guess": 33} and nothing else.')

    from helpers import stored

    store = stored(record, tmp_path / "run")  # the tables count troubled turns from the store's rows
    rows = {row.agent: (row.invalid_replies, row.defaulted_turns) for row in summarize(store.read.scores(), store.read.turns())}
    store.close()
    assert rows == {"sharp": (0, 0), "prose": (9, 3), "wild": (9, 3), "learner": (3, 0)}


@pytest.mark.parametrize(
    ("reply", "expected"),
    [('{"guess": 0}', 0), ('  {"guess": 100}\n', 100), ('{"reason": "level 2", "guess": 22}', 22)],
)
def test_parse_accepts_a_json_guess(installed, reply, expected):
    game_cls = plugins.load("game", "guess_two_thirds")
    game = game_cls(game_cls.Params(), SEATS, dict.fromkeys(SEATS, "Player"), None)
    assert game.parse("Player 1", reply, 1) == expected


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("33", 'Reply with a JSON object such as {"guess": 33} and nothing else.'),
        ('```json\n{"guess": 33}\n```', 'Reply with a JSON object such as {"guess": 33} and nothing else.'),
        ('{"Guess": 33}', 'Reply with a JSON object such as {"guess": 33} and nothing else.'),
        ('{"guess": 33.5}', '"guess" must be a whole number from 0 to 100; you gave 33.5.'),
        ('{"guess": "33"}', "\"guess\" must be a whole number from 0 to 100; you gave '33'."),
        ('{"guess": true}', '"guess" must be a whole number from 0 to 100; you gave True.'),
        ('{"guess": -1}', '"guess" must be a whole number from 0 to 100; you gave -1.'),
    ],
)
def test_parse_rejects_with_a_reason(installed, reply, reason):
    game_cls = plugins.load("game", "guess_two_thirds")
    game = game_cls(game_cls.Params(), SEATS, dict.fromkeys(SEATS, "Player"), None)
    with pytest.raises(InvalidReply) as caught:
        game.parse("Player 1", reply, 1)
    assert caught.value.reason == reason


def test_unknown_params_are_rejected(installed):
    params_cls = plugins.load("game", "guess_two_thirds").Params
    with pytest.raises(ValueError, match="factor"):
        params_cls.model_validate({"factor": 0.5})
    with pytest.raises(ValueError, match="denominator"):
        params_cls.model_validate({"denominator": 0})


def test_the_guides_scenario_is_valid_and_plays_as_it_says(installed):
    import yaml

    from arena.results.payoffs import summarize
    from helpers import play, score_rows
    from arena.run.scenario import parse_scenario
    from arena.run.tournament import plan

    text = GUIDE.read_text(encoding="utf-8")
    block = re.search(r"```yaml\n(# two_thirds\.yaml.*?)```", text, re.DOTALL).group(1)
    scenario = parse_scenario(yaml.safe_load(block), "guide")
    assert len(plan(scenario)) == 5
    result, records = trio.run(play, scenario)
    means = {row.agent: row.mean for row in summarize(score_rows(records))}
    assert means == {"low": 3.0, "mid": 0.0, "high": 0.0}  # what the guide promises


# -- (d) every other piece of code in the guide is real code, or runs as written -------------------
SOURCES = [*sorted((ROOT / "docs" / "examples").glob("*.py")), *sorted((ROOT / "games").rglob("*.py")),
           *sorted((ROOT / "tests").glob("test_example_*.py"))]


def found_in_sources(block: str) -> bool:
    """Whether the snippet is a piece of a file the tests play, at any depth of indentation."""
    texts = [path.read_text(encoding="utf-8") for path in SOURCES]
    return any(textwrap.indent(block, "    " * depth) in text for text in texts for depth in range(3))


async def test_every_snippet_of_the_guide_is_a_piece_of_played_code_or_runs_as_written(monkeypatch):
    blocks = re.findall(r"^```python\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)
    monkeypatch.syspath_prepend(str(EXAMPLE.parent))
    ran = 0
    try:
        for block in blocks[1:]:
            if found_in_sources(block):
                continue
            namespace: dict = {}
            exec(compile(block, "<writing-a-game.md>", "exec"), namespace)  # what a reader would paste
            for name, value in namespace.items():
                if name.startswith("test_") and callable(value):
                    await value()
            ran += 1
    finally:
        plugins.unregister("game", "guess_two_thirds")
        sys.modules.pop("guess_two_thirds", None)
    assert ran == 2  # the two snippets of "Testing a game" that are not taken from a file
    hooks = ["cases", "seat_problem", "rounds_needed", "seat_roles", "rules_data", "prompt_data", "history",
             "speakers", "parse", "default_action", "example_reply", "apply", "payoffs", "metrics",
             "judge_request", "programs", "rotating_roles", "Action", "action_schema", "summary_fields", "summaries"]
    shown = "\n".join(blocks)
    assert [hook for hook in hooks if not re.search(rf"\b(def )?{hook}\b", shown)] == []
