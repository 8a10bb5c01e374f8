"""Scenario files: YAML, checked field by field before anything runs."""

from __future__ import annotations

import codecs
import difflib
import hashlib
import json
import os
import types
import typing
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, ValidationError, field_validator, model_validator

from arena.contract import plugins
from arena.contract.agent import Agent, AgentConfig
from arena.contract.capabilities import AnswersOnce, HasCases, PlaysComparisons, ReportsReviews, describe, has
from arena.contract.errors import ConfigError, Problem, spelling_hint
from arena.contract.game import Game
from arena.contract.paths import path_fields
from arena.services.calls import Budget, LimitSettings
from arena.contract.records import MatchSettings
from arena.contract.referee import RefereeSpec
from arena.engine.anonymity import VENDOR_TERMS, identity_names  # noqa: F401  (VENDOR_TERMS: read from here too)
from arena.rank.adaptive import swiss_rounds
from arena.run.overrides import Override, apply_overrides, mark_problems
from arena.run.placement import RESOURCES, Need, Resources, need
from arena.run.seating import orders_per_table, tables_count
from arena.run.yamlfile import read_yaml

# Sizes a scenario may ask for. Past them it is a mistake (a stray zero) long before it is a plan:
# checked on the numbers, before anything is built.
MAX_REPEATS = 10_000
MAX_MATCHES = 100_000  # in one run, until_stable counted at its cap
MAX_ROUNDS = 100_000  # match.max_rounds
MAX_RETRIES = 100  # match.max_retries
MAX_NAME = 100
MAX_AT_ONCE = 10_000  # concurrency: matches (or one agent's matches) in flight at once


class UntilStable(BaseModel):
    """Add blocks of repeats until the ranking stops moving (DeepEval's stableness condition)."""

    model_config = ConfigDict(extra="forbid")

    block: int = Field(5, ge=1, le=MAX_REPEATS, description="Repeats added per step.")
    min: int = Field(10, ge=1, le=MAX_REPEATS, description="Repeats before stopping is considered.")
    max: int = Field(50, ge=1, le=MAX_REPEATS, description="Cap: never more repeats than this.")
    tau: float = Field(0.9, ge=-1, le=1, description="Kendall's tau between successive rankings must reach this.")
    # A share of the payoffs' range, so that one number suits a game paying 0 or 1 and one paying tens of
    # coins. 0.2 asks each mean to within about a tenth of the range either way: enough to tell apart agents
    # whose means differ by a fifth of it, and reached by a coin-flip 0/1 payoff after about 100 matches an
    # agent (1.96 * 0.5 / sqrt(n) <= 0.1), within the default cap for a few agents playing each other.
    width: float = Field(0.2, gt=0, description="Every 95% interval must be at most this share of the payoff "
                         "range observed in the entry (its highest payoff minus its lowest, over every seat of every "
                         "finished match).")
    width_abs: float | None = Field(None, gt=0, description="Instead of width: the widest a 95% interval may be, in "
                                    "payoff units.")

    @field_validator("width")
    @classmethod
    def _a_share(cls, value: float) -> float:
        if value > 1:  # an interval is never wider than the range: such a width could never hold a run back
            raise ValueError("width is a share of the payoff range, at most 1; for a width in "
                             "payoff units, use width_abs")
        return value

    @model_validator(mode="after")
    def _ordered(self) -> "UntilStable":
        if self.max < self.min:
            raise ValueError(f"max ({self.max}) must be at least min ({self.min})")
        return self


class Schedule(BaseModel):
    """An adaptive schedule: which comparisons (question, pair of answers, judge) an entry asks for,
    block by block, rather than every one of them. Each comparison is one match in which the judge
    sees the pair in both orders."""

    model_config = ConfigDict(extra="forbid")

    rule: Literal["default", "interval", "elimination", "uniform", "full"] = Field(
        "default", description="How the next block is chosen: default (Arena's), interval (Chatbot Arena's "
        "interval shrink), elimination (stop comparing a contestant whose place is settled), uniform (at random), "
        "full (every comparison, in a fixed order).")
    seed_block: int = Field(2, ge=1, le=MAX_REPEATS,
                            description="Comparisons each contestant takes part in first, before any is chosen.")
    block: int = Field(20, ge=1, le=MAX_MATCHES, description="Comparisons chosen per block after the seed block.")
    budget: int | None = Field(None, ge=1, le=MAX_MATCHES,
                               description="Most comparisons asked for, the seed block included; each is one match in "
                               "which the judge is asked 2 x samples times (both orders). Default: all of them.")
    tau: float = Field(0.9, ge=-1, le=1, description="Stable once Kendall's tau between the contestants' ranking "
                       "before and after a block reaches this, and `width` holds.")
    width: float = Field(200.0, gt=0, description="Stable only when every contestant's 95% interval of its "
                         "Bradley-Terry rating is at most this wide, in Elo points (400: a factor of 10 in odds).")


class Tournament(BaseModel):
    model_config = ConfigDict(extra="forbid")

    format: Literal["fixed", "round_robin", "all_pairs", "swiss"] = Field(
        "fixed",
        description="fixed: the listed agents at one table; round_robin: every group of `seats` agents; "
        "all_pairs: every pair (two-seat games); swiss: pairs by standing, round by round, for ceil(log2 N) "
        "rounds (or until stable with repeats: until_stable).",
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
    schedule: Schedule | None = Field(None, description="For a game that reports reviews: ask for the comparisons "
                                      "that say most about the ranking, block by block, until it is stable or the "
                                      "budget is spent (see docs/adaptive.md).")

    @field_validator("repeats", mode="wrap")
    @classmethod
    def _repeats(cls, value, handler):
        """One reading per kind of value, so that a mistake gets one message rather than one per
        member of the union."""
        if value == "until_stable":
            return UntilStable()
        if isinstance(value, (dict, UntilStable)):
            return UntilStable.model_validate(value)
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError("expected a whole number of repeats, until_stable, or {block, min, max, tau, width, width_abs}")
        if value < 1:
            raise ValueError("repeats must be at least 1, or until_stable")
        if value > MAX_REPEATS:
            raise ValueError(f"repeats may be at most {MAX_REPEATS:,}; for more certainty per match, use until_stable "
                             "or more cases")
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
    # referee number -> what it asks a Ray worker for (its `resources:`, taken out of its parameters when checked)
    _referee_resources: dict[int, Resources] = PrivateAttr(default_factory=dict)

    @model_validator(mode="before")
    @classmethod
    def _a_block(cls, value):
        if isinstance(value, str):  # `- some_game`: the entry's first line without its key
            raise ValueError(f"expected a block of fields, such as `game: {value}`")
        return value

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
            elif isinstance(item, dict) and RESOURCES in item and isinstance(item.get("params"), dict):
                # beside `params`, as beside the flat form's parameters: taken out again when checked
                specs.append({k: v for k, v in item.items() if k != RESOURCES}
                             | {"params": item["params"] | {RESOURCES: item[RESOURCES]}})
            else:
                specs.append(item)  # let the model say what is wrong with it
        return specs


class Concurrency(BaseModel):
    model_config = ConfigDict(extra="forbid")

    matches: int = Field(4, ge=1, le=MAX_AT_ONCE, description="Matches played at once.")
    per_agent: int | None = Field(None, ge=1, le=MAX_AT_ONCE,
                                  description="Matches one agent may be in at once (default: no limit).")
    agents: dict[str, Annotated[int, Field(ge=1, le=MAX_AT_ONCE)]] = Field(
        default_factory=dict, description="Per-agent limits overriding per_agent.")
    processes: int = Field(1, ge=1, le=256, description="The older spelling of execution: {executor: processes, "
                           "workers: N}; it still works, with a note.")

    def limit_for(self, agent: str) -> int | None:
        return self.agents.get(agent, self.per_agent)


class Execution(BaseModel):
    """Where the matches are played. Whatever the executor, the run's own process keeps the plan, the
    limits, the budget and the store (it is their one writer), and a match's result depends only on its
    spec and seed, so the store and the export are the same."""

    model_config = ConfigDict(extra="forbid")

    executor: Literal["local", "processes", "ray"] = Field(
        "local", description="local: the run's own process; processes: worker processes forked on this machine; "
        "ray: Ray actors on a cluster (pip install 'arena-eval[ray]').")
    address: str | None = Field(None, description="ray only: `auto` joins the cluster this machine is a node of, "
                                "HOST:PORT the cluster whose head listens there; none starts a local Ray instance "
                                "for the run and stops it after.")
    workers: int | None = Field(None, ge=1, le=256, description="Worker processes or Ray actors, each building the "
                                "scenario's agents once (default: this machine's cores; with ray, as many as the "
                                "cluster has room for).")
    resources: Resources | None = Field(None, description="ray only: what each worker asks the cluster for (cpus, "
                                        "gpus, memory), instead of the sum of its agents' and referees' resources.")
    lost_after: float = Field(40, gt=0, le=3600, description="ray only: seconds a Ray worker may send nothing (its "
                              "node lost, its process frozen) before its unfinished matches are played again by the "
                              "others; each worker says it is alive 4 times in that span.")

    @model_validator(mode="after")
    def _fits_the_executor(self) -> Execution:
        if self.address is not None and self.executor != "ray":
            raise ValueError(f"address is where a Ray cluster is, for executor: ray, not {self.executor}")
        if "lost_after" in self.model_fields_set and self.executor != "ray":
            raise ValueError(f"lost_after is how long a Ray worker may be silent, for executor: ray, not {self.executor}")
        if self.resources is not None and self.executor != "ray":
            raise ValueError(f"resources are what each Ray worker asks the cluster for, for executor: ray, not "
                             f"{self.executor}")
        if self.executor == "local" and (self.workers or 1) > 1:
            raise ValueError("executor: local plays every match in the run's own process; for several workers "
                             "say executor: processes (or ray)")
        return self


class Price(BaseModel):
    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0, description="USD per million prompt tokens.")
    output: float = Field(ge=0, description="USD per million completion tokens.")


class Anonymity(BaseModel):
    """Scrub self-identifying strings from what agents wrote, before anyone else reads it. On unless a
    scenario says ``anonymity: off`` (or ``{scrub: false}``)."""

    model_config = ConfigDict(extra="forbid")

    scrub: bool = Field(True, description="Turn the filter on.")
    terms: list[str] = Field(default_factory=list, description="More strings to scrub.")
    vendors: bool = Field(True, description="Also scrub well-known model and vendor names.")
    replacement: str = Field("[name withheld]", description="What a scrubbed string becomes.")
    allow: list[str] = Field(default_factory=list, description="Words and phrases never scrubbed (\"Google Sheets\").")
    material: bool = Field(False, description="Also scrub the referee's own text: rules, questions, dataset answers.")


class Scenario(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="Short name of the scenario; the run directory OUTPUT/NAME is named after it.")
    description: str = ""
    seed: int = Field(0, description="Every match's seed is derived from this one and the match's key.")
    output: str = Field("runs", description="Folder holding run directories, relative to the working directory.")
    agents: dict[str, dict[str, Any]] = Field(min_length=1, description="Agent name -> backend and its parameters.")
    games: list[GameEntry] = Field(min_length=1)
    tournament: Tournament = Field(default_factory=Tournament)
    match: MatchSettings = Field(default_factory=MatchSettings)
    concurrency: Concurrency = Field(default_factory=Concurrency)
    execution: Execution = Field(default_factory=Execution, description="Where the matches are played: "
                                 "executor local, processes or ray.")
    limits: dict[str, LimitSettings] = Field(default_factory=dict, description="Per backend: calls at once, requests and tokens per minute.")
    prices: dict[str, Price] = Field(
        default_factory=dict,
        description="Model -> USD per million tokens, added to the built-in table; or a YAML file of that mapping.",
    )
    budget: Budget | None = Field(None, description="No new match starts once this is spent.")
    anonymity: Anonymity = Field(default_factory=Anonymity,
                                 description="Scrub model and vendor names from what agents wrote (on; `off` to opt out).")
    cache: str | None = Field(None, description="Response cache file; default: responses.sqlite in the run directory.")
    # Not in the fingerprint: where a run's replies came from does not change which matches it plays.
    rescored_from: str | None = Field(None, description="The run whose recorded replies this run replays "
                                      "(written by `arena rescore`).")
    # agent -> what it asks a Ray worker for (its `resources:`, taken out of its block when checked)
    _agent_resources: dict[str, Resources] = PrivateAttr(default_factory=dict)

    @field_validator("name")
    @classmethod
    def _plain_name(cls, value: str) -> str:
        problem = name_problem(value)
        if problem:
            raise ValueError(problem)
        return value

    @field_validator("anonymity", mode="before")
    @classmethod
    def _anonymity_shorthand(cls, value):
        # `anonymity: off` (YAML's false) is the visible opt-out; `on`, true or an empty value take the defaults
        if value is None or value is True:
            return {}
        if value is False or (isinstance(value, str) and value.strip().lower() in ("off", "no", "false")):
            return {"scrub": False}
        return value

    @field_validator("concurrency", mode="before")
    @classmethod
    def _concurrency_shorthand(cls, value):
        if isinstance(value, int) and not isinstance(value, bool):
            return {"matches": value}
        if not isinstance(value, (dict, Concurrency)):
            raise ValueError(f"expected a number of matches at once, or a block of fields ({', '.join(Concurrency.model_fields)})")
        return value

    @model_validator(mode="after")
    def _one_spelling_of_the_workers(self) -> Scenario:
        # concurrency.processes came first and stays, meaning executor: processes with that many workers;
        # a scenario that also says execution must say the same thing there
        n, given = self.concurrency.processes, self.execution
        if n > 1 and given.executor != "local" and (given.executor, given.workers) != ("processes", n):
            raise ValueError(f"concurrency.processes: {n} is the older spelling of execution: {{executor: processes, "
                             f"workers: {n}}}, and this scenario's execution block says otherwise: keep one of them")
        return self

    def older_spellings(self) -> list[str]:
        """A note for each older spelling this scenario uses, naming the one to write instead: there is
        one way to say a thing, and the older one still works (the runner reads it as the new)."""
        if "processes" not in self.concurrency.model_fields_set:
            return []
        n = self.concurrency.processes
        new = "execution: {executor: local} (the default)" if n == 1 else \
            f"execution: {{executor: processes, workers: {n}}}"
        return [f"concurrency.processes: {n} is the older spelling of {new}; it still works"]

    def execution_settings(self, processes: int | None = None) -> Execution:
        """Where the matches are played: the execution block, or concurrency.processes (``processes``, from
        --processes, overrides both: 1 is the run's own process)."""
        if processes is not None:
            return Execution(executor="processes", workers=processes) if processes > 1 else Execution()
        if self.execution.executor == "local" and self.concurrency.processes > 1:
            return Execution(executor="processes", workers=self.concurrency.processes)
        return self.execution

    def agent_config(self, name: str) -> tuple[type[Agent], AgentConfig]:
        raw = self.agents[name]
        backend = plugins.load("agent backend", raw["backend"])
        return backend, backend.Config.model_validate(raw)

    def worker_need(self) -> Need:
        """What one Ray worker asks the cluster for: it builds every agent and runs every referee."""
        asks = [(f"agent {name}", r) for name, r in self._agent_resources.items()]
        asks += [(f"the {entry.referee[i].use} referee of {entry.name}", r)
                 for entry in self.games for i, r in entry._referee_resources.items()]
        return need(asks, self.execution.resources)

    def scrub_terms(self) -> tuple[str, ...]:
        """What the anonymity filter removes: agent names, their models, and (by default) vendor names."""
        if not self.anonymity.scrub:
            return ()
        a = self.anonymity  # the filter spells each name the ways a model writes it (arena.engine.anonymity)
        return identity_names(self.agents, a.terms, a.vendors, a.allow)

    def tournament_for(self, entry: GameEntry) -> Tournament:
        return entry.tournament or self.tournament

    def agents_for(self, entry: GameEntry) -> list[str]:
        return list(entry.agents) if entry.agents is not None else list(self.agents)

    def fingerprint(self) -> str:
        """What makes two runs the same run: everything that decides which matches are played and how."""
        meaning = self.model_dump(mode="json", include={"seed", "agents", "games", "tournament", "match", "anonymity"})
        # fields added later count only when set, so a run begun before them still resumes
        for block in [meaning["tournament"], *(g["tournament"] for g in meaning["games"] if g.get("tournament"))]:
            if block.get("schedule") is None:
                block.pop("schedule", None)
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
    homes = {"tournament": Tournament, "match": MatchSettings, "concurrency": Concurrency, "execution": Execution,
             "games[i]": GameEntry,
             "budget": Budget, "anonymity": Anonymity, "tournament.schedule": Schedule}
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


def name_problem(name: str) -> str | None:
    """Why ``name`` cannot name a run directory inside ``output``, or None. A name is a plain
    folder name: it never leads elsewhere (``/etc``, ``../..``)."""
    if not name.strip():
        return "the name is empty; give a short plain name such as my-tournament"
    if name != name.strip():
        return "the name starts or ends with a space; remove it"
    if len(name) > MAX_NAME:
        return f"the name has {len(name)} characters; keep it to {MAX_NAME}"
    if any(c in name for c in "/\\:"):
        return ("the name holds a path separator; it names the run folder inside `output`, so give a plain name "
                "(and set `output` to choose where runs go)")
    if name.startswith("."):
        return "the name starts with a dot ('..' would leave the output folder, '.x' would hide the run); remove it"
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        return "the name holds a control character; use letters, digits, '-' and '_'"
    return None


def load_scenario(path: str | Path, overrides: list[Override] | None = None) -> Scenario:
    """Read, check and return a scenario file; paths in it are read from the file's folder.
    ``overrides`` (`--set`) are written in before anything is checked, and checked like the file."""
    path = Path(path)
    source = str(path)
    raw = read_yaml(path, source)
    raw, written = apply_overrides(raw, overrides or [], source)
    base = Path(os.path.abspath(path.parent))
    try:
        if isinstance(raw, dict) and isinstance(raw.get("prices"), str):
            raw["prices"] = read_yaml(_resolve(raw["prices"], (), base), source, "prices", ("prices",))
        return parse_scenario(raw, source, base)
    except ConfigError as exc:
        raise mark_problems(exc, written) from None


def parse_scenario(raw: Any, source: str = "<scenario>", base: Path | None = None) -> Scenario:
    """Check a scenario given as data. ``base``: the folder relative paths in it are read from
    (the scenario file's); None leaves them to the working directory."""
    if raw is None:
        raise ConfigError([Problem((), "the file is empty; a scenario needs at least name, agents and games")], source)
    if not isinstance(raw, dict):
        raise ConfigError([Problem((), "expected a mapping with keys name, agents, games", raw, True)], source)
    problems = numbers_not_booleans(Scenario, raw)
    try:
        scenario = Scenario.model_validate(raw)
    except ValidationError as exc:
        found = ConfigError.from_validation(exc, hint=_scenario_hint).problems
        raise ConfigError(_unique(problems + [_with_choices(p) for p in found]), source) from None
    problems += _check_match(scenario) + _check_agents(scenario, base) + _check_games(scenario, base)
    if not problems:
        problems += _check_size(scenario)
    if problems:
        raise ConfigError(_unique(problems), source)
    return scenario


def _with_choices(problem: Problem) -> Problem:
    """A game entry without its game: the games there are to name, as for an agent without a backend."""
    if len(problem.loc) == 3 and problem.loc[0] == "games" and problem.loc[2] == "game" and problem.message == "required field is missing":
        return Problem(problem.loc, f"{problem.message}; one of: {', '.join(plugins.names('game'))}", problem.given, problem.has_given)
    return problem


def _unique(problems: list[Problem]) -> list[Problem]:
    """Each problem once; and a field the boolean check reported is not reported again by pydantic,
    which sees the same mistake (``stream: 2`` is not a boolean to either)."""
    flagged = {p.loc for p in problems if p.message in _TYPE_MIXUPS}
    seen: set[str] = set()
    kept = []
    for problem in problems:
        text = str(problem)
        if text in seen or (problem.loc in flagged and problem.message not in _TYPE_MIXUPS):
            continue
        seen.add(text)
        kept.append(problem)
    return kept


# -- booleans are not numbers -------------------------------------------------------------
NOT_A_NUMBER = "expected a number, not true/false"
NOT_A_BOOLEAN = "expected true or false, not a number"
_TYPE_MIXUPS = (NOT_A_NUMBER, NOT_A_BOOLEAN)


def numbers_not_booleans(model: type[BaseModel], raw: Any, loc: tuple = ()) -> list[Problem]:
    """``true`` where a number belongs, or ``1`` where true/false does: pydantic would take either
    quietly (``repeats: true`` as one repeat), so they are reported here, anywhere in ``raw``."""
    problems: list[Problem] = []
    _walk(model, raw, loc, problems)
    return problems


def _walk(annotation: Any, value: Any, loc: tuple, problems: list[Problem]) -> None:
    kinds = _kinds(annotation)
    if isinstance(value, bool):
        if kinds & {int, float} and bool not in kinds:
            problems.append(Problem(loc, NOT_A_NUMBER, value, True))
        return
    if isinstance(value, (int, float)) and bool in kinds and not kinds & {int, float}:
        problems.append(Problem(loc, NOT_A_BOOLEAN, value, True))
        return
    if isinstance(value, dict):
        model = next((k for k in kinds if isinstance(k, type) and issubclass(k, BaseModel)), None)
        if model is not None:
            fields = {info.alias or name: info for name, info in model.model_fields.items()}
            fields.update(model.model_fields)
            for key, item in value.items():
                if key in fields:
                    _walk(fields[key].annotation, item, loc + (key,), problems)
            return
        inner = _container_arg(annotation, dict)
        if inner is not None:
            for key, item in value.items():
                _walk(inner, item, loc + (key,), problems)
    elif isinstance(value, list):
        inner = _container_arg(annotation, list) or _container_arg(annotation, tuple)
        if inner is not None:
            for i, item in enumerate(value):
                _walk(inner, item, loc + (i,), problems)


def _kinds(annotation: Any) -> set:
    """The plain types an annotation admits, looking through unions, Optional and Annotated."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _kinds(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return set().union(*(_kinds(a) for a in typing.get_args(annotation)))
    if origin is not None:
        return {origin}
    return {annotation}


def _container_arg(annotation: Any, container: type) -> Any:
    """The item (list, tuple) or value (dict) type of ``container`` in an annotation, if it is one."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _container_arg(typing.get_args(annotation)[0], container)
    if origin in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _container_arg(arg, container)
            if found is not None:
                return found
        return None
    if origin is container:
        args = typing.get_args(annotation)
        return (args[-1] if container is dict else args[0]) if args else None
    return None


# -- paths --------------------------------------------------------------------------------
def _resolve(value: str, words: tuple[str, ...], base: Path | None) -> Path:
    path = Path(value).expanduser()
    if value in words or base is None or path.is_absolute():
        return path
    return base / path


def resolve_paths(model: type[BaseModel], params: dict[str, Any], base: Path | None) -> dict[str, Any]:
    """``params`` with the fields ``model`` marks as paths read from ``base`` (see ``path_field``)."""
    out = dict(params)
    for name, words in path_fields(model).items():
        value = params.get(name)
        if isinstance(value, str) and value not in words:
            out[name] = str(_resolve(value, words, base))
        elif isinstance(value, list):
            out[name] = [str(_resolve(v, words, base)) if isinstance(v, str) and v not in words else v for v in value]
    return out


def _check_paths(model: type[BaseModel], params: dict[str, Any], loc: tuple, base: Path | None) -> list[Problem]:
    """Each path parameter names a readable file of UTF-8 text."""
    problems = []
    for name, words in path_fields(model).items():
        value = params.get(name)
        items = [(loc + (name,), value)] if isinstance(value, str) else (
            [(loc + (name, i), v) for i, v in enumerate(value) if isinstance(v, str)] if isinstance(value, list) else [])
        for where, item in items:
            if item in words:
                continue
            problem = data_file_problem(Path(item))
            if problem:
                read_from = f" (relative paths are read from the scenario's folder, {base})" if base else ""
                problems.append(Problem(where, problem + read_from))
    return problems


def data_file_problem(path: Path) -> str | None:
    """Why ``path`` is not a data file we can read (missing, a folder, binary, not UTF-8), or None."""
    if not path.exists():
        return f"no file at {path}"
    if path.is_dir():
        return f"{path} is a folder, not a file"
    try:
        with path.open("rb") as f:
            head = f.read(65536)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc})"
    if head.startswith((b"\xff\xfe", b"\xfe\xff", b"\x00\x00\xfe\xff")):
        return f"{path} is UTF-16 or UTF-32 text; save it as UTF-8"
    if b"\x00" in head:
        return f"{path} holds NUL bytes: it is binary, or UTF-16 text; save it as UTF-8"
    try:
        codecs.getincrementaldecoder("utf-8")().decode(head, final=False)  # a character cut at 64 KiB is fine
    except UnicodeDecodeError as exc:
        return f"{path} is not UTF-8 text (byte 0x{head[exc.start]:02x} at offset {exc.start}); save it as UTF-8"
    return None


# -- the blocks ---------------------------------------------------------------------------
def _check_match(scenario: Scenario) -> list[Problem]:
    problems = []
    if scenario.match.max_rounds > MAX_ROUNDS:
        problems.append(Problem(("match", "max_rounds"), f"at most {MAX_ROUNDS:,}: it is a safety stop, not a plan",
                                scenario.match.max_rounds, True))
    if scenario.match.max_retries > MAX_RETRIES:
        problems.append(Problem(("match", "max_retries"), f"at most {MAX_RETRIES}", scenario.match.max_retries, True))
    return problems


def _check_agents(scenario: Scenario, base: Path | None) -> list[Problem]:
    problems: list[Problem] = []
    for name, raw in scenario.agents.items():
        loc = ("agents", name)
        if isinstance(raw, dict) and RESOURCES in raw:  # where the agent is placed, not how it plays: not the backend's
            asked, problem = _resources(raw[RESOURCES], loc + (RESOURCES,))
            problems += problem
            if asked is not None:
                scenario._agent_resources[name] = asked
            raw = scenario.agents[name] = {k: v for k, v in raw.items() if k != RESOURCES}
        if "backend" not in raw:
            close = difflib.get_close_matches("backend", [str(k) for k in raw], n=1, cutoff=0.6)
            if close:  # `backnd: openai` is a misspelling, not a missing backend
                problems.append(Problem(loc + (close[0],), "unknown field; remove it or fix its spelling (did you mean "
                                        "'backend'? it is required)"))
            else:
                problems.append(Problem(loc + ("backend",), f"required field is missing; one of: "
                                        f"{', '.join(plugins.names('agent backend'))}"))
            continue
        try:
            backend = plugins.load("agent backend", raw["backend"])
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(loc + ("backend",), str(exc)))
            continue
        except TypeError:  # not a name: a list or a mapping
            problems.append(Problem(loc + ("backend",), "expected the name of a backend", raw["backend"], True))
            continue
        if isinstance(raw, dict):  # files an agent names (a strategy's answers) are read from the scenario's folder
            raw = scenario.agents[name] = resolve_paths(backend.Config, raw, base)
            for key, model in backend.nested_params(raw).items():
                if isinstance(raw.get(key), dict):
                    raw[key] = resolve_paths(model, raw[key], base)
        problems += numbers_not_booleans(backend.Config, raw, loc)
        try:
            config = backend.Config.model_validate(raw)
            backend.check(config)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=loc, hint=spelling_hint(backend.Config.model_fields)).problems
        except ConfigError as exc:
            problems += exc.prefixed(loc).problems
    return problems


def _check_games(scenario: Scenario, base: Path | None) -> list[Problem]:
    problems: list[Problem] = []
    labels: dict[str, int] = {}
    for i, entry in enumerate(scenario.games):
        loc = ("games", i)
        if entry.name in labels:
            problems.append(Problem(loc + ("label",), f"entries {labels[entry.name]} and {i} share the name {entry.name!r}; give one a distinct `label`"))
        labels.setdefault(entry.name, i)
        if "/" in entry.name:  # a match key reads the entry up to its first "/", and a case after it
            problems.append(Problem(loc + ("label",), f"the name {entry.name!r} holds a '/'; match keys use it to "
                                    "separate an entry from its case, so give a `label` without one"))
        players = scenario.agents_for(entry)
        for j, agent in enumerate(entry.agents or []):
            if agent not in scenario.agents:
                close = difflib.get_close_matches(agent, list(scenario.agents), n=3, cutoff=0.5)
                hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
                problems.append(Problem(loc + ("agents", j), f"no agent named {agent!r} under `agents`{hint}"))
        if len(set(players)) != len(players):
            problems.append(Problem(loc + ("agents",), "an agent is listed twice; list each once"))
        problems += _check_referees(scenario, entry, loc, base)
        try:
            game = plugins.load("game", entry.game)
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(loc + ("game",), str(exc)))
            continue
        problems += _check_table(scenario, entry, game, players, loc)
        problems += _check_needs(entry, game, loc)
        entry.params = resolve_paths(game.Params, entry.params, base)
        problems += numbers_not_booleans(game.Params, entry.params, loc + ("params",))
        try:
            params = game.Params.model_validate(entry.params)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=loc + ("params",), hint=spelling_hint(game.Params.model_fields)).problems
            continue
        missing = _check_paths(game.Params, entry.params, loc + ("params",), base)
        if missing:
            problems += missing
            continue
        try:
            live = live_sides(scenario, entry, game, params) is not None  # checked at a table of them all, as answered
            seat_problem = game.seat_problem(params, len(players) if live else table_size(scenario, entry))
            if seat_problem:
                problems.append(Problem(loc + ("params",), seat_problem))
            if has(game, HasCases):
                game.cases(params)
        except (OSError, ValueError) as exc:
            problems.append(Problem(loc + ("params",), str(exc)))
            continue
        problems += _check_rounds(scenario, entry, game, params, loc)
        problems += _check_schedule(scenario, entry, game, params, loc)
    return problems


def _check_schedule(scenario: Scenario, entry: GameEntry, game: type[Game], params: BaseModel, loc) -> list[Problem]:
    """An adaptive schedule needs a game that reports reviews and plays one chosen comparison per
    match, of answers it is given (not ones its seats write), and decides the matches on its own."""
    tournament = scenario.tournament_for(entry)
    if tournament.schedule is None:
        return []
    where = loc + ("tournament", "schedule") if entry.tournament is not None else ("tournament", "schedule")
    if not has(game, ReportsReviews):
        return [Problem(where, f"an adaptive schedule chooses among pairwise comparisons, and {entry.game} "
                               "reports none; remove `schedule`, or give it to a game that reports reviews")]
    if not has(game, PlaysComparisons):
        return [Problem(where, f"{entry.game} reports reviews but cannot play one chosen comparison in a match; "
                               "remove `schedule` to play every comparison")]
    problems = []
    if tournament.repeats != 1:
        problems.append(Problem(where[:-1] + ("repeats",), "an adaptive schedule decides how many comparisons are "
                                "played; remove `repeats` (or set it to 1)"))
    if tournament.format != "fixed":
        problems.append(Problem(where[:-1] + ("format",), "an adaptive schedule seats one judge per comparison "
                                "itself; remove `format` (or set it to fixed)"))
    compared = game.compared(params)
    if compared is None:
        return problems + _check_live_schedule(scenario, entry, game, params, loc)
    if len(compared) < 2:
        problems.append(Problem(loc + ("params",), "an adaptive schedule needs two or more answers to compare"))
    else:
        problems += _undone(entry, game, params, compared, loc)
        one = game.Params.model_validate({**params.model_dump(), **game.comparison(params, compared[0], compared[1])})
        seat_problem = game.seat_problem(one, 1)
        if seat_problem:
            problems.append(Problem(loc + ("params",), f"with an adaptive schedule (one judge per match): {seat_problem}"))
    return problems


def _undone(entry: GameEntry, game: type[Game], params: BaseModel, compared: list[str], loc) -> list[Problem]:
    """A choice of the user's that the schedule's comparisons would silently undo."""
    problems = []
    chosen = game.comparison(params, compared[0], compared[1])
    other = game.comparison(params, compared[1], compared[0])
    for name, value in chosen.items():
        if name not in entry.params:
            continue
        if other.get(name) != value:  # set per comparison
            problems.append(Problem(loc + ("params", name), f"an adaptive schedule chooses {name} for each "
                                    f"comparison; remove {name}"))
        elif entry.params[name] != value:
            problems.append(Problem(loc + ("params", name), f"an adaptive schedule plays every comparison with "
                                    f"{name}: {json.dumps(value)} (both orders in one match); remove {name}"))
    return problems


def live_sides(scenario: Scenario, entry: GameEntry, game: type[Game] | None = None,
               params: BaseModel | None = None) -> tuple[list[str], list[str]] | None:
    """An adaptive entry's live contestants and its judges, when its game asks live contestants for
    their answers (``AnswersOnce``); None for fixed answers, or an entry without a schedule."""
    if scenario.tournament_for(entry).schedule is None:
        return None
    game = game or plugins.load("game", entry.game)
    if not has(game, AnswersOnce) or not has(game, PlaysComparisons):
        return None
    params = params or game.Params.model_validate(entry.params)
    if game.compared(params) is not None:
        return None
    return game.answering(params, scenario.agents_for(entry))


def _check_live_schedule(scenario: Scenario, entry: GameEntry, game: type[Game], params: BaseModel, loc) -> list[Problem]:
    """Live contestants with a schedule: each answers a case in a match of its own (once), and each
    comparison shows one judge two kept answers; both kinds of match must be possible."""
    sides = live_sides(scenario, entry, game, params)
    if sides is None:
        return [Problem(loc + ("params",), f"an adaptive schedule plays {entry.game} on fixed answers only (it cannot "
                                          "ask a live contestant once and keep its answer): record the answers first "
                                          "(a run without `schedule`, or `answers:` files) and judge those")]
    contestants, judges = sides
    if len(contestants) < 2:
        return [Problem(loc + ("params",), "an adaptive schedule needs two or more contestants to compare")]
    if not judges:
        return [Problem(loc + ("params",), "an adaptive schedule with live contestants needs a judge: list judges "
                                          "after the contestants, or let the contestants judge each other")]
    problems = _undone(entry, game, params, contestants, loc)
    texts = {contestants[0]: "", contestants[1]: ""}
    for made in (game.answer_only(params), game.comparing(params, contestants[0], contestants[1], texts)):
        one = game.Params.model_validate({**params.model_dump(), **made})
        seat_problem = game.seat_problem(one, 1)
        if seat_problem:
            problems.append(Problem(loc + ("params",), f"with an adaptive schedule (one seat per match): {seat_problem}"))
    return problems


def _check_referees(scenario: Scenario, entry: GameEntry, loc, base: Path | None) -> list[Problem]:
    problems: list[Problem] = []
    metrics: dict[str, int] = {}
    for i, spec in enumerate(entry.referee or []):
        where = loc + ("referee", i)
        try:
            referee = plugins.load("referee", spec.use)
        except plugins.UnknownPlugin as exc:
            problems.append(Problem(where + ("use",), str(exc)))
            continue
        if RESOURCES in spec.params:  # where the referee runs, not how it scores: not the referee's parameter
            asked, problem = _resources(spec.params[RESOURCES], where + (RESOURCES,))
            problems += problem
            if asked is not None:
                entry._referee_resources[i] = asked
            spec = spec.model_copy(update={"params": {k: v for k, v in spec.params.items() if k != RESOURCES}})
        spec = entry.referee[i] = spec.model_copy(update={"params": resolve_paths(referee.Params, spec.params, base)})
        problems += numbers_not_booleans(referee.Params, spec.params, where)
        try:
            params = referee.Params.model_validate(spec.params)
        except ValidationError as exc:
            problems += ConfigError.from_validation(exc, prefix=where, hint=spelling_hint(referee.Params.model_fields)).problems
            continue
        problems += _check_paths(referee.Params, spec.params, where, base)
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


def _resources(raw: Any, loc: tuple) -> tuple[Resources | None, list[Problem]]:
    """An agent's or a referee's ``resources:`` block, or the problems with it."""
    problems = numbers_not_booleans(Resources, raw, loc) if isinstance(raw, dict) else []
    try:
        return Resources.model_validate(raw), problems
    except ValidationError as exc:
        return None, problems + ConfigError.from_validation(exc, prefix=loc, hint=spelling_hint(Resources.model_fields)).problems


def _check_needs(entry: GameEntry, game: type[Game], loc) -> list[Problem]:
    """Every referee of the entry gets from the game what it needs to score it."""
    problems = []
    chosen = entry.referee is not None
    names = [spec.use for spec in entry.referee] if chosen else list(
        (game.default_referee,) if isinstance(game.default_referee, str) else game.default_referee)
    for i, name in enumerate(names):
        try:
            referee = plugins.load("referee", name)
        except plugins.UnknownPlugin as exc:
            if not chosen:  # a chosen referee's name is reported where it was written
                problems.append(Problem(loc + ("game",), f"{entry.game}'s default referee: {exc}"))
            continue
        for need in referee.needs:
            if has(game, need):
                continue
            able = [g for g in plugins.names("game") if has(_load_quietly(g), need)]
            fix = (f"choose another referee (`rules` scores by the game's own rules)"
                   + (f", or a game that does: {', '.join(able)}" if able else ""))
            where = loc + ("referee", i, "use") if chosen else loc + ("game",)
            whose = "" if chosen else f" (the default referee of {entry.game})"
            problems.append(Problem(where, f"the {name} referee{whose} needs a game that {describe(need)}; "
                                           f"{entry.game} does not: {fix}"))
    return problems


def _load_quietly(name: str) -> type:
    try:
        return plugins.load("game", name)
    except Exception:  # a broken third-party game must not hide the advice about this one
        return object


def _check_rounds(scenario: Scenario, entry: GameEntry, game: type[Game], params: BaseModel, loc) -> list[Problem]:
    """A match its own rules would take past ``max_rounds`` would be cut short: say so before paying for it."""
    needed = game.rounds_needed(params, table_size(scenario, entry))
    limit = scenario.match.max_rounds
    if needed is None or needed <= limit:
        return []
    return [Problem(loc + ("params",), f"with these params a match of {entry.game} can take {needed:,} rounds, more "
                                       f"than match.max_rounds ({limit:,}), and would be cut short; set match.max_rounds "
                                       f"to at least {needed:,}, or ask for fewer rounds")]


def table_size(scenario: Scenario, entry: GameEntry) -> int:
    if scenario.tournament_for(entry).schedule is not None:
        return 1  # an adaptive schedule's match seats the one judge of its comparison
    fmt = scenario.tournament_for(entry).format
    if entry.seats is not None:
        return entry.seats
    return 2 if fmt in ("all_pairs", "swiss") else len(scenario.agents_for(entry))


def _check_table(scenario: Scenario, entry: GameEntry, game, players: list[str], loc) -> list[Problem]:
    fmt = scenario.tournament_for(entry).format
    n = table_size(scenario, entry)
    problems = []
    if fmt == "fixed" and n != len(players) and scenario.tournament_for(entry).schedule is None:
        problems.append(Problem(loc + ("seats",), f"a fixed table seats every listed agent: {len(players)}, not {n}; remove `seats` or use format round_robin"))
    if fmt in ("all_pairs", "swiss") and n != 2:
        problems.append(Problem(loc + ("seats",), f"{fmt} plays two-seat tables; seats is {n}; use round_robin for larger tables"))
    repeats = scenario.tournament_for(entry).repeats
    if fmt == "swiss" and isinstance(repeats, int) and repeats != 1:
        where = loc + ("tournament", "repeats") if entry.tournament is not None else ("tournament", "repeats")
        problems.append(Problem(where, f"a Swiss tournament plays ceil(log2 N) rounds (here {swiss_rounds(len(players))}), "
                                       "or until stable with repeats: until_stable; remove repeats: "
                                       f"{repeats}"))
    if n > len(players):
        problems.append(Problem(loc + ("seats",), f"tables of {n} need at least {n} agents; {len(players)} take part"))
    count = game.seat_count_problem(n)
    if count:
        where = loc + ("agents",) if fmt == "fixed" and entry.seats is None else loc + ("seats",)
        problems.append(Problem(where, f"{entry.game} {count}; the tables here have {n}"))
    return problems


# -- how many matches ---------------------------------------------------------------------
def entry_roles(scenario: Scenario, entry: GameEntry) -> list[str]:
    game = plugins.load("game", entry.game)
    return game.seat_roles(game.Params.model_validate(entry.params), table_size(scenario, entry))


def entry_cases(entry: GameEntry) -> list[str | None]:
    """The entry's cases (questions, problems, texts), or one None for a game played without."""
    game = plugins.load("game", entry.game)
    cases = game.cases(game.Params.model_validate(entry.params)) if has(game, HasCases) else None
    return cases or [None]


def first_repeats(scenario: Scenario, entry: GameEntry) -> int:
    """Repeats played before anything is judged: all of them, or until_stable's minimum (a Swiss
    tournament: its first round; each next one is paired by the standings)."""
    rule = scenario.tournament_for(entry).repeats
    if scenario.tournament_for(entry).format == "swiss":
        return 1
    if isinstance(rule, UntilStable):
        return min(rule.max, max(rule.block, rule.min))
    return rule


def most_repeats(scenario: Scenario, entry: GameEntry) -> int:
    """Repeats an entry may come to: all of them, or until_stable's cap (a Swiss tournament's rounds)."""
    rule = scenario.tournament_for(entry).repeats
    if scenario.tournament_for(entry).format == "swiss" and not isinstance(rule, UntilStable):
        return swiss_rounds(len(scenario.agents_for(entry)))
    return rule.max if isinstance(rule, UntilStable) else rule


def entry_matches(scenario: Scenario, entry: GameEntry, repeats: int) -> int:
    """How many matches ``repeats`` repeats of an entry are, counted without building any; for an
    adaptive schedule, the most it may play: every comparison, or its budget."""
    game = plugins.load("game", entry.game)
    tournament = scenario.tournament_for(entry)
    if tournament.schedule is not None:
        live = live_sides(scenario, entry, game)
        compared = (game.compared(game.Params.model_validate(entry.params)) or []) if live is None else live[0]
        judges = scenario.agents_for(entry) if live is None else live[1]
        full = len(entry_cases(entry)) * len(compared) * (len(compared) - 1) // 2 * len(judges)
        return min(full, tournament.schedule.budget or full)
    per_table = orders_per_table(entry_roles(scenario, entry), game.rotating_roles, tournament.role_swap)
    players = len(scenario.agents_for(entry))
    if tournament.format == "swiss":  # a round pairs everyone, one sitting out when they are odd
        tables = players // 2
    else:
        tables = tables_count(players, table_size(scenario, entry), tournament.format == "fixed")
    return repeats * len(entry_cases(entry)) * tables * per_table


def _check_size(scenario: Scenario) -> list[Problem]:
    """A run holds at most MAX_MATCHES matches; each entry is counted at its most repeats."""
    problems, total = [], 0
    for i, entry in enumerate(scenario.games):
        n = entry_matches(scenario, entry, most_repeats(scenario, entry))
        total += n
        if n > MAX_MATCHES:
            problems.append(Problem(("games", i), f"{entry.name} would play {n:,} matches; a run may hold at most "
                                                   f"{MAX_MATCHES:,}: lower `repeats`, play fewer cases (`limit`), "
                                                   "or seat fewer agents"))
    if not problems and total > MAX_MATCHES:
        problems.append(Problem(("games",), f"the scenario would play {total:,} matches; a run may hold at most "
                                            f"{MAX_MATCHES:,}: split it into several scenarios or lower `repeats`"))
    return problems
