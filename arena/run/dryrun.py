"""`arena run --dry-run`: what a scenario would ask of its models, before it asks anything.

One match of each game entry is played offline with stand-ins for the agents that call
models. A stand-in answers with the game's example reply (``Game.example_reply``; a judge,
with that of the referee asking it, ``Referee.example_reply``): a valid reply about as long
as a model's, so the match takes the path a run takes, and later prompts carry replies of a
run's length. Scripted agents play as themselves.

That match gives, per entry, the calls, the prompt tokens of each call as a backend sends it
(the system prompt and the whole conversation so far, see ``prompt_tokens``) and the reply
tokens expected (the example replies, counted the same way). Replies are also bounded by
``max_tokens`` per call, which gives the most a run can cost. A turn the game has no valid
example for takes the game's default and is reported, as the match may then end early.
"""

from __future__ import annotations

from collections import defaultdict

import trio
from pydantic import BaseModel

from arena.contract.agent import Agent
from arena.contract.errors import ConfigError, Problem
from arena.contract.events import ActionTaken
from arena.contract.messages import Turn
from arena.contract.records import MatchSettings
from arena.engine.match import JUDGE, Match, seat_order
from arena.run.runner import build_agents
from arena.run import adaptive_schedule
from arena.contract.records import MatchSpec
from arena.run.scenario import Scenario, entry_cases, entry_matches, live_sides
from arena.run.tournament import plan, plan_entry

CHARS_PER_TOKEN = 4  # English text in the usual tokenizers, near enough for a budget
TOKENS_PER_MESSAGE = 3  # what a chat format adds around each message (role markers)
# what a live contestant's kept answer is taken to be in a dry run's sample comparison: about as long as a model's
EXAMPLE_ANSWER = " ".join(["An answer of about the length a model writes, point by point."] * 16)


def prompt_tokens(system: str | None, messages: list[dict[str, str]]) -> float:
    """About how many tokens a request of this system prompt and these chat messages is."""
    chars = len(system or "") + sum(len(m["content"]) for m in messages)
    return chars / CHARS_PER_TOKEN + TOKENS_PER_MESSAGE * (len(messages) + bool(system))


def reply_tokens(text: str) -> float:
    return len(text) / CHARS_PER_TOKEN


class AgentEstimate(BaseModel):
    agent: str
    backend: str
    model: str | None
    calls: int
    prompt_tokens: int
    completion_tokens: int  # expected: replies as long as the games' examples
    completion_tokens_max: int | None  # every reply at max_tokens; None for a backend without max_tokens
    cost: float | None  # USD, expected; None when the model's price is unknown
    cost_max: float | None


class AdaptiveRange(BaseModel):
    """What an adaptive entry may ask for: at least its seed block, at most every comparison (or its budget).
    Every comparison is a match of the same shape (one judge, one pair, both orders), so calls and cost
    scale with the number of matches."""

    most: int  # matches (comparisons) at most
    limited_by: str  # "budget" or "design": what sets ``most``
    calls: tuple[int, int]
    cost: tuple[float, float] | None  # USD; None when a judge's model has no known price
    # live contestants: answers asked (the seed block's needs, to every contestant on every case), their
    # calls and cost; ``calls`` and ``cost`` above are then the judges' alone
    answers: tuple[int, int] | None = None
    answer_calls: tuple[int, int] | None = None
    answer_cost: tuple[float, float] | None = None


class EntryEstimate(BaseModel):
    group: str
    matches: int
    calls_per_match: float
    prompt_tokens_per_match: int
    completion_tokens_per_match: int
    defaulted: int  # turns of the sample match with no valid example reply: they took the game's default
    until_stable_cap: int | None  # matches at most, when repeats are until_stable
    adaptive: AdaptiveRange | None = None  # an adaptive schedule's range, from its seed block (``matches``) up


class Estimate(BaseModel):
    matches: int
    entries: list[EntryEstimate]
    agents: list[AgentEstimate]


class _StandIn(Agent):
    """Plays a model agent in the sample match: notes each turn, answers with the example reply of
    the match it is seated in (``match``, given once that match is built)."""

    def __init__(self, real: Agent):
        super().__init__(real.name, real.config)
        self.match: Match | None = None
        config = real.config
        self.system = "\n\n".join(p for p in (getattr(config, "system", None), getattr(config, "persona", None)) if p) or None
        self.asked: list[tuple[Turn, str, bool]] = []  # (turn, reply, asked by a referee rather than seated)

    async def reply(self, turn: Turn) -> str:
        match, game = self.match, self.match.game
        by_referee = turn.seat == JUDGE
        if by_referee:
            found = (referee.example_reply(game, self.name) for referee in match.referees)
            text = next((t for t in found if t is not None), None)
        else:
            text = game.example_reply(turn.seat, turn.round)
        self.asked.append((turn, text or "", by_referee))
        return text or ""

    def prompt_tokens(self, turn: Turn) -> float:
        return prompt_tokens(self.system, turn.as_chat())


def _spent(real: dict[str, Agent], before, after, prices) -> tuple[float, float | None]:
    """The calls and cost (None: a price unknown) the agents added between ``before`` and ``after``."""
    calls, costs = 0.0, []
    for name, agent in real.items():
        n = after[0].get(name, 0.0) - before[0].get(name, 0.0)
        if not agent.makes_calls or not n:
            continue
        calls += n
        costs.append(agent.cost_of(round(after[1][name] - before[1].get(name, 0.0)),
                                   round(after[2][name] - before[2].get(name, 0.0)), prices))
    return calls, None if any(c is None for c in costs) else sum(costs)


def _adaptive_range(scenario: Scenario, entry, real: dict[str, Agent], seeded: int, before, after, prices,
                    answered: tuple[int, tuple, tuple] | None = None) -> AdaptiveRange | None:
    """An adaptive entry's calls and cost, from the ``seeded`` matches of its seed block (the figures
    this entry added between ``before`` and ``after``) up to its most matches. ``answered``: with live
    contestants, the seed block's answer matches and the figures before and after them."""
    schedule = scenario.tournament_for(entry).schedule
    if schedule is None:
        return None
    most = entry_matches(scenario, entry, 1)
    full = len(adaptive_schedule.candidates(scenario, entry))
    calls, cost = _spent(real, before, after, prices)
    scale = most / seeded
    found = AdaptiveRange(most=most, limited_by="budget" if most < full else "design",
                          calls=(round(calls), round(calls * scale)),
                          cost=None if cost is None else (cost, cost * scale))
    if answered is not None:  # at most every contestant answers every case, once
        asked, start, end = answered
        contestants, _ = live_sides(scenario, entry)
        every = len(contestants) * len(entry_cases(entry))
        calls, cost = _spent(real, start, end, prices)
        found.answers = (asked, every)
        found.answer_calls = (round(calls), round(calls * every / asked))
        found.answer_cost = None if cost is None else (cost, cost * every / asked)
    return found


def estimate(scenario: Scenario, limit: int | None = None) -> Estimate:
    """``limit``: of the first ``limit`` matches only, as `arena run --limit` plays them."""
    real = build_agents(scenario)
    specs = plan(scenario)[:limit]
    prices = {m: (p.input, p.output) for m, p in scenario.prices.items()}
    calls: dict[str, float] = defaultdict(float)
    prompt: dict[str, float] = defaultdict(float)
    completion: dict[str, float] = defaultdict(float)
    entries = []

    def sample(members: list[MatchSpec]):
        """Plays the first of ``members`` with stand-ins, and counts every member's calls and tokens as its."""
        settings = MatchSettings(turn_timeout=60, max_retries=0, max_rounds=scenario.match.max_rounds)
        # a person is never asked in a dry run: a stand-in answers for them too, and their turns cost nothing
        by_name = {name: _StandIn(agent) for name, agent in real.items() if agent.makes_calls or agent.uses_terminal}
        try:
            match = Match(members[0].model_copy(update={"settings": settings}), {**real, **by_name})
        except Exception as exc:  # `arena validate` catches what it can; say what it could not, rather than count nothing
            raise ConfigError([Problem(("games", entry.name), f"its first match cannot be set up: {exc}")]) from None
        for stand_in in by_name.values():
            stand_in.match = match
        stand_ins = [stand_in for name, stand_in in by_name.items() if real[name].makes_calls]
        record = trio.run(match.play).record
        every = [(agent, turn, text, judging) for agent in stand_ins for turn, text, judging in agent.asked]
        for agent, turn, text, judging in every:  # a referee's judge is asked in every match, whoever is seated
            if judging:
                calls[agent.name] += len(members)
                prompt[agent.name] += len(members) * agent.prompt_tokens(turn)
                completion[agent.name] += len(members) * reply_tokens(text)
        # A seat's calls go to whoever the plan seats there in each match: a judge seated at the
        # table (role_swap off) is asked far more often than a contestant, so no even spread.
        index = {seat.label: i for i, seat in enumerate(match.seats)}
        per_seat: dict[int, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])  # calls, prompt, completion
        for agent, turn, text, judging in every:
            if not judging:
                figures = per_seat[index[turn.seat]]
                figures[0] += 1
                figures[1] += agent.prompt_tokens(turn)
                figures[2] += reply_tokens(text)
        # a seat a scripted agent held in the sample match: the mean of the model seats observed
        mean = [sum(f[k] for f in per_seat.values()) / len(per_seat) for k in range(3)] if per_seat else [0.0] * 3
        for spec in members:
            for i, name in enumerate(seat_order(spec)):
                if real[name].makes_calls:
                    n, p, c = per_seat.get(i, mean)
                    calls[name] += n
                    prompt[name] += p
                    completion[name] += c
        asked = {(t.seat, t.round) for _, t, _, _ in every}
        defaulted = sum(1 for e in record.events if isinstance(e, ActionTaken) and e.defaulted and (e.seat, e.round) in asked)
        return every, defaulted

    for entry in scenario.games:
        members = [s for s in specs if s.group == entry.name]
        if not members:  # all past the limit
            continue
        answered = None
        if live_sides(scenario, entry) is not None:  # the plan's answer matches, then the seed block's comparisons
            start = (dict(calls), dict(prompt), dict(completion))
            sample(members)
            answered = (len(members), start, (dict(calls), dict(prompt), dict(completion)))
            members = adaptive_schedule.sample_comparisons(scenario, entry, EXAMPLE_ANSWER)
        before = (dict(calls), dict(prompt), dict(completion))
        every, defaulted = sample(members)
        rule = scenario.tournament_for(entry).repeats
        cap = None if isinstance(rule, int) or limit is not None else len(plan_entry(scenario, entry, 1, rule.max))
        entries.append(EntryEstimate(
            group=entry.name, matches=len(members), calls_per_match=len(every),
            prompt_tokens_per_match=round(sum(a.prompt_tokens(t) for a, t, _, _ in every)),
            completion_tokens_per_match=round(sum(reply_tokens(text) for _, _, text, _ in every)),
            defaulted=defaulted, until_stable_cap=cap,
            adaptive=_adaptive_range(scenario, entry, real, len(members), before, (calls, prompt, completion), prices,
                                     answered),
        ))
    out = []
    for name, agent in real.items():
        if not agent.makes_calls:
            continue
        n = round(calls[name])
        cap = getattr(agent.config, "max_tokens", None)  # a plugin's config need not bound its replies
        most = None if cap is None else n * cap
        expected = round(completion[name]) if most is None else min(round(completion[name]), most)
        out.append(AgentEstimate(
            agent=name, backend=agent.config.backend, model=getattr(agent.config, "model", None), calls=n,
            prompt_tokens=round(prompt[name]), completion_tokens=expected, completion_tokens_max=most,
            cost=agent.cost_of(round(prompt[name]), expected, prices), cost_max=None if most is None else agent.cost_of(round(prompt[name]), most, prices),
        ))
    return Estimate(matches=len(specs), entries=entries, agents=out)
