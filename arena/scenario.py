"""Scenario files: YAML, checked field by field before anything runs."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import plugins
from .agent import Agent, AgentConfig
from .errors import ConfigError, Problem
from .match import MatchSettings


class GameEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    game: str = Field(description="A registered game; `arena games` lists them.")
    label: str | None = Field(None, description="Name for this entry in results; default: the game's name.")
    params: dict[str, Any] = Field(default_factory=dict, description="The game's parameters.")
    agents: list[str] = Field(min_length=1, description="Agents at the table, one per seat.")
    repeats: int = Field(1, ge=1, description="How many matches to play.")
    shuffle_seats: bool = Field(True, description="Draw the seat order from each match's seed.")
    referee: str | None = Field(None, description="Override the game's default referee.")

    @property
    def name(self) -> str:
        return self.label or self.game


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Short name of the scenario.")
    description: str = ""
    seed: int = Field(0, description="Every match's seed is derived from this one.")
    agents: dict[str, dict[str, Any]] = Field(min_length=1, description="Agent name -> backend and its parameters.")
    games: list[GameEntry] = Field(min_length=1)
    match: MatchSettings = Field(default_factory=MatchSettings)
    concurrency: int = Field(4, ge=1, description="Matches played at once.")

    def agent_config(self, name: str) -> tuple[type[Agent], AgentConfig]:
        raw = self.agents[name]
        backend = plugins.load("agent backend", raw["backend"])
        return backend, backend.Config.model_validate(raw)


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
    return parse_scenario(raw, source)


def parse_scenario(raw: Any, source: str = "<scenario>") -> Scenario:
    if not isinstance(raw, dict):
        raise ConfigError([Problem((), "expected a mapping with keys name, agents, games", raw, True)], source)
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        vocabulary = [f for model in (Scenario, GameEntry, MatchSettings) for f in model.model_fields]
        raise ConfigError.from_validation(exc, source=source, vocabulary=vocabulary) from None
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
            problems += ConfigError.from_validation(exc, prefix=loc, vocabulary=backend.Config.model_fields).problems
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
        for j, agent in enumerate(entry.agents):
            if agent not in scenario.agents:
                close = difflib.get_close_matches(agent, list(scenario.agents), n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                problems.append(Problem(loc + ("agents", j), f"no agent named {agent!r} under `agents`{hint}"))
        if entry.referee is not None:
            try:
                plugins.load("referee", entry.referee)
            except plugins.UnknownPlugin as exc:
                problems.append(Problem(loc + ("referee",), str(exc)))
        try:
            game = plugins.load("game", entry.game)
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(loc + ("game",), str(exc)))
            continue
        try:
            game.Params.model_validate(entry.params)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=loc + ("params",), vocabulary=game.Params.model_fields).problems
        n = len(entry.agents)
        if n < game.min_seats or (game.max_seats is not None and n > game.max_seats):
            wanted = f"at least {game.min_seats}" if game.max_seats is None else (
                str(game.min_seats) if game.min_seats == game.max_seats else f"{game.min_seats} to {game.max_seats}")
            problems.append(Problem(loc + ("agents",), f"{entry.game} needs {wanted} players; {n} listed"))
    return problems
