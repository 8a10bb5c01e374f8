"""Scenario files: YAML, checked field by field before anything runs."""

from __future__ import annotations

import difflib
import hashlib
import json
import typing
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from arena.contract import plugins
from arena.contract.agent import Agent, AgentConfig
from arena.contract.errors import ConfigError, Problem, spelling_hint
from arena.services.calls import Budget, LimitSettings
from arena.contract.records import MatchSettings
from arena.contract.referee import RefereeSpec


class UntilStable(BaseModel):
    """Add blocks of repeats until the ranking stops moving (DeepEval's stableness condition)."""

    model_config = ConfigDict(extra="forbid")

    block: int = Field(5, ge=1, description="Repeats added per step.")
    min: int = Field(10, ge=1, description="Repeats before stopping is considered.")
    max: int = Field(50, ge=1, description="Cap: never more repeats than this.")
    tau: float = Field(0.9, ge=-1, le=1, description="Kendall's tau between successive rankings must reach this.")
    width: float = Field(1.0, gt=0, description="Every 95% interval must be at most this wide (payoff units).")

    @model_validator(mode="after")
    def _ordered(self) -> "UntilStable":
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be at least min ({self.min})")
        return self


class Tournament(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["fixed", "round_robin", "all_pairs"] = Field(
        "fixed",
        description="fixed: the listed agents at one table; round_robin: every group of `seats` agents; "
        "all_pairs: every pair (two-seat games).",
    )
    seating: Literal["rotate", "random"] = Field(
        "rotate", description="rotate: repeat k shifts the seat order by k, balancing positions; random: drawn from the seed."
    )
    role_swap: bool = Field(
        True,
        description="In games whose seats have different roles, play every rotation of roles; false: agents keep the "
        "seats (and roles) in the order they are listed.",
    )
    repeats: int | Literal["until_stable"] | UntilStable = Field(1, description="A number, or until_stable.")

    @field_validator("repeats")
    @classmethod
    def _repeats(cls, value):
        if value == "until_stable":
            return UntilStable()
        if isinstance(value, int) and value < 1:
            raise ValueError("repeats must be at least 1, or until_stable")
        return value


class GameEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    game: str = Field(description="A registered game; `arena games` lists them.")
    label: str | None = Field(None, description="Name for this entry in results; default: the game's name.")
    params: dict[str, Any] = Field(default_factory=dict, description="The game's parameters.")
    agents: list[str] | None = Field(None, min_length=1, description="Agents taking part; default: all of them.")
    seats: int | None = Field(None, ge=1, description="Players per table; default: all listed agents (fixed), 2 (all_pairs).")
    referee: list[RefereeSpec] | None = Field(
        None,
        description="Override the game's default referee: a name, {use: name, ...its params}, or a list of them "
        "(the first gives the payoff, the others add metrics).",
    )
    tournament: Tournament | None = Field(None, description="Replaces the scenario's tournament block for this game.")

    @property
    def name(self) -> str:
        return self.label or self.game

    @field_validator("referee", mode="before")
    @classmethod
    def _referees(cls, value):
        """``rules`` or ``{use: llm_judge, agent: judge}`` or a list of either, as RefereeSpecs."""
        if value is None:
            return None
        items = value if isinstance(value, list) else [value]
        specs = []
        for item in items:
            if isinstance(item, str):
                specs.append({"use": item})
            elif isinstance(item, dict) and "use" in item and "params" not in item:
                specs.append({"use": item["use"], "params": {k: v for k, v in item.items() if k != "use"}})
            else:
                specs.append(item)  # let the model say what is wrong with it
        return specs


class Concurrency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    matches: int = Field(4, ge=1, description="Matches played at once.")
    per_agent: int | None = Field(None, ge=1, description="Matches one agent may be in at once (default: no limit).")
    agents: dict[str, int] = Field(default_factory=dict, description="Per-agent limits overriding per_agent.")

    def limit_for(self, agent: str) -> int | None:
        return self.agents.get(agent, self.per_agent)


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="USD per million prompt tokens.")
    output: float = Field(ge=0, description="USD per million completion tokens.")


VENDOR_TERMS = (
    "OpenAI", "ChatGPT", "GPT", "Anthropic", "Claude", "Google", "Gemini", "Gemma", "PaLM", "Bard", "Meta",
    "Llama", "Mistral", "Mixtral", "Qwen", "DeepSeek", "Vicuna", "Phi",
)


class Anonymity(BaseModel):
    """Scrub self-identifying strings from what a seat's words look like to other seats."""

    model_config = ConfigDict(extra="forbid")

    scrub: bool = Field(True, description="Turn the filter on.")
    terms: list[str] = Field(default_factory=list, description="More strings to scrub.")
    vendors: bool = Field(True, description="Also scrub well-known model and vendor names.")
    replacement: str = Field("[name withheld]", description="What a scrubbed string becomes.")


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Short name of the scenario; the run directory is named after it.")
    description: str = ""
    seed: int = Field(0, description="Every match's seed is derived from this one and the match's key.")
    output: str = Field("runs", description="Folder holding run directories, relative to the working directory.")
    agents: dict[str, dict[str, Any]] = Field(min_length=1, description="Agent name -> backend and its parameters.")
    games: list[GameEntry] = Field(min_length=1)
    tournament: Tournament = Field(default_factory=Tournament)
    match: MatchSettings = Field(default_factory=MatchSettings)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    limits: dict[str, LimitSettings] = Field(default_factory=dict, description="Per backend: calls at once, requests and tokens per minute.")
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="Model -> USD per million tokens, added to the built-in table; or a YAML file of that mapping.",
    )
    budget: Budget | None = Field(None, description="No new match starts once this is spent.")
    anonymity: Anonymity | None = Field(None, description="Scrub model and vendor names from what other seats see.")
    cache: str | None = Field(None, description="Response cache file; default: responses.sqlite in the run directory.")

    @field_validator("concurrency", mode="before")
    @classmethod
    def _concurrency_shorthand(cls, value):
        return {"matches": value} if isinstance(value, int) and not isinstance(value, bool) else value

    def agent_config(self, name: str) -> tuple[type[Agent], AgentConfig]:
        raw = self.agents[name]
        backend = plugins.load("agent backend", raw["backend"])
        return backend, backend.Config.model_validate(raw)

    def scrub_terms(self) -> tuple[str, ...]:
        """What the anonymity filter removes: agent names, their models, and (by default) vendor names."""
        if self.anonymity is None or not self.anonymity.scrub:
            return ()
        terms = list(self.anonymity.terms) + list(self.agents)
        terms += [str(raw["model"]) for raw in self.agents.values() if isinstance(raw, dict) and raw.get("model")]
        if self.anonymity.vendors:
            terms += VENDOR_TERMS
        return tuple(sorted({t for t in terms if len(t) >= 3}, key=lambda t: (-len(t), t)))  # "a" would eat words

    def tournament_for(self, entry: GameEntry) -> Tournament:
        return entry.tournament or self.tournament

    def agents_for(self, entry: GameEntry) -> list[str]:
        return list(entry.agents) if entry.agents is not None else list(self.agents)

    def fingerprint(self) -> str:
        """What makes two runs the same run: everything that decides which matches are played and how."""
        meaning = self.model_dump(mode="json", include={"seed", "agents", "games", "tournament", "match", "anonymity"})
        return hashlib.sha256(json.dumps(meaning, sort_keys=True).encode()).hexdigest()


def _model_at(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model that validates the mapping at ``loc`` in a scenario, if any."""
    model: type[BaseModel] | None = Scenario
    for part in loc:
        if model is None or isinstance(part, int):
            continue
        field = model.model_fields.get(part)
        if field is None:
            return None
        model = _inner_model(field.annotation)
    return model


def _inner_model(annotation) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in typing.get_args(annotation):
        found = _inner_model(arg)
        if found is not None:
            return found
    return None


def _scenario_hint(loc: tuple[Any, ...]) -> str | None:
    """For an unknown key: the closest key of its own block, or the block where the key belongs."""
    key, here = str(loc[-1]), _model_at(loc[:-1])
    homes = {"tournament": Tournament, "match": MatchSettings, "concurrency": Concurrency, "games[i]": GameEntry,
             "budget": Budget, "anonymity": Anonymity}
    for place, model in homes.items():
        if model is not here and key in model.model_fields:
            return f"`{key}` belongs in the {place} block"
    if here is not Scenario and key in Scenario.model_fields:
        return f"`{key}` belongs at the top level"
    if here is not None:
        close = difflib.get_close_matches(key, list(here.model_fields), n=1, cutoff=0.6)
        if close:
            return f"did you mean {close[0]!r}?"
    return None


def load_scenario(path: str | Path) -> Scenario:
    path = Path(path)
    source = str(path)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Problem((), "file not found")], source) from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark else ""
        problem = getattr(exc, "problem", None) or str(exc)
        raise ConfigError([Problem((), f"not valid YAML: {where}{problem}")], source) from None
    if isinstance(raw, dict) and isinstance(raw.get("prices"), str):
        raw["prices"] = _load_prices(path.parent / raw["prices"], source)
    return parse_scenario(raw, source)


def _load_prices(path: Path, source: str) -> Any:
    """`prices: FILE` reads the same mapping from a YAML file, relative to the scenario."""
    try:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError([Problem(("prices",), f"no prices file at {path}")], source) from None
    except yaml.YAMLError as exc:
        raise ConfigError([Problem(("prices",), f"{path} is not valid YAML: {exc}")], source) from None


def parse_scenario(raw: Any, source: str = "<scenario>") -> Scenario:
    if not isinstance(raw, dict):
        raise ConfigError([Problem((), "expected a mapping with keys name, agents, games", raw, True)], source)
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        raise ConfigError.from_validation(exc, source=source, hint=_scenario_hint) from None
    problems = _check_agents(scenario) + _check_games(scenario)
    if problems:
        raise ConfigError(problems, source)
    return scenario


def _check_agents(scenario: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    for name, raw in scenario.agents.items():
        loc = ("agents", name)
        if not isinstance(raw, dict) or "backend" not in raw:
            problems.append(Problem(loc + ("backend",), f"required field is missing; one of: {', '.join(plugins.names('agent backend'))}"))
            continue
        try:
            backend = plugins.load("agent backend", raw["backend"])
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(loc + ("backend",), str(exc)))
            continue
        try:
            config = backend.Config.model_validate(raw)
            backend.check(config)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=loc, hint=spelling_hint(backend.Config.model_fields)).problems
        except ConfigError as exc:
            problems += exc.prefixed(loc).problems
    return problems


def _check_games(scenario: Scenario) -> list[Problem]:
    problems: list[Problem] = []
    labels: dict[str, int] = {}
    for i, entry in enumerate(scenario.games):
        loc = ("games", i)
        if entry.name in labels:
            problems.append(Problem(loc + ("label",), f"entries {labels[entry.name]} and {i} share the name {entry.name!r}; give one a distinct `label`"))
        labels.setdefault(entry.name, i)
        players = scenario.agents_for(entry)
        for j, agent in enumerate(entry.agents or []):
            if agent not in scenario.agents:
                close = difflib.get_close_matches(agent, list(scenario.agents), n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                problems.append(Problem(loc + ("agents", j), f"no agent named {agent!r} under `agents`{hint}"))
        if len(set(players)) != len(players):
            problems.append(Problem(loc + ("agents",), "an agent is listed twice; list each once"))
        problems += _check_referees(scenario, entry, loc)
        try:
            game = plugins.load("game", entry.game)
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(loc + ("game",), str(exc)))
            continue
        problems += _check_table(scenario, entry, game, players, loc)
        try:
            params = game.Params.model_validate(entry.params)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=loc + ("params",), hint=spelling_hint(game.Params.model_fields)).problems
            continue
        seat_problem = game.seat_problem(params, table_size(scenario, entry))
        if seat_problem:
            problems.append(Problem(loc + ("params",), seat_problem))
        try:
            game.cases(params)
        except (OSError, ValueError) as exc:
            problems.append(Problem(loc + ("params",), str(exc)))
    return problems


def _check_referees(scenario: Scenario, entry: GameEntry, loc) -> list[Problem]:
    problems: list[Problem] = []
    metrics: dict[str, int] = {}
    for i, spec in enumerate(entry.referee or []):
        where = loc + ("referee", i)
        try:
            referee = plugins.load("referee", spec.use)
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(where + ("use",), str(exc)))
            continue
        try:
            params = referee.Params.model_validate(spec.params)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=where, hint=spelling_hint(referee.Params.model_fields)).problems
            continue
        metric = getattr(params, "metric", None)
        if metric is not None and metric in metrics:
            problems.append(Problem(where + ("metric",), f"referees {metrics[metric]} and {i} both report the metric "
                                    f"{metric!r}; give one another `metric` name"))
        metrics.setdefault(metric, i)
        for agent in referee.agents_needed(params):
            if agent not in scenario.agents:
                close = difflib.get_close_matches(agent, list(scenario.agents), n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else "; define it under `agents`"
                problems.append(Problem(where + ("agent",), f"no agent named {agent!r}{hint}"))
    return problems


def table_size(scenario: Scenario, entry: GameEntry) -> int:
    fmt = scenario.tournament_for(entry).format
    if entry.seats is not None:
        return entry.seats
    return 2 if fmt == "all_pairs" else len(scenario.agents_for(entry))


def _check_table(scenario: Scenario, entry: GameEntry, game, players: list[str], loc) -> list[Problem]:
    fmt = scenario.tournament_for(entry).format
    n = table_size(scenario, entry)
    problems = []
    if fmt == "fixed" and n != len(players):
        problems.append(Problem(loc + ("seats",), f"a fixed table seats every listed agent: {len(players)}, not {n}; remove `seats` or use format round_robin"))
    if fmt == "all_pairs" and n != 2:
        problems.append(Problem(loc + ("seats",), f"all_pairs plays two-seat tables; seats is {n}; use round_robin for larger tables"))
    if n > len(players):
        problems.append(Problem(loc + ("seats",), f"tables of {n} need at least {n} agents; {len(players)} take part"))
    if n < game.min_seats or (game.max_seats is not None and n > game.max_seats):
        wanted = f"at least {game.min_seats}" if game.max_seats is None else (
            str(game.min_seats) if game.min_seats == game.max_seats else f"{game.min_seats} to {game.max_seats}")
        where = loc + ("agents",) if fmt == "fixed" and entry.seats is None else loc + ("seats",)
        problems.append(Problem(where, f"{entry.game} needs {wanted} players; the tables here have {n}"))
    return problems
