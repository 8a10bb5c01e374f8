"""Shared test helpers: scripted agents, a recording wrapper."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

from arena.agents.openai_backend import OpenAIAgent
from arena.contract.agent import Agent
from arena.contract.game import Game, Notice
from arena.agents.scripted import ScriptedAgent, ScriptedConfig
from arena.contract.messages import Turn

ROOT = Path(__file__).resolve().parent.parent
LOCAL = "127.0.0.1,localhost"


def arena_offline(*args, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """The `arena` command as a user runs it against a local mock: wide tables, no proxy before
    127.0.0.1, and no real OpenAI key in its environment."""
    env = {**os.environ, "COLUMNS": "200", "NO_PROXY": LOCAL, "no_proxy": LOCAL}
    env.pop("OPENAI_API_KEY", None)
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def scripted(name: str, strategy: str, **kwargs) -> ScriptedAgent:
    return ScriptedAgent(name, ScriptedConfig(strategy=strategy, **kwargs))


class Recording(Agent):
    """Wraps an agent and keeps every turn it was handed: exactly what a model would receive."""

    def __init__(self, inner: Agent):
        super().__init__(inner.name, inner.config)
        self.inner = inner
        self.turns: list[Turn] = []

    async def reply(self, turn: Turn) -> str:
        self.turns.append(turn)
        return await self.inner.reply(turn)


class NotingOpenAI(OpenAIAgent):
    """The openai backend, saying a fact about its endpoint the way a backend does (once per run);
    registered as the backend "noting_openai" by the fixture of that name."""

    async def reply(self, turn):
        self.services.note(self.name, self.endpoint(), "test", f"agent {self.name} at {self.endpoint()}: answers in JSON")
        return await super().reply(turn)


def mock_tokens(value) -> int:
    """The usage tests/mock_llm.py reports for a request's messages or a reply's text."""
    return max(1, len(json.dumps(value)) // 4)


def coins(n: int) -> str:
    return json.dumps({"reason": "scripted", "coins": n})




class Roundtable(Game):
    """A test game of open talk: every seat speaks every round and everyone hears everyone."""

    min_seats = 2

    def rules(self, seat):
        return f"You are {seat} at a table of {len(self.seats)}. Talk for three rounds."

    def prompt(self, seat, round):
        return f"Round {round}: say something to the table."

    def parse(self, seat, reply, round):
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions):
        return [Notice(to=tuple(self.seats), text=f"Round {round} heard {len(actions)} speakers.")]

    def is_over(self, round):
        return round >= 3

    def payoffs(self):
        return {s: 0.0 for s in self.seats}


class TwoRoles(Game):
    """A test game with two roles: the writer names a number and scores it; the
    editor names a number and scores the writer's number minus its own."""

    min_seats = max_seats = 2

    @classmethod
    def seat_roles(cls, params, n_seats):
        return ["Writer", "Editor"]

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.scores = {}

    def rules(self, seat):
        return f"You are the {seat}. Name a number."

    def prompt(self, seat, round):
        return "Your number:"

    def parse(self, seat, reply, round):
        return int(reply)

    def default_action(self, seat, round):
        return 0

    def apply(self, round, actions):
        self.scores = {"Writer": actions["Writer"], "Editor": actions["Writer"] - actions["Editor"]}
        return []

    def is_over(self, round):
        return True

    def payoffs(self):
        return dict(self.scores)


async def play(scenario, store=None, observer=None):
    """Run a tournament and hand back its result and the records of the matches it played, in plan
    order: the runner keeps none once the store and the observers have them, so a test that wants
    them in hand collects them as they go by."""
    from arena.run.runner import KeepRecords, run_tournament

    keep = KeepRecords(observer)
    result = await run_tournament(scenario, store, keep)
    return result, keep.in_order(result)


def score_rows(records, metric=None):
    """The rows results are computed from, for records a test has in hand (no store)."""
    from arena.store.rows import ScoreRow

    return [ScoreRow.of(r, metric) for r in records if r.status == "finished"]


def stored(record, run_dir):
    """A run store holding one match played on its own, written the way the runner writes it (the
    events as they came, then the outcome): for tests of what is computed from the store's rows."""
    from arena.contract.records import MatchSpec
    from arena.store import RunStore

    store = RunStore.create_or_resume(run_dir, "one match", "{}", "test")
    spec = MatchSpec(key=record.key, group=record.group, repeat=record.repeat, game=record.game, params=record.params,
                     agents=tuple(s.agent for s in record.seats), seed=record.seed)
    store.prepare(spec, 0)
    for event in record.events:
        store.record_event(event)
    store.finish(record)
    return store


def interruptible() -> None:
    """``preexec_fn`` for a child a test stops with Ctrl-C (SIGINT). A process started in the
    background by a shell (``.ci/run &``, nohup) ignores SIGINT, and so does everything it starts,
    Python included: without this, such a test would fail only when its runner was started so."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextmanager
def store_and_reader(scenario, run_dir: Path):
    """A run store for the scenario and a second, read-only connection to its file: what another
    process (`arena watch`) can see while the run plays."""
    import sqlite3

    from arena.store import RunStore

    store = RunStore.create_or_resume(run_dir, scenario.name, f"name: {scenario.name}\n", scenario.fingerprint())
    reader = sqlite3.connect(f"file:{store.run_dir / 'run.sqlite'}?mode=ro", uri=True)
    try:
        yield store, reader
    finally:
        reader.close()
        store.close()


def open_store(path: Path, raw: dict):
    """A run store for the scenario ``raw``, as `arena run` opens one."""
    import yaml

    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    scenario = parse_scenario(raw)
    return RunStore.create_or_resume(path, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())


async def run_reviews(tmp_path: Path, raw: dict, folder: str = "run"):
    """Play the scenario ``raw`` into a store in ``tmp_path / folder``; its result, the review rows
    and the notes it stored."""
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario

    store = open_store(tmp_path / folder, raw)
    try:
        result = await run_tournament(parse_scenario(raw), store)
        return result, store.read.review_rows(), store.read.notes()
    finally:
        store.close()


class ContendedLimit:
    """Proves a run's ``calls: 1`` holds across its workers, from a mock server's side. Its
    ``answer`` (a mock's responder) counts the requests in flight and keeps the most seen
    (``peak``); while ``holding``, it holds each request until requests of two workers wait at the
    run's process at once (the limit held: ``watch`` sees that) or a second request reaches the
    server (the limit broken), whichever comes first."""

    def __init__(self, monkeypatch, who: str = "worker"):
        import threading

        from arena.run.workers import Workers

        self.contended, self._lock = threading.Event(), threading.Lock()
        self.in_flight = self.peak = 0
        self.holding, self._who = True, who
        original = Workers._hold

        async def hold(workers, worker, held, *rest):
            waiting = {w for (w, _), h in workers._held.items() if not h.released.is_set()}
            if len(waiting) >= 2:  # requests of two workers outstanding at the run's process at once
                self.contended.set()
            await original(workers, worker, held, *rest)

        monkeypatch.setattr(Workers, "_hold", hold)

    def answer(self, body) -> str:
        with self._lock:
            self.in_flight += 1
            self.peak = max(self.peak, self.in_flight)
            if self.in_flight > 1:
                self.contended.set()
        try:
            if self.holding:
                assert self.contended.wait(60), f"the other {self._who} never asked"
            return coins(4)
        finally:
            with self._lock:
                self.in_flight -= 1
