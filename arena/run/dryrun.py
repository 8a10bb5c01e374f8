"""`arena run --dry-run`: what a scenario would ask of its models, before it asks anything.

One match of each game entry is played offline with stand-ins for the agents
that call models: a stand-in notes what it is asked and replies nothing, so
every turn is one call and the game's default action applies. Scripted
agents play as themselves. From that match come calls per seat and prompt
tokens per call (about four characters a token); replies are counted at their
`max_tokens`. Prompts are therefore a low estimate (empty replies add no
history, and a game that ends early on a failed move ends early here too) and
replies a high one.
"""

from __future__ import annotations

from collections import defaultdict

import trio
from pydantic import BaseModel

from arena.contract.agent import Agent
from arena.engine.match import JUDGE, play_match
from arena.contract.records import MatchSettings
from arena.contract.messages import Turn
from arena.run.runner import build_agents
from arena.run.scenario import Scenario
from arena.run.tournament import plan, plan_entry


class AgentEstimate(BaseModel):
    agent: str
    backend: str
    model: str | None
    calls: int
    prompt_tokens: int
    completion_tokens_max: int
    cost_max: float | None  # USD; None when the model's price is unknown


class EntryEstimate(BaseModel):
    group: str
    matches: int
    calls_per_match: float
    until_stable_cap: int | None  # matches at most, when repeats are until_stable


class Estimate(BaseModel):
    matches: int
    entries: list[EntryEstimate]
    agents: list[AgentEstimate]


class _StandIn(Agent):
    def __init__(self, real: Agent):
        super().__init__(real.name, real.config)
        self.turns: list[Turn] = []

    async def reply(self, turn: Turn) -> str:
        self.turns.append(turn)
        return ""


def _prompt_chars(agent: Agent, turn: Turn) -> int:
    system = sum(len(getattr(agent.config, f, None) or "") for f in ("system", "persona"))
    return system + sum(len(m["content"]) for m in turn.as_chat())


def estimate(scenario: Scenario) -> Estimate:
    real = build_agents(scenario)
    specs = plan(scenario)
    calls: dict[str, float] = defaultdict(float)
    prompt_chars: dict[str, float] = defaultdict(float)
    entries = []
    for entry in scenario.games:
        members = [s for s in specs if s.group == entry.name]
        settings = MatchSettings(turn_timeout=60, max_retries=0, max_rounds=scenario.match.max_rounds)
        stand_ins = {name: _StandIn(agent) if agent.makes_calls else agent for name, agent in real.items()}
        trio.run(play_match, members[0].model_copy(update={"settings": settings}), stand_ins)
        every = [(agent, turn) for agent in stand_ins.values() if isinstance(agent, _StandIn) for turn in agent.turns]
        asked = [(a, t) for a, t in every if t.seat != JUDGE]
        for agent, turn in every:  # a referee's judge is asked in every match, whoever is seated
            if turn.seat == JUDGE:
                calls[agent.name] += len(members)
                prompt_chars[agent.name] += len(members) * _prompt_chars(agent, turn)
        model_seats = sum(1 for name in members[0].agents if real[name].makes_calls)
        per_seat = len(asked) / model_seats if model_seats else 0.0
        per_call = sum(_prompt_chars(a, t) for a, t in asked) / len(asked) if asked else 0.0
        for spec in members:
            for name in spec.agents:
                if real[name].makes_calls:
                    calls[name] += per_seat
                    prompt_chars[name] += per_seat * per_call
        rule = scenario.tournament_for(entry).repeats
        cap = None if isinstance(rule, int) else len(plan_entry(scenario, entry, 1, rule.max))
        entries.append(EntryEstimate(group=entry.name, matches=len(members), calls_per_match=len(every), until_stable_cap=cap))
    agents = []
    for name, agent in real.items():
        if not agent.makes_calls:
            continue
        n = round(calls[name])
        prompt = round(prompt_chars[name] / 4)
        completion = n * agent.config.max_tokens
        agents.append(AgentEstimate(
            agent=name, backend=agent.config.backend, model=getattr(agent.config, "model", None), calls=n,
            prompt_tokens=prompt, completion_tokens_max=completion,
            cost_max=agent.cost_of(prompt, completion, {m: (p.input, p.output) for m, p in scenario.prices.items()}),
        ))
    return Estimate(matches=len(specs), entries=entries, agents=agents)
