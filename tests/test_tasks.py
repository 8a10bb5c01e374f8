"""What a turn asks, in structured form, is named with the contract's words: every built-in game
puts a ``Task`` member under ``prompt_data["task"]`` (or, for a kind of turn no other plugin shares,
a member of a ``StrEnum`` of its own), and a ``Stage`` under ``"stage"`` in the writing games, at
every turn; every member is some game's, and the strategies that read them answer every turn they
are handed rather than falling back to "nothing to say"."""

from __future__ import annotations

import json
from enum import StrEnum
from importlib.metadata import entry_points

import pytest
import trio

from arena.contract import Stage, Task
from arena.contract.agent import Agent
from arena.contract.messages import Turn
from arena.contract.records import MatchSpec
from arena.contract.referee import RefereeSpec
from arena.engine.match import play_match
from arena.run.runner import build_agents
from arena.run.scenario import load_scenario
from arena.run.tournament import plan

from helpers import ROOT, scripted

OFFLINE = ["quickstart", "pairwise-review-synthetic", "peer-discussion-synthetic", "chateval-debate-synthetic",
           "chateval-scoring-synthetic",
           "idiom-solitaire", "code-review", "translation"]
FALLBACKS = ("I have nothing to say to that.", "I do not know how to give that kind of verdict.")


class Reading(Agent):
    """Plays as the agent it wraps and keeps each turn's structured facts and the reply to them."""

    def __init__(self, inner: Agent, seen: list):
        super().__init__(inner.name, inner.config)
        self.inner, self.seen = inner, seen

    async def reply(self, turn: Turn) -> str:
        reply = await self.inner.reply(turn)
        self.seen.append((turn.seat, turn.round, turn.prompt_data, reply))
        return reply


def built_in_games() -> set[str]:
    return {ep.name for ep in entry_points(group="arena.games") if ep.value.startswith("arena.games")}


@pytest.fixture(scope="module")
def turns() -> dict[str, list]:
    """Every turn of the first matches of each entry of the offline example scenarios, by game."""
    by_game: dict[str, list] = {}
    for name in OFFLINE:
        scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
        specs = plan(scenario)
        for entry in scenario.games:
            seen: list = []
            agents = {n: Reading(a, seen) for n, a in build_agents(scenario).items()}
            spec = next(s for s in specs if s.group == entry.name)
            record = trio.run(play_match, spec, agents)
            assert record.status == "finished", record.error
            by_game.setdefault(spec.game, []).extend(seen)
    # and a code review whose first draft is wrong, so that it is revised
    seen = []
    stand_in = {"answers": str(ROOT / "scenarios" / "data" / "sample-problems.jsonl"), "write": 0.0, "fix": 1.0, "edit": 1.0}
    agents = {n: Reading(scripted(n, "writer_editor", params=stand_in), seen) for n in ("p", "r")}
    spec = MatchSpec(key="revised", game="code_review", agents=("p", "r"), seed=1, shuffle_seats=False,
                     params={"problems": stand_in["answers"], "case": "is-leap", "max_reviews": 2},
                     referees=(RefereeSpec(use="rules"),))
    record = trio.run(play_match, spec, agents)
    assert record.status == "finished", record.error
    by_game["code_review"].extend(seen)
    return by_game


def test_the_examples_play_every_built_in_game(turns):
    assert set(turns) >= built_in_games()


def test_every_turn_names_its_task_with_the_contract_s_words(turns):
    wrong = []
    for game, seen in turns.items():
        for seat, round, data, _ in seen:
            if data is None:  # a game that hands scripted players no structured prompt (public goods: the rules')
                continue
            if not isinstance(data.get("task"), StrEnum):
                wrong.append(f"{game}, {seat}, round {round}: task {data.get('task')!r}")
            if "stage" in data and not isinstance(data["stage"], Stage):
                wrong.append(f"{game}, {seat}, round {round}: stage {data['stage']!r}")
    assert not wrong


def test_every_task_and_stage_is_some_game_s(turns):
    data = [d for seen in turns.values() for _, _, d, _ in seen if d]
    tasks = {d["task"] for d in data}
    assert tasks >= set(Task)
    # a game's own kind of turn is its own enum's, not the contract's: the contract lists only shared ones
    assert {(type(t).__module__, t) for t in tasks if t not in set(Task)} == {
        ("arena.games.idiom_solitaire", "idiom"), ("arena.games.translation", "translation")}
    assert {d["stage"] for d in data if "stage" in d} == set(Stage)


def test_the_strategies_answer_every_task_they_are_handed(turns):
    unanswered = [(game, seat, round, data["task"]) for game, seen in turns.items()
                  for seat, round, data, reply in seen if data and reply in FALLBACKS]
    assert not unanswered


def test_a_task_is_the_plain_word_in_json_so_stored_data_reads_as_before():
    assert json.dumps({"task": Task.JUDGE, "stage": Stage.EDIT}) == '{"task": "judge", "stage": "edit"}'
    assert Task("discuss") is Task.DISCUSS and "discuss" == Task.DISCUSS
