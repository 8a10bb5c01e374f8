"""A run played by worker processes (``concurrency.processes``, ``arena run --processes N``) is the
run one process plays: the same store byte for byte, the same requests to a model, one request
for what two workers ask at once, and a worker that dies stops the run as a crash would, keeping
every finished match. Nothing here leaves 127.0.0.1."""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from functools import partial
from pathlib import Path

import pytest
import trio
import yaml
from pydantic import Field

from arena.contract import AgentConfig, plugins
from arena.contract.agent import Agent, FatalAgentError
from arena.contract.game import Game, Notice
from arena.run.runner import KeepRecords, run_tournament
from arena.run.scenario import parse_scenario
from arena.run.tournament import count
from arena.run.workers import WorkerFailed, Workers

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import ContendedLimit, arena_offline, coins, open_store
from mock_llm import OpenAIMock


def write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def exported(run_dir: Path, cwd: Path) -> tuple[str, str]:
    out = []
    for form in ("jsonl", "csv"):
        done = arena_offline("export", run_dir, "--format", form, cwd=cwd)
        assert done.returncode == 0, done.stderr
        out.append(done.stdout)
    return out[0], out[1]


# -- the same run, whoever plays it ----------------------------------------------------------


def scripted_tournament() -> dict:
    return {
        "name": "workers", "seed": 3,
        "agents": {"mirror": {"backend": "scripted", "strategy": "tit_for_tat"},
                   "dice": {"backend": "scripted", "strategy": "random_contributor"},
                   "miser": {"backend": "scripted", "strategy": "free_rider"},
                   "sage": {"backend": "scripted", "strategy": "idiom_player"},
                   "scholar": {"backend": "scripted", "strategy": "idiom_player"}},
        "games": [{"game": "public_goods", "agents": ["mirror", "dice", "miser"], "params": {"rounds": 3}},
                  {"game": "idiom_solitaire", "agents": ["sage", "scholar"]}],
        "tournament": {"format": "all_pairs", "repeats": 3},
        "concurrency": {"matches": 4},
    }


def test_a_run_played_by_worker_processes_stores_what_one_process_stores(tmp_path):
    path = write(tmp_path / "s.yaml", scripted_tournament())
    for processes in (1, 3):
        done = arena_offline("run", path, "--quiet", "--processes", processes, "--run-dir", tmp_path / f"p{processes}",
                             cwd=tmp_path)
        assert done.returncode == 0, done.stdout + done.stderr
    one, three = exported(tmp_path / "p1", tmp_path), exported(tmp_path / "p3", tmp_path)
    assert one == three  # JSON lines and CSV, byte for byte: every message, event and payoff
    lines = one[0].splitlines()
    assert len(lines) == count(parse_scenario(scripted_tournament())) >= 12  # every match of the plan
    assert {json.loads(line)["status"] for line in lines} == {"finished"}
    ranked = [arena_offline("rank", tmp_path / run, "--json", cwd=tmp_path) for run in ("p1", "p3")]
    assert ranked[0].returncode == 0 and ranked[0].stdout == ranked[1].stdout


class Talk(Game):
    """Each seat says who it is, once: the reply says which process played the match."""

    description = "test: one round of talk"
    min_seats = max_seats = 2

    def rules(self, seat):
        return f"You are {seat}."

    def prompt(self, seat, round):
        return "Who plays you?"

    def parse(self, seat, reply, round=0):
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions) -> list[Notice]:
        return []

    def is_over(self, round):
        return round >= 1

    def payoffs(self):
        return {seat: 0.0 for seat in self.seats}


class ProcessConfig(AgentConfig):
    backend: str = "process_id"
    crash_on: str | None = Field(None, description="A file: the first match to find it removes it and its process dies.")
    cannot_play: bool = False


class SaysItsProcess(Agent):
    """Replies with the id of the process it runs in; can be made to kill that process, or to refuse to play."""

    Config = ProcessConfig

    async def prepare(self):
        if self.config.cannot_play:
            raise FatalAgentError(f"agent {self.name!r} cannot play here")

    async def reply(self, turn):
        flag = self.config.crash_on
        if flag is not None and os.path.exists(flag) and turn.match.startswith("talk#3:"):
            os.remove(flag)
            os._exit(9)  # as a process killed by the system would: no clean-up, nothing said
        await trio.sleep(0)
        return f"{self.name} in process {os.getpid()}"


@pytest.fixture
def talk():
    plugins.register("game", "talk", Talk)
    plugins.register("agent backend", "process_id", SaysItsProcess)
    yield
    plugins.unregister("game", "talk")
    plugins.unregister("agent backend", "process_id")


def talk_scenario(**agent) -> dict:
    return {"name": "talk", "seed": 1,
            "agents": {"ann": {"backend": "process_id", **agent}, "ben": {"backend": "process_id"}},
            "games": [{"game": "talk"}], "tournament": {"repeats": 8},
            "concurrency": {"matches": 4, "processes": 2}}


async def test_the_matches_are_played_in_the_workers_and_the_run_gets_every_record_whole(tmp_path, talk):
    raw = talk_scenario()
    store = open_store(tmp_path / "run", raw)
    keep = KeepRecords()
    try:
        result = await run_tournament(parse_scenario(raw), store, keep)
        stored = {r.key: r for r in store.read.records(status=None)}
    finally:
        store.close()
    assert result.count("finished") == 8
    replies = [m.content for r in stored.values() for m in r.messages if m.kind == "reply"]
    processes = Counter(int(text.rsplit(" ", 1)[1]) for text in replies)
    assert os.getpid() not in processes and len(processes) == 2  # both workers played, the run's process did not
    records = keep.in_order(result)
    assert [r.key for r in records] == list(result.statuses)
    for record in records:  # what the observer got is what the store has: messages and events included
        assert record == stored[record.key] and len(record.messages) == 6 and len(record.events) > 6  # rules, prompts, replies


async def test_an_agent_that_cannot_play_in_a_worker_stops_the_run_before_any_match(tmp_path, talk):
    raw = talk_scenario(cannot_play=True)
    store = open_store(tmp_path / "run", raw)
    try:
        with pytest.raises(FatalAgentError, match="'ann' cannot play here"):
            await run_tournament(parse_scenario(raw), store)
        assert store.read.counts() == {} and store.read.status() == "interrupted"
    finally:
        store.close()


async def test_a_worker_that_dies_stops_the_run_and_a_rerun_plays_only_what_it_lost(tmp_path, talk):
    flag = tmp_path / "crash"
    flag.write_text("once")
    raw = talk_scenario(crash_on=str(flag))
    store = open_store(tmp_path / "run", raw)
    try:
        with pytest.raises(WorkerFailed, match=r"worker process \d+ ended while the run needed it"):
            await run_tournament(parse_scenario(raw), store)
        kept = store.read.finished_keys()
        assert store.read.status() == "interrupted" and not [k for k in kept if k.startswith("talk#3:")]
    finally:
        store.close()
    assert not flag.exists()
    store = open_store(tmp_path / "run", raw)
    try:
        again = await run_tournament(parse_scenario(raw), store)
        assert again.resumed == len(kept) and again.count("finished") == 8
        assert len(store.read.finished_keys()) == 8
    finally:
        store.close()


# -- what a model is sent --------------------------------------------------------------------


def model_scenario(url: str, processes: int) -> dict:
    model = {"backend": "openai", "base_url": url, "model": "mock-model", "seed": 1, "temperature": 0,
             "backoff": 0.01, "timeout": 20}
    return {
        "name": "models", "seed": 5,
        "agents": {"alice": model, "bob": dict(model)},
        "games": [{"game": "public_goods", "params": {"rounds": 1}}],
        "tournament": {"format": "fixed", "repeats": 2},  # the same table twice: the same two requests
        "concurrency": {"matches": 2, "processes": processes},
    }


async def test_workers_ask_a_model_what_one_process_asks_and_share_a_request_asked_twice_at_once(tmp_path, monkeypatch):
    """Two repeats of one table ask the very same two requests. One process asks each once and the
    other match waits for the reply; with two workers, each playing one of the matches, the second
    worker waits for the first one's request too, however they arrive: the server holds the first
    request of each kind until the other worker has queued for it."""
    both_queued = threading.Event()
    doubled = []
    original = Workers._claim

    def claim(self, worker, digest, *rest):
        original(self, worker, digest, *rest)
        if len(self._claims[digest]) == 2:
            doubled.append(digest)
            if len(doubled) == 2:
                both_queued.set()

    monkeypatch.setattr(Workers, "_claim", claim)
    seen: dict[int, list] = {}
    for processes in (1, 2):
        held = processes == 2

        def answer(body, held=held):
            if held:
                assert both_queued.wait(60), "the other worker never asked"
            return coins(4)

        with OpenAIMock(responder=answer) as mock:
            raw = model_scenario(mock.base_url, processes)
            store = open_store(tmp_path / f"p{processes}", raw)
            try:
                result = await run_tournament(parse_scenario(raw), store)
                calls = list(store.read.calls())
            finally:
                store.close()
            seen[processes] = sorted(json.dumps(body, sort_keys=True) for body in mock.bodies())
        assert result.count("finished") == 2
        assert Counter(c.cached for c in calls) == {False: 2, True: 2}  # one paid request of each kind, one reused
    assert len(seen[1]) == 2 and seen[2] == seen[1]  # the same requests, byte for byte
    assert len(doubled) == 2
    for processes in (1, 2):
        assert exported(tmp_path / f"p{processes}", tmp_path) == exported(tmp_path / "p1", tmp_path)


async def test_the_rate_limits_hold_for_all_workers_together(tmp_path, monkeypatch):
    """``calls: 1`` is one request in flight for the whole run, not one per worker. Two workers play
    a match each, and each match asks both seats at once: the server holds the first request until
    the run's process has a request of the other worker waiting for its place (the limit held), or
    a second request reaches the server (the limit broken), whichever comes first."""
    limit = ContendedLimit(monkeypatch)
    with OpenAIMock(responder=limit.answer) as mock:
        raw = model_scenario(mock.base_url, 2)
        raw["limits"] = {"openai": {"calls": 1}}
        store = open_store(tmp_path / "run", raw)
        try:
            result = await run_tournament(parse_scenario(raw), store, use_cache=False)
            calls = list(store.read.calls())
        finally:
            store.close()
        requests = len(mock.bodies())
    assert result.count("finished") == 2 and requests == 4 and len(calls) == 4
    assert limit.peak == 1, f"{limit.peak} requests were in flight at once under calls: 1"


class Sent:
    """A worker's socket, as the run writes to it: what is put on it goes to ``sent``, with the worker's pid."""

    def __init__(self, sent: list[tuple[int, tuple]], pid: int):
        self.sent, self.pid = sent, pid

    def put(self, *item) -> None:
        self.sent.append((self.pid, item))


async def test_a_place_given_up_while_waiting_is_let_go_and_the_tokens_used_are_counted():
    """The run's side of the limits, frame by frame: a request that gave up while waiting for its
    place (its turn ran out) takes no place, and the tokens a request used count in the window."""
    from trio.testing import wait_all_tasks_blocked

    from arena.run.workers import _Worker
    from arena.services.calls import LimitSettings, RunServices

    sent: list[tuple[int, tuple]] = []
    Outbox = partial(Sent, sent)

    services = RunServices(limit_settings={"openai": LimitSettings(calls=1, tpm=10_000)})
    run, one, two = Workers([]), _Worker(1, None, outbox=Outbox(1)), _Worker(2, None, outbox=Outbox(2))
    async with trio.open_nursery() as nursery:
        run._nursery = nursery
        run._slot(one, services, 0, "openai", "http://e", 50)
        await wait_all_tasks_blocked()
        run._slot(two, services, 0, "openai", "http://e", 50)
        await wait_all_tasks_blocked()
        assert sent == [(1, ("granted", 0))]  # calls: 1, whichever worker asks
        run._unslot(two, 0, 50)  # its turn ran out while it waited
        run._unslot(one, 0, 300)  # done: the request used 300 tokens
        run._slot(two, services, 1, "openai", "http://e", 50)
        await wait_all_tasks_blocked()
        assert sent == [(1, ("granted", 0)), (2, ("granted", 1))]
        run._unslot(two, 1, 0)  # no tokens known: the estimate stands
        await wait_all_tasks_blocked()
    assert run._held == {}
    assert [r.tokens for r in services.limits("openai", "http://e")._sent] == [300, 50]


async def test_a_claim_given_up_in_line_leaves_the_turn_with_the_asker_and_a_late_turn_grants_nothing():
    """Workers take turns at asking one request (the run's cache then answers the others). The run's side:
    a worker whose match gave the request up while in line (its turn ran out) leaves the line, and the
    one asking keeps its turn; it used to take the asker's place, which then had two workers asking and
    sent a turn to a claim that no longer was (a KeyError that ended the worker). The worker's side: a
    turn that crossed its claim's release is for nobody, not for a newer claim of the same request."""
    from trio.testing import wait_all_tasks_blocked

    from arena.run.workers import _Claims, _Worker

    sent: list[tuple[int, tuple]] = []
    Outbox = partial(Sent, sent)

    run = Workers([])
    one, two, three = (_Worker(pid, None, outbox=Outbox(pid)) for pid in (1, 2, 3))
    run._claim(one, "d", 7, False)
    run._claim(two, "d", 4, False)
    run._claim(three, "d", 0, False)
    assert sent == [(1, ("turn", ("d", 7, None)))]
    run._release(two, "d")  # given up in line: nobody's turn changes
    assert sent == [(1, ("turn", ("d", 7, None)))]
    run._release(one, "d")  # asked: the next in line asks, or reads the reply one saved
    assert sent[1:] == [(3, ("turn", ("d", 0, None)))]
    run._release(three, "d")
    assert run._claims == {}

    sent.clear()
    claims = _Claims(Outbox(9), None)
    asked: list[str] = []

    async def ask(name: str, cancel: trio.CancelScope | None = None) -> None:
        with cancel or trio.CancelScope():
            async with claims.claim("d"):
                asked.append(name)

    async with trio.open_nursery() as nursery:
        given_up = trio.CancelScope()
        nursery.start_soon(ask, "first", given_up)
        await wait_all_tasks_blocked()
        given_up.cancel()  # its turn ran out in line, while the run was sending it the turn
        await wait_all_tasks_blocked()
        nursery.start_soon(ask, "second")
        await wait_all_tasks_blocked()
        claims.granted("d", 0, None)  # the first claim's turn, arriving late
        await wait_all_tasks_blocked()
        assert asked == []  # the second claim waits for its own
        claims.granted("d", 1, None)
    assert asked == ["second"]
    assert [item for _, item in sent] == [("claim", "d", 0, False), ("release", "d"), ("claim", "d", 1, False),
                                          ("release", "d")]


async def test_the_workers_are_forked_with_no_sqlite_connection_to_the_cache_they_open(tmp_path, monkeypatch):
    """SQLite tells not to let a connection cross a fork: a forked process inherits what SQLite knows
    of the file and its locks, and its own connection to that file would trust locks it does not
    hold. The run closes its cache while it forks, and opens it again after."""
    real_fork, open_then = os.fork, []

    def fork():
        fds = Path("/proc/self/fd")
        open_then.append(sorted(os.readlink(fd) for fd in fds.iterdir() if "responses.sqlite" in _link(fd)))
        return real_fork()

    monkeypatch.setattr(os, "fork", fork)
    with OpenAIMock(responder=lambda body: coins(4)) as mock:
        raw = model_scenario(mock.base_url, 2)
        store = open_store(tmp_path / "run", raw)
        try:
            result = await run_tournament(parse_scenario(raw), store)
            calls = list(store.read.calls())
        finally:
            store.close()
    assert len(open_then) == 2 and open_then == [[], []], open_then
    assert result.count("finished") == 2
    assert Counter(c.cached for c in calls) == {False: 2, True: 2}  # the workers' cache works after the fork


def _link(fd: Path) -> str:
    try:
        return os.readlink(fd)
    except OSError:  # closed since it was listed
        return ""


def test_a_number_of_processes_that_cannot_be_is_refused_before_anything_runs(tmp_path):
    raw = scripted_tournament()
    flag = arena_offline("run", write(tmp_path / "s.yaml", raw), "--processes", 0, "--run-dir", tmp_path / "a", cwd=tmp_path)
    assert flag.returncode == 2 and "--processes: expected at least 1, not 0" in flag.stderr
    raw["concurrency"]["processes"] = 0
    field = arena_offline("run", write(tmp_path / "t.yaml", raw), "--run-dir", tmp_path / "b", cwd=tmp_path)
    assert field.returncode == 2, field.stdout + field.stderr
    assert "t.yaml" in field.stderr and "concurrency.processes" in field.stderr
    assert not (tmp_path / "a").exists() and not (tmp_path / "b").exists()
