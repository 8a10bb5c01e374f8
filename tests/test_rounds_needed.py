"""Games say how many rounds a match can take (``Game.rounds_needed``); a played match never
takes more, and games whose length the rules fix take exactly that many."""

from __future__ import annotations

import pytest
import trio

from arena.contract import plugins
from arena.engine.match import play_match
from arena.run.runner import build_agents
from arena.run.scenario import load_scenario
from arena.run.tournament import plan

from helpers import ROOT

OFFLINE = ["quickstart", "pairwise-review-synthetic", "peer-discussion-synthetic", "chateval-debate-synthetic",
           "chateval-scoring-synthetic", "idiom-solitaire", "code-review", "translation"]
FIXED_LENGTH = {"public_goods", "pairwise_review", "chateval_debate", "chateval_scoring", "translation"}


@pytest.mark.parametrize("name", OFFLINE)
def test_a_match_takes_at_most_the_rounds_its_game_says(name, monkeypatch):
    monkeypatch.chdir(ROOT)  # the example scenarios name their data relative to the checkout
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    agents = build_agents(scenario)
    for entry in scenario.games:
        spec = next(s for s in plan(scenario) if s.group == entry.name)
        game = plugins.load("game", spec.game)
        needed = game.rounds_needed(game.Params.model_validate(spec.params), len(spec.agents))
        assert needed is not None and needed >= 1
        record = trio.run(play_match, spec, agents)
        assert record.status == "finished", record.error
        assert record.rounds <= needed
        if spec.game in FIXED_LENGTH:
            assert record.rounds == needed, f"{spec.game} played {record.rounds} rounds, said {needed}"
