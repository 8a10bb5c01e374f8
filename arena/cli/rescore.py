"""`arena rescore`: the scenario of a new run that replays a finished run's seats and asks only its judges.

Every agent that sat at a table of the source run becomes a ``replay`` agent reading that run, under
the same name (so the matches keep their keys and seeds) and with the same model (so the anonymity
filter hides the same names). The agents ``--judge OLD=NEW`` brings in, those of ``--agents FILE`` and
those that sat nowhere (a referee's judge) are asked live. ``--referee`` replaces every entry's referee.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from arena.contract import plugins
from arena.contract.errors import ArenaError
from arena.run.scenario import resolve_paths
from arena.run.yamlfile import parse_yaml, read_yaml
from arena.contract.runs import open_run


class RescoreError(ArenaError):
    """A rescore that cannot be made as asked; the message says why in a sentence."""


@dataclass(frozen=True)
class SourceRun:
    """What a rescore takes from the run it rescores."""

    run_dir: Path
    scenario_text: str
    params: dict[str, dict[str, Any]]  # each entry's game parameters as played, paths resolved
    referees: dict[str, list[dict[str, Any]]]  # each entry's referees as played (when the scenario named any)
    seated: frozenset[str]  # the agents that sat at a table


def read_source(run_dir: Path) -> SourceRun:
    """The one place that reads the source run."""
    with open_run(run_dir) as store:
        text = store.run_info().get("scenario")
        params: dict[str, dict[str, Any]] = {}
        referees: dict[str, list[dict[str, Any]]] = {}
        seated: set[str] = set()
        for key, status in store.match_keys():
            spec = store.spec(key)
            if spec is None:
                continue
            params.setdefault(spec.group, {k: v for k, v in spec.params.items() if k != "case"})
            if spec.referees:
                referees.setdefault(spec.group, [r.model_dump(mode="json") for r in spec.referees])
            seated.update(spec.agents)
        finished = sum(status == "finished" for _, status in store.match_keys())
    if not text or not finished:
        raise RescoreError(f"{run_dir} has no finished match to rescore")
    return SourceRun(run_dir.resolve(), text, params, referees, frozenset(seated))


def rescored_scenario(source: SourceRun, judges: list[str], agents_file: Path | None, referee: str | None) -> dict:
    """The new run's scenario, as data whose paths are all absolute."""
    raw = yaml.safe_load(source.scenario_text)
    old_agents: dict[str, Any] = raw["agents"]
    new_agents = _agents_file(agents_file) if agents_file else {}
    swaps = _swaps(judges, old_agents, new_agents)
    live = set(swaps.values()) | set(new_agents)
    agents: dict[str, Any] = {}
    for name, config in old_agents.items():
        name = swaps.get(name, name)
        if name in new_agents:
            agents[name] = new_agents[name]
        elif name in live or name not in source.seated:
            agents[name] = old_agents[name]
        else:
            agents[name] = {"backend": "replay", "record": str(source.run_dir)}
            if swaps:  # the new judges' matches are the ones the old judges sat in
                agents[name]["stands_in"] = {new: old for old, new in swaps.items()}
            if isinstance(config, dict) and config.get("model"):
                agents[name]["model"] = config["model"]
    for name, config in new_agents.items():
        agents.setdefault(name, config)
    raw["agents"] = agents
    for entry in raw["games"]:
        if entry.get("agents"):
            entry["agents"] = [swaps.get(name, name) for name in entry["agents"]]
        name = entry.get("label") or entry["game"]
        if name in source.params:
            entry["params"] = source.params[name]
        if referee is not None:
            entry["referee"] = parse_yaml(referee, "--referee", ("referee",))
        elif name in source.referees:
            entry["referee"] = source.referees[name]
    for key in ("output", "cache"):  # the new run has a folder and a cache of its own
        raw.pop(key, None)
    if isinstance(raw.get("prices"), str):  # a prices file named relative to a scenario file we no longer have
        raw.pop("prices")
    raw["rescored_from"] = str(source.run_dir)
    return raw


def _agents_file(path: Path) -> dict[str, Any]:
    found = read_yaml(path, str(path), "agents file")
    if not isinstance(found, dict) or not all(isinstance(v, dict) for v in found.values()):
        raise RescoreError(f"{path} must be a mapping of agent names to their backend and parameters, as a "
                           "scenario's `agents` block")
    base = path.resolve().parent
    resolved = {}
    for name, config in found.items():
        try:
            backend = plugins.load("agent backend", config.get("backend"))
        except (plugins.UnknownPlugin, TypeError):
            resolved[str(name)] = config  # the scenario's check says what is wrong with it
            continue
        resolved[str(name)] = resolve_paths(backend.Config, config, base)
    return resolved


def _swaps(judges: list[str], old: dict[str, Any], new: dict[str, Any]) -> dict[str, str]:
    swaps: dict[str, str] = {}
    for given in judges:
        was, equals, becomes = given.partition("=")
        was, becomes = was.strip(), becomes.strip()
        if not equals or not was or not becomes:
            raise RescoreError(f"--judge {given!r}: expected NAME=AGENT, the run's judge and the agent that replaces it")
        if was not in old:
            raise RescoreError(f"--judge {given!r}: the run has no agent {was!r} (its agents: {', '.join(old)})")
        if becomes not in new and becomes not in old:
            raise RescoreError(f"--judge {given!r}: no agent {becomes!r} is defined; define it in --agents FILE")
        if becomes in old and becomes != was:
            raise RescoreError(f"--judge {given!r}: {becomes!r} already sits in the run; name the new judge otherwise")
        swaps[was] = becomes
    return swaps
