"""A backend that cannot be reached is not a player that chose badly.

A server killed in the middle of a run, one that answers 500 to everything, one that was never
there, one that hangs: no turn is defaulted for it, nothing is scored, the run says which backend
failed and how (exit status 4), and `arena run` again plays exactly what is missing, to the same
results as a run that never saw an outage. A slow model, on the other hand, times out like any
player. Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import os
import socket
import sqlite3
import subprocess
import sys
import threading
from collections import Counter
from io import StringIO
from pathlib import Path

import pytest
import trio
import yaml
from pydantic import Field
from rich.console import Console

from arena.cli.commands import main
from arena.cli.tables import print_results
from arena.contract import AgentConfig, BackendUnavailable, plugins
from arena.contract.calls import PROBE_SEAT
from arena.contract.agent import Agent
from arena.contract.events import ActionTaken, TurnFailed
from arena.agents.llm import LLMAgent, TransientError
from arena.results.payoffs import summarize
from arena.run.runner import KeepRecords, Observer, run_tournament
from arena.run.scenario import parse_scenario
from arena.contract import open_run
from arena.store import RunStore

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import LOCAL, coins
from mock_llm import OpenAIMock, is_probe

OUTAGE = 4
PROXIES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy", "OPENAI_API_KEY")


@pytest.fixture(autouse=True)
def wide_tables(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # tables read in this process: no cell wrapped


def environment() -> dict[str, str]:
    return {**{k: v for k, v in os.environ.items() if k not in PROXIES}, "COLUMNS": "200", "NO_PROXY": LOCAL,
            "no_proxy": LOCAL}


def arena(*args, cwd: Path, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=environment())


def start_arena(*args, cwd: Path) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=environment())


def flat(text: str) -> str:
    return " ".join(text.split())


def model(url: str, **extra) -> dict:
    return {"backend": "openai", "base_url": url, "model": "mock-model", "retries": 2, "backoff": 0.01, **extra}


def scenario(name: str, url: str, rounds: int = 3, repeats: int = 4, outage_wait: float = 1.0, **match) -> dict:
    return {
        "name": name, "seed": 7,
        "agents": {"alice": model(url), "bob": model(url), "carol": {"backend": "scripted", "strategy": "tit_for_tat"}},
        "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": 1}}],
        "tournament": {"repeats": repeats}, "concurrency": 2,
        "match": {"outage_wait": outage_wait, **match},
    }


def write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def read(capsys, *args) -> str:
    """A command that only reads a run, in this process (``arena run`` itself is always a subprocess here)."""
    capsys.readouterr()
    assert main([str(a) for a in args]) == 0
    return capsys.readouterr().out


def exports(capsys, run_dir: Path) -> tuple[str, str]:
    return read(capsys, "export", run_dir), read(capsys, "export", run_dir, "--format", "csv")


def records(run_dir: Path):
    store = open_run(run_dir)
    try:
        return list(store.records(status=None)), list(store.calls()), store.calls_in_flight(), store.notes()
    finally:
        store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- the server is killed mid-run, then comes back --------------------------------------------
def as_a_command(tmp_path: Path, *options):
    """``arena run`` in a subprocess, for ``a_server_killed_mid_run``."""
    def run(path: Path, run_dir: Path, view: str):
        process = start_arena("run", path, view, "--run-dir", run_dir, *options, cwd=tmp_path)

        def ended() -> tuple[int, str]:
            try:
                out, err = process.communicate(timeout=120)
            finally:
                if process.poll() is None:
                    process.kill()
            return process.returncode, out + err
        return ended
    return run


def a_server_killed_mid_run(tmp_path: Path, capsys, run) -> None:
    """The server dies mid-run: the run stops with its own status, names the backend and what went wrong,
    scores nothing of what the outage cut short and keeps a record of every call; once the server is back,
    the same command plays what is missing, asks only what was never answered and exports what an
    uninterrupted run does. ``run(path, run_dir, view)`` starts `arena run` (however the caller plays it)
    and gives back a function that waits for its end: its exit code and all it printed."""
    total = 4 * 3 * 2  # matches x rounds x model seats: one request per turn when nothing fails
    kill_after = 15  # two matches at a time, six requests each: at least one has finished by then
    with OpenAIMock() as mock:
        path = write(tmp_path / "s.yaml", scenario("killed", mock.base_url))
        reference = arena("run", path, "--quiet", "--run-dir", tmp_path / "reference", cwd=tmp_path)  # one process
        assert reference.returncode == 0, reference.stdout + reference.stderr
        assert mock.count == total
        expected = exports(capsys, tmp_path / "reference")
        played, *_ = records(tmp_path / "reference")
        assert [r.status for r in played] == ["finished"] * 4
        assert not [e for r in played for e in r.events if isinstance(e, TurnFailed) or getattr(e, "defaulted", False)]

        # the same scenario in another run directory; the server dies once it has answered kill_after requests
        answered_enough = threading.Event()

        def until_killed(count, body):
            if count == kill_after:
                answered_enough.set()
            return "ok" if count <= kill_after else "drop"  # what arrives before the kill lands gets no answer

        mock.reset(until_killed)
        port, url = mock.port, mock.base_url
        ended = run(path, tmp_path / "run", "--plain")
        try:
            assert answered_enough.wait(timeout=120), "the run never got that far"
            mock.stop()
        finally:
            code, said = ended()
        said = flat(said)
        assert code == OUTAGE, said
        assert f"Stopped: backend openai at {url}" in said  # the backend, by name and address
        assert "is unavailable: APIConnectionError: Connection error." in said  # and what went wrong
        assert "nothing of theirs was scored" in said
        told = re.search(r"(\d+) of (\d+) matches finished", said)
        assert told and int(told.group(2)) == 4, said  # of all four planned, those the outage kept from starting too

        first, calls, in_flight, notes = records(tmp_path / "run")
        statuses = Counter(r.status for r in first)
        assert 1 <= statuses["finished"] < 4 and statuses["interrupted"] >= 1 and "failed" not in statuses
        for record in first:  # no turn was defaulted or failed for the outage, nothing of an interrupted match scored
            assert not [e for e in record.events if isinstance(e, TurnFailed) or getattr(e, "defaulted", False)]
            if record.status == "interrupted":
                assert record.payoffs == {} and "APIConnectionError" in record.error
        assert not in_flight  # every call that was cut short has its record, wherever it was asked
        # each answer the server gave is recorded once; none is a cache hit, as no match was played again:
        # the answers a dying server still gave to requests it had taken in do not say it is back
        asked = [(c.match, c.seat, c.round, c.attempt, c.cached, c.error) for c in calls]
        assert sum(c.error is None for c in calls) == kill_after and not [c for c in calls if c.cached], asked
        assert any("is unavailable" in n["text"] for n in notes) and any("given up" in n["text"] for n in notes)
        assert not [n for n in notes if n["text"].endswith("is back")], notes
        assert "stopped by an outage" in flat(read(capsys, "runs", tmp_path))
        shown = flat(read(capsys, "show", tmp_path / "run"))
        assert "interrupted" in shown and "unavailable" in shown

        # the server is back, on the same address: the same command plays what is missing, and only that
        mock.reset(None)
        mock.start(port)
        code, said = run(path, tmp_path / "run", "--quiet")()
        said = flat(said)
        assert code == 0, said
        assert f"4 of 4 matches finished, {statuses['finished']} from the earlier run" in said
        assert mock.count == total - kill_after  # every answer the first run got was kept (replies cached)

    assert exports(capsys, tmp_path / "run") == expected  # byte for byte, JSON lines and CSV
    _, calls, in_flight, _ = records(tmp_path / "run")
    assert not in_flight and sum(c.error is None and not c.cached for c in calls) == total


@pytest.mark.parametrize("options", [(), ("--executor", "processes", "--workers", "2")], ids=["in-process", "two-workers"])
def test_a_server_killed_mid_run_stops_the_run_and_a_rerun_gives_the_uninterrupted_results(tmp_path, capsys, options):
    """With worker processes too: the outage, the calls cut short and the replies kept travel back to the run.
    Under Ray: tests/test_ray_run.py."""
    a_server_killed_mid_run(tmp_path, capsys, as_a_command(tmp_path, *options))


# -- a chat endpoint that keeps failing while its model list answers ----------------------------
def turn_counts(mock) -> Counter:
    """How often each turn was asked: requests with the same seed and conversation before the prompt are
    the same turn's (the prompt itself gains the reply's format when a failing server makes the backend
    try it without the schema)."""
    return Counter(json.dumps([r.messages[:-1], (r.body or {}).get("seed")], sort_keys=True) for r in mock.turns())


def cached_texts(run_dir: Path) -> list[str]:
    db = sqlite3.connect(run_dir / "responses.sqlite")
    try:
        return [text for (text,) in db.execute("SELECT text FROM responses")]
    finally:
        db.close()


@pytest.fixture(scope="module")
def flapping(tmp_path_factory):
    """One server for the flapping cases, and the export of a run that saw it fine: (mock, scenario, export)."""
    from contextlib import redirect_stdout

    folder = tmp_path_factory.mktemp("flapping")
    with OpenAIMock() as mock:
        path = write(folder / "s.yaml", scenario("flapping", mock.base_url, rounds=2, repeats=2, outage_wait=2.0))
        reference = arena("run", path, "--quiet", "--run-dir", folder / "reference", cwd=folder)
        assert reference.returncode == 0, reference.stdout + reference.stderr
        shown = []
        for extra in ((), ("--format", "csv")):
            with redirect_stdout(StringIO()) as out:
                assert main(["export", str(folder / "reference"), *extra]) == 0
            shown.append(out.getvalue())
        yield mock, path, tuple(shown)


@pytest.mark.parametrize("failure", ["500", "429", "nonjson", "malformed", "nochoices"])
def test_a_flapping_chat_endpoint_is_never_back_on_its_model_list_and_asks_each_turn_a_bounded_number_of_times(
        tmp_path, capsys, flapping, failure):
    """Every chat request fails (a 500, a 429 storm, an HTML page, JSON cut short, no message) while
    the model listing answers at once: no probe finds it back, so no match is replayed on a server
    that fails it again; each turn is asked its 3 tries and no more however long outage_wait is."""
    mock, path, expected = flapping
    mock.reset(lambda count, body: failure)
    result = arena("run", path, "--plain", "--run-dir", tmp_path / "run", cwd=tmp_path)
    said = flat(result.stdout + result.stderr)
    assert result.returncode == OUTAGE, said
    assert f"Stopped: backend openai at {mock.base_url}" in said and "is unavailable:" in said
    assert "DEFAULT" not in result.stdout  # the round log never shows a made-up move
    asked = turn_counts(mock)
    assert asked and set(asked.values()) == {3}  # retries: 2, so 3 tries a turn, and never a replay
    probes = len(mock.probes())
    assert 1 <= probes <= 2  # one at a time, after pauses of 1 s and 2 s, within the 2 s it is waited for

    played, calls, in_flight, notes = records(tmp_path / "run")
    assert played and {r.status for r in played} == {"interrupted"}
    for record in played:
        assert record.payoffs == {}
        assert not [e for e in record.events if isinstance(e, TurnFailed) or getattr(e, "defaulted", False)]
    assert not in_flight and calls and all(c.error for c in calls)
    assert sum(c.seat == PROBE_SEAT for c in calls) == probes  # each probe is in the call log, as a probe
    assert not [n for n in notes if n["text"].endswith("is back")]  # a listing is no proof, and a probe never passed
    assert any("given up" in n["text"] for n in notes)
    assert cached_texts(tmp_path / "run") == []  # nothing was answered, so nothing kept

    mock.reset(None)  # the server is fine again: the same command plays it all, to the same results
    again = arena("run", path, "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert again.returncode == 0, again.stdout + again.stderr
    assert set(turn_counts(mock).values()) == {1} and not mock.probes()
    assert exports(capsys, tmp_path / "run") == expected


# -- a server that was never there ------------------------------------------------------------
def test_a_backend_refusing_connections_from_the_start_plays_nothing_until_it_exists(tmp_path):
    port = free_port()
    url = f"http://127.0.0.1:{port}/v1"
    raw = scenario("absent", url, rounds=2, repeats=3, outage_wait=0.5)
    path = write(tmp_path / "s.yaml", raw)
    result = arena("run", path, "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
    said = flat(result.stdout + result.stderr)
    assert result.returncode == OUTAGE, said
    assert f"Stopped: backend openai at {url}" in said and "APIConnectionError: Connection error." in said
    assert "0 of " in said and "not started" in said
    played, calls, in_flight, _ = records(tmp_path / "run")
    assert played and all(r.status == "interrupted" and not r.payoffs for r in played)
    assert not in_flight and calls and all("Connection error" in c.error or "cancelled" in c.error for c in calls)

    mock = OpenAIMock().start(port)  # it exists at last, where the scenario says
    try:
        again = arena("run", path, "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert "3 of 3 matches finished" in flat(again.stdout)
        assert mock.count == 3 * 2 * 2
    finally:
        mock.stop()
    played, *_ = records(tmp_path / "run")
    assert [r.status for r in played] == ["finished"] * 3


# -- a slow server: a timeout, not an outage -----------------------------------------------------
async def play_stored(run_dir: Path, raw: dict):
    """The run's result, the one match it played, and its store."""
    s = parse_scenario(raw)
    store = RunStore.create_or_resume(run_dir, s.name, yaml.safe_dump(raw), s.fingerprint())
    keep = KeepRecords()
    result = await run_tournament(s, store, keep)
    (record,) = keep.in_order(result)
    return result, record, store


async def test_a_model_too_slow_for_the_turn_times_out_and_its_cut_off_call_is_recorded(tmp_path):
    # the turn's request takes a minute; the probe after it, a few tokens, is answered at once
    with OpenAIMock(lambda count, body: "ok" if is_probe(body) else "slow", slow_seconds=60) as mock:
        raw = scenario("slow", mock.base_url, rounds=2, repeats=1, turn_timeout=0.5)
        raw["agents"] = {"alice": model(mock.base_url), "carol": {"backend": "scripted", "strategy": "free_rider"}}
        result, record, store = await play_stored(tmp_path / "run", raw)
        try:
            assert record.status == "finished" and not result.outages  # the server is up; the model is late
            alice = next(s.label for s in record.seats if s.agent == "alice")
            failed = [e for e in record.events if isinstance(e, TurnFailed) and e.seat == alice]
            assert [(e.round, e.attempt, e.failure) for e in failed] == [(1, 1, "timeout"), (2, 1, "timeout")]
            taken = [e for e in record.events if isinstance(e, ActionTaken) and e.seat == alice]
            assert [(e.defaulted, e.attempts, e.action) for e in taken] == [(True, 1, 0)] * 2
            assert len(mock.turns()) == 2  # one request per turn: a timeout is not asked again
            assert len(mock.probes()) == 2 and all(r.reply for r in mock.probes())  # each answered: the server works
            calls = [c for c in store.read.calls() if c.seat != PROBE_SEAT]
            assert len(calls) == 2 and not store.read.calls_in_flight()
            for call in calls:
                assert call.error.startswith("cut off by the turn's deadline") and call.latency >= 0.45
                assert call.prompt_tokens is None and call.completion_tokens is None
            (row,) = [r for r in summarize(store.read.scores(), store.read.turns()) if r.agent == "alice"]
            assert (row.timeouts, row.invalid_replies, row.defaulted_turns) == (2, 0, 2)
            console = Console(file=StringIO(), width=200)
            print_results(console, store.read)
            table = console.file.getvalue()
            header = next(line for line in table.splitlines() if "Invalid" in line)
            cells = lambda line: [c.strip() for c in line.strip("┃│ ").replace("┃", "│").split("│")]
            line = next(line for line in table.splitlines() if line.startswith("│ alice "))
            assert dict(zip(cells(header), cells(line)))["Timeouts"] == "2"
        finally:
            store.close()


async def test_a_server_hanging_on_every_try_is_down_and_its_requests_are_bounded_by_the_turn(tmp_path):
    with OpenAIMock(lambda count, body: "slow", slow_seconds=60) as mock:
        raw = scenario("hung", mock.base_url, rounds=2, repeats=1, turn_timeout=1.0, outage_wait=0)
        raw["agents"] = {"alice": model(mock.base_url, timeout=0.3, retries=10),
                         "carol": {"backend": "scripted", "strategy": "free_rider"}}
        result, record, store = await play_stored(tmp_path / "run", raw)
        try:
            assert record.status == "interrupted" and record.payoffs == {}
            assert "no answer within 0.3 s (when the turn's time ran out)" in record.error
            assert [o.agent for o in result.outages] == ["alice"]
            assert 2 <= mock.count <= 4  # tries of 0.3 s each, inside one second, for the one turn played
            (call,) = list(store.read.calls())
            assert mock.count <= call.retries + 1 <= 4 and "unavailable" in call.error and not store.read.calls_in_flight()
        finally:
            store.close()


async def test_a_server_that_hangs_without_a_per_try_timeout_is_down_not_a_slow_model(tmp_path):
    """No try times out on its own (no agent `timeout`): the turn's deadline cuts the call off, and the
    server, probed with a chat request, answers nothing either: an outage, not a default move."""
    with OpenAIMock(lambda count, body: "slow", slow_seconds=60, hung=True) as mock:
        raw = scenario("hung", mock.base_url, rounds=2, repeats=1, turn_timeout=0.5, outage_wait=0)
        raw["agents"] = {"alice": model(mock.base_url), "carol": {"backend": "scripted", "strategy": "free_rider"}}
        result, record, store = await play_stored(tmp_path / "run", raw)
        try:
            assert record.status == "interrupted" and record.payoffs == {}
            assert "nor to a probe after it (when the turn's time ran out)" in record.error
            assert [o.agent for o in result.outages] == ["alice"]
            assert not [e for e in record.events if isinstance(e, ActionTaken)]  # no move was made for anyone
            (probe, call) = list(store.read.calls())
            assert probe.seat == PROBE_SEAT and probe.error == "unanswered: the probe was given up"
            assert [r.is_probe for r in mock.requests] == [False, True]
            assert "unavailable" in call.error and call.prompt_tokens is None and not store.read.calls_in_flight()
        finally:
            store.close()


# -- the breaker, in process -----------------------------------------------------------------------
class Endpoint:
    """A fake server: answers ``answers`` requests (0: none), then is down until its ``back_at``-th probe
    (None: for good); each answer takes ``seconds``."""

    def __init__(self, answers: int, back_at: int | None, seconds: float = 1.0):
        self.answers, self.back_at, self.seconds = answers, back_at, seconds
        self.up, self.answered, self.probes = answers > 0, 0, 0


ENDPOINTS: dict[str, Endpoint] = {}


class FakeConfig(AgentConfig):
    backend: str = "fake_model"
    url: str = Field(description="Which fake endpoint answers.")


class FakeModel(Agent):
    Config = FakeConfig

    def endpoint(self):
        return self.config.url

    def down(self):
        return BackendUnavailable(self.name, "fake_model", self.config.url, "connection refused")

    async def reply(self, turn):
        server = ENDPOINTS[self.config.url]
        await trio.sleep(server.seconds)
        if not server.up:
            raise self.down()
        server.answered += 1
        if server.answered == server.answers:
            server.up = False
        return coins(3)

    async def probe(self):
        server = ENDPOINTS[self.config.url]
        server.probes += 1
        server.up = server.up or server.probes == server.back_at
        if not server.up:
            raise self.down()


class Timeline(Observer):
    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    def event(self, event):
        if event.type in ("match_started", "match_ended", "match_interrupted"):
            self.seen.append((event.type, event.match))

    def note(self, text):
        self.seen.append(("note", text))


@pytest.fixture
def fake_models():
    plugins.register("agent backend", "fake_model", FakeModel)
    yield ENDPOINTS
    plugins.unregister("agent backend", "fake_model")
    ENDPOINTS.clear()


def two_endpoints(outage_wait: float) -> dict:
    return {
        "name": "breaker", "seed": 1, "concurrency": 2,
        "agents": {"flaky": {"backend": "fake_model", "url": "http://flaky"}, "steady": {"backend": "fake_model", "url": "http://steady"},
                   "giver": {"backend": "scripted", "strategy": "always_all"}},
        "games": [{"game": "public_goods", "label": "on-flaky", "agents": ["flaky", "giver"], "params": {"rounds": 2}},
                  {"game": "public_goods", "label": "on-steady", "agents": ["steady", "giver"], "params": {"rounds": 2}}],
        "tournament": {"repeats": 3}, "match": {"outage_wait": outage_wait},
    }


async def test_while_a_backend_is_down_its_matches_wait_the_others_go_on_and_a_probe_finds_its_return(
        fake_models, autojump_clock):
    # down from its first request, back at the third probe; the steady backend's matches are slower than
    # a flaky match takes to fail, so whichever matches trio starts first, some of them run during the outage
    fake_models["http://flaky"] = Endpoint(answers=0, back_at=3)
    fake_models["http://steady"] = Endpoint(answers=10**6, back_at=None, seconds=2.0)
    timeline = Timeline()
    result = await run_tournament(parse_scenario(two_endpoints(outage_wait=600)), observer=timeline)

    assert list(result.statuses.values()) == ["finished"] * 6 and not result.outages and not result.unplayed
    seen = timeline.seen
    down = next(i for i, (kind, text) in enumerate(seen) if kind == "note" and "is unavailable" in text)
    back = next(i for i, (kind, text) in enumerate(seen) if kind == "note" and text.endswith("is back"))
    assert down < back and "http://flaky" in seen[down][1] and "http://flaky" in seen[back][1]
    while_down = seen[down:back]
    assert not [m for kind, m in while_down if kind == "match_started" and m.startswith("on-flaky")]
    assert [m for kind, m in while_down if kind in ("match_started", "match_ended") and m.startswith("on-steady")]
    interrupted = [m for kind, m in seen if kind == "match_interrupted"]
    assert interrupted and all(m.startswith("on-flaky") for m in interrupted)
    assert fake_models["http://flaky"].probes == 3  # the waiting matches took turns: one probe at a time
    # every interrupted match was played again, from the start, once the backend was back
    for key in interrupted:
        starts = [i for i, (kind, m) in enumerate(seen) if kind == "match_started" and m == key]
        assert len(starts) >= 2 and starts[-1] > back


async def test_a_backend_that_stays_down_is_given_up_and_the_rest_of_the_run_finishes(fake_models, autojump_clock):
    fake_models["http://flaky"] = Endpoint(answers=1, back_at=None)
    fake_models["http://steady"] = Endpoint(answers=10**6, back_at=None)
    started = trio.current_time()
    keep = KeepRecords()
    result = await run_tournament(parse_scenario(two_endpoints(outage_wait=45)), observer=keep)
    by_group = Counter((r.group, r.status) for r in keep.in_order(result))
    assert by_group[("on-steady", "finished")] == 3  # the other backend's matches all finished
    assert by_group[("on-flaky", "finished")] == 0 and by_group[("on-flaky", "interrupted")] >= 1
    assert len(result.unplayed) + by_group[("on-flaky", "interrupted")] == 3  # the rest never started
    assert [(o.agent, o.endpoint, o.error) for o in result.outages] == [("flaky", "http://flaky", "connection refused")]
    assert trio.current_time() - started < 45 + 30  # it gave up once 45 s had passed without an answer


# -- a chat endpoint that hangs, or answers nothing, while its model list answers -----------------
@pytest.mark.parametrize("failure", ["hang", "empty", "null"])
def test_a_chat_endpoint_that_hangs_or_answers_no_text_is_an_outage_and_a_resume_gives_the_same_export(
        tmp_path, capsys, failure):
    """From its sixth request on, the chat endpoint accepts requests and never answers them, or
    answers every one (the probe too) with no text, while the model list answers at once. That is
    an outage, not a player's moves: exit 4, no default, nothing empty kept; and once the server
    is fine the same command plays what is missing, to the export of a run that saw no outage."""
    total, answered = 4 * 3 * 2, 5
    with OpenAIMock() as mock:
        raw = scenario("silent", mock.base_url, turn_timeout=2.0, outage_wait=1.0)
        path = write(tmp_path / "s.yaml", raw)
        reference = arena("run", path, "--quiet", "--run-dir", tmp_path / "reference", cwd=tmp_path)
        assert reference.returncode == 0, reference.stdout + reference.stderr
        expected = exports(capsys, tmp_path / "reference")

        mock.reset(lambda count, body: "ok" if count <= answered else failure)
        result = arena("run", path, "--plain", "--run-dir", tmp_path / "run", cwd=tmp_path)
        said = flat(result.stdout + result.stderr)
        assert result.returncode == OUTAGE, said
        assert f"Stopped: backend openai at {mock.base_url}" in said
        assert ("nor to a probe after it" if failure == "hang" else "the reply had no text, nor had the answer to a "
                "probe after it") in said
        assert "DEFAULT" not in result.stdout
        assert mock.probes()  # the chat endpoint itself was asked, and failed to answer
        assert max(turn_counts(mock).values()) == 1  # a turn is asked once: neither a hang nor no text is retried

        played, calls, in_flight, _ = records(tmp_path / "run")
        assert {r.status for r in played} <= {"finished", "interrupted"} and "interrupted" in {r.status for r in played}
        for record in played:
            assert not [e for e in record.events if isinstance(e, TurnFailed) or getattr(e, "defaulted", False)]
        assert not in_flight and sum(c.error is None and c.seat != PROBE_SEAT for c in calls) == answered
        assert len(cached_texts(tmp_path / "run")) == answered and all(cached_texts(tmp_path / "run"))

        mock.reset(None)
        again = arena("run", path, "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert len(mock.turns()) == total - answered and not mock.probes()  # no turn paid for twice
    assert exports(capsys, tmp_path / "run") == expected


async def test_an_empty_reply_among_real_ones_is_an_invalid_reply_asked_again_and_never_cached(tmp_path):
    with OpenAIMock(lambda count, body: "empty" if count == 1 else "ok") as mock:
        raw = scenario("one-empty", mock.base_url, rounds=2, repeats=1)
        raw["agents"] = {"alice": model(mock.base_url), "carol": {"backend": "scripted", "strategy": "free_rider"}}
        result, record, store = await play_stored(tmp_path / "run", raw)
        try:
            assert record.status == "finished" and not result.outages
            alice = next(s.label for s in record.seats if s.agent == "alice")
            failed = [(e.round, e.attempt, e.failure, e.reply) for e in record.events if isinstance(e, TurnFailed)]
            assert failed == [(1, 1, "invalid", "")]
            taken = [(e.round, e.attempts, e.defaulted) for e in record.events if isinstance(e, ActionTaken) and e.seat == alice]
            assert taken == [(1, 2, False), (2, 1, False)]
            # the empty reply, the probe it led to (answered), the re-ask, round 2
            assert [r.behaviour for r in mock.requests] == ["empty", "ok", "ok", "ok"]
            assert [r.is_probe for r in mock.requests] == [False, True, False, False]
            calls = list(store.read.calls())
            assert [(c.seat == PROBE_SEAT, c.error) for c in calls] == [(True, None), (False, None), (False, None),
                                                                         (False, None)]
        finally:
            store.close()
    assert len(cached_texts(tmp_path / "run")) == 2 and all(cached_texts(tmp_path / "run"))


# -- a slow model on a busy server ------------------------------------------------------------------
def test_a_slow_model_on_a_server_that_stops_listing_its_models_while_it_generates_is_neither_an_outage_nor_a_failure(
        tmp_path):
    """As llama_cpp.server: one request generates at a time (0.6 s each), the others queue, and the
    model list is not answered while anything generates. Two seats asked at once: the second waits
    for the first and is cut off by the turn's 1 s; the probe after it queues behind the generation
    the server finishes anyway, and is answered: a timeout, and the match plays on."""
    with OpenAIMock(one_at_a_time=True, generate_seconds=0.6) as mock:
        raw = scenario("busy", mock.base_url, rounds=2, repeats=2, turn_timeout=1.0, outage_wait=30)
        raw["concurrency"] = 1
        path = write(tmp_path / "s.yaml", raw)
        result = arena("run", path, "--plain", "--run-dir", tmp_path / "run", cwd=tmp_path)
        said = flat(result.stdout + result.stderr)
        assert result.returncode == 0, said
        assert "unavailable" not in said and "2 of 2 matches finished" in said
        assert mock.probes() and all(r.reply is not None for r in mock.probes())  # asked, and answered, in turn

    played, calls, in_flight, notes = records(tmp_path / "run")
    assert [r.status for r in played] == ["finished"] * 2 and not in_flight
    assert not [n for n in notes if n["topic"] == "outage"]
    timeouts = [e for r in played for e in r.events if isinstance(e, TurnFailed) and e.failure == "timeout"]
    assert timeouts and len(timeouts) == len(mock.probes())  # each cut-off turn: one probe, then the default
    assert sum(c.error is not None and c.error.startswith("cut off by the turn's deadline") for c in calls) == len(timeouts)


# -- the breaker's state, changed by probes and real answers at once -----------------------------------
async def test_a_real_answer_closing_the_breaker_while_a_probe_is_out_leaves_one_back_and_no_crash(autojump_clock):
    """A match still playing on the endpoint gets a real answer while a waiting match's probe is in
    flight: the answer closes the breaker, and the probe's success, when it comes, has nothing to
    close (it used to run ``_back`` on the cleared failure: AttributeError on None)."""
    from arena.run.outages import Outages

    said: list[str] = []
    probe_out, probe_back = trio.Event(), trio.Event()

    async def probe(agent):
        probe_out.set()
        await probe_back.wait()

    outages = Outages(60, probe, lambda agent, endpoint, text: said.append(text))
    outages.failed(BackendUnavailable("alice", "openai", "http://a", "500: overloaded"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outages.wait_for, ["http://a"])
        await probe_out.wait()
        outages.answered("http://a")  # the real answer
        probe_back.set()
    assert [t.split(" is ")[-1] for t in said] == ["unavailable: 500: overloaded; matches that need it wait for it", "back"]
    assert not outages.any_down(["http://a"]) and not outages.given_up()


async def test_a_probe_failing_after_a_real_answer_closed_the_breaker_does_not_open_it_again(autojump_clock):
    from arena.run.outages import Outages

    said: list[str] = []
    probe_out, probe_back = trio.Event(), trio.Event()

    async def probe(agent):
        probe_out.set()
        await probe_back.wait()
        raise BackendUnavailable("alice", "openai", "http://a", "429: slow down")

    outages = Outages(60, probe, lambda agent, endpoint, text: said.append(text))
    outages.failed(BackendUnavailable("alice", "openai", "http://a", "500: overloaded"))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(outages.wait_for, ["http://a"])
        await probe_out.wait()
        outages.answered("http://a")
        probe_back.set()
    assert not outages.any_down(["http://a"]) and len(said) == 2 and said[-1].endswith("is back")
    assert await outages.wait_for(["http://a"]) is None  # nothing to wait for, and no stale give-up time


async def test_an_answer_to_a_request_sent_before_the_endpoint_failed_does_not_say_it_is_back(autojump_clock):
    """A server that dies still answers what it had taken in. Such an answer, arriving after another
    request found the server down, used to close the breaker: the run said "is back", played the
    interrupted match again (a cached turn recorded a second time) and found the server down anew.
    Only a request sent since the endpoint failed speaks for it."""
    from arena.run.outages import Outages

    said: list[str] = []
    outages = Outages(60, None, lambda agent, endpoint, text: said.append(text))
    before = outages.asking("http://a")  # in flight when the server dies
    outages.failed(BackendUnavailable("alice", "openai", "http://a", "APIConnectionError: Connection error."))
    outages.answered("http://a", before)
    assert outages.any_down(["http://a"]) and len(said) == 1  # still down, and nothing said

    since = outages.asking("http://a")  # sent while it is down, answered: it is back
    outages.answered("http://a", since)
    assert not outages.any_down(["http://a"]) and said[-1].endswith("is back")

    outages.failed(BackendUnavailable("alice", "openai", "http://a", "APIConnectionError: Connection error."))
    outages.answered("http://a", since)  # sent in the earlier episode: old news for this one
    assert outages.any_down(["http://a"])
    outages.answered("http://a")  # an answer whose sending nobody saw counts, as it always did
    assert not outages.any_down(["http://a"]) and [t.endswith("is back") for t in said] == [False, True, False, True]


async def test_a_real_answer_while_a_probe_is_out_on_two_endpoints_and_four_matches_does_not_crash_the_run(tmp_path):
    """The issue's reproduction, made exact with the mock's gates. Endpoint A: match X's first turn
    fails (500), so A's breaker opens and X probes A; match Y's first turn is held until that probe
    arrives, then answered (a real answer: the breaker closes); the probe is answered only once Y has
    moved on to its next turn. Endpoint B plays its two matches meanwhile."""
    state = {"held": None, "failed": False, "probed": False}
    with OpenAIMock() as a, OpenAIMock() as b:
        def on_a(count, body):
            if is_probe(body):
                state["probed"] = True
                a.open_gate("held")  # the match still playing gets its answer while the probe is out
                return "gate:probe"
            seed = body["seed"]
            if state["held"] is None:
                state["held"] = seed
                return "gate:held"
            if not state["failed"] and seed != state["held"]:
                state["failed"] = True
                return "500"
            if state["probed"] and seed != state["held"]:
                a.open_gate("probe")  # that answer has been taken: now the probe comes back
            return "ok"

        a.reset(on_a)
        raw = {
            "name": "race", "seed": 3, "concurrency": 4,
            "agents": {"alice": model(a.base_url, retries=0), "bob": model(b.base_url),
                       "carol": {"backend": "scripted", "strategy": "tit_for_tat"}},
            "games": [{"game": "public_goods", "label": "on-a", "agents": ["alice", "carol"], "params": {"rounds": 2}},
                      {"game": "public_goods", "label": "on-b", "agents": ["bob", "carol"], "params": {"rounds": 2}}],
            "tournament": {"repeats": 2}, "match": {"turn_timeout": 20, "outage_wait": 60},
        }
        s = parse_scenario(raw)
        store = RunStore.create_or_resume(tmp_path / "run", s.name, yaml.safe_dump(raw), s.fingerprint())
        keep = KeepRecords()
        try:
            result = await run_tournament(s, store, keep)
            assert list(result.statuses.values()) == ["finished"] * 4 and not result.outages
            assert state == {"held": state["held"], "failed": True, "probed": True} and len(a.probes()) == 1
            assert [c.error for c in store.read.calls() if c.agent == "bob"] == [None] * 4  # B's calls: all answered
            outage_notes = [n["text"] for n in store.read.notes() if n["topic"] == "outage"]
            assert len(outage_notes) == 2 and outage_notes[-1].endswith("is back")
            assert Counter(r.status for r in store.read.records(status=None)) == {"finished": 4}
        finally:
            store.close()


# -- the probe each hosted backend sends -------------------------------------------------------------
@pytest.mark.parametrize("backend", ["openai", "anthropic"])
async def test_the_probe_is_the_smallest_chat_request_and_an_answer_without_text_fails_it(backend):
    from arena.agents.llm import PROBE_PROMPT, PROBE_TOKENS
    from mock_llm import AnthropicMock

    from arena.agents.anthropic_backend import AnthropicAgent
    from arena.agents.openai_backend import OpenAIAgent

    Mock, Agent_ = (OpenAIMock, OpenAIAgent) if backend == "openai" else (AnthropicMock, AnthropicAgent)
    with Mock(["ok", "empty", "null", "nochoices", "429", "400"]) as mock:
        config = Agent_.Config(base_url=mock.base_url, model="mock-model", api_key_env="NO_SUCH_KEY")
        agent = Agent_("alice", config)
        try:
            await agent.probe()  # answered with text
            for _ in range(4):  # no text (empty, null), no message, a rate limit: not back
                with pytest.raises(BackendUnavailable) as raised:
                    await agent.probe()
                assert raised.value.endpoint == mock.base_url
            await agent.probe()  # a refusal is an answer: the server works, the request is what it refused
        finally:
            await agent.aclose()
        assert len(mock.requests) == 6 and all(r.is_probe for r in mock.requests)
        path = "/v1/chat/completions" if backend == "openai" else "/v1/messages"
        for r in mock.requests:
            assert r.path == path and r.body["model"] == "mock-model" and r.body["max_tokens"] == PROBE_TOKENS
            assert r.body["messages"] == [{"role": "user", "content": PROBE_PROMPT}]
            assert not {"system", "tools", "response_format", "grammar"} & set(r.body)


class FailingChat(LLMAgent):
    """A model backend whose chat path fails every request, its probe included (as a 429 storm does),
    with the default retries: 5 tries a turn."""

    backend_name = "failing_chat"
    asked: Counter = Counter()  # (match, round, attempt) -> requests
    probes = 0

    def endpoint(self):
        return "http://failing"

    async def complete(self, request):
        FailingChat.asked[request.seed] += 1
        await trio.sleep(0.1)
        raise TransientError("429: rate limited")

    async def probe(self, match=""):
        FailingChat.probes += 1
        raise BackendUnavailable(self.name, self.backend_name, self.endpoint(), "429: rate limited")


@pytest.mark.parametrize("outage_wait", [10, 600])
async def test_requests_per_turn_do_not_grow_with_outage_wait(autojump_clock, outage_wait):
    plugins.register("agent backend", "failing_chat", FailingChat)
    FailingChat.asked, FailingChat.probes = Counter(), 0
    try:
        raw = {"name": "storm", "seed": 1, "concurrency": 2,
               "agents": {"storm": {"backend": "failing_chat", "model": "m"},
                          "giver": {"backend": "scripted", "strategy": "always_all"}},
               "games": [{"game": "public_goods", "params": {"rounds": 2}}],
               "tournament": {"repeats": 3}, "match": {"outage_wait": outage_wait}}
        result = await run_tournament(parse_scenario(raw))
    finally:
        plugins.unregister("agent backend", "failing_chat")
    assert [o.agent for o in result.outages] == ["storm"] and "finished" not in result.statuses.values()
    assert set(FailingChat.asked.values()) == {5}  # retries 4: five tries a turn, however long the run waits
    assert FailingChat.probes >= (3 if outage_wait == 10 else 20)  # the waiting went on probing, and only probing
