"""The dashboard and `arena watch`, as a person following a run sees them; and Ctrl-C, then resuming."""

from __future__ import annotations

import io
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict

import pytest
import trio
import yaml
from rich.console import Console

from arena.agents.openai_backend import STRICT
from arena.cli.dashboard import Dashboard
from arena.results.progress import Snapshot
from arena.run.runner import Observer, run_tournament
from arena.run.scenario import parse_scenario
from arena.run.tournament import plan
from arena.contract import open_run
from arena.contract.events import MatchStarted
from arena.store import RunStore
from arena.store.follower import Follower

from helpers import ROOT, interruptible, mock_tokens, play
from mock_llm import OpenAIMock
from store_kit import journal_mode

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
ERASE_LINE = "\x1b[2K"  # rich's live display erases its previous frame line by line before drawing the next

AGENTS = {
    "giver": {"backend": "scripted", "strategy": "always_all"},
    "taker": {"backend": "scripted", "strategy": "free_rider"},
    "mirror": {"backend": "scripted", "strategy": "tit_for_tat"},
    "dice": {"backend": "scripted", "strategy": "random_contributor"},
}


def scenario_dict(delay: float = 0.0, rounds: int = 5, repeats: int = 2, concurrency: int = 4) -> dict:
    agents = {name: {**raw, "delay": delay} if delay else dict(raw) for name, raw in AGENTS.items()}
    return {
        "name": "dash",
        "seed": 11,
        "agents": agents,
        "games": [{"game": "public_goods", "seats": 3, "params": {"rounds": rounds}}],
        "tournament": {"format": "round_robin", "repeats": repeats},
        "concurrency": concurrency,
    }


def final_frame(output: str) -> str:
    """What stays on the screen once the live display has stopped: its last frame, as plain text."""
    return ANSI.sub("", output.split(ERASE_LINE)[-1])


def expected_means(records) -> dict[str, float]:
    payoffs = defaultdict(list)
    for record in records:
        for seat in record.seats:
            payoffs[seat.agent].append(record.payoffs[seat.label])
    return {agent: sum(v) / len(v) for agent, v in payoffs.items()}


def cli(*args) -> list[str]:
    return [sys.executable, "-m", "arena.cli", *map(str, args)]


def stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


def wait_for(condition, timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)


def finished_in_store(run_dir) -> int:
    if not (run_dir / "run.sqlite").exists():
        return 0
    store = open_run(run_dir)
    try:
        return store.counts().get("finished", 0)
    except Exception:  # the run is still creating its tables
        return 0
    finally:
        store.close()


# -- the dashboard over a run in this process ---------------------------------------------------
async def test_dashboard_shows_progress_latest_messages_and_the_leaderboard():
    scenario = parse_scenario(scenario_dict())
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=140), "t") as view:
        result, records = await play(scenario, None, view)
    n = len(records)
    assert n == 8  # 4 tables of 3 among 4 agents, 2 repeats
    screen = final_frame(buffer.getvalue())
    assert screen.splitlines()[0].strip() == "t"
    assert re.search(rf"matches .*\b{n}/{n}\b.*/s.*done", screen), screen
    # the leaderboard: every agent with its match count and its mean payoff over all finished matches
    assert f"public_goods · {n} matches" in screen
    for agent, mean in expected_means(records).items():
        count = sum(agent in [s.agent for s in r.seats] for r in records)
        assert re.search(rf"^\s*{agent}\s+{count}\s+{mean:.2f}\s*$", screen, re.M), (agent, mean, screen)
    # the latest messages name seats with the agent behind them: known to the watcher, never to the agents
    feed = screen[screen.index("latest messages"):screen.index("public_goods ·")]
    assert re.search(r"Player \d \((giver|taker|mirror|dice)\)\s+→ referee only\s+\{\"reason\"", feed), feed
    assert "Referee" in feed and "Round 5 is over" in feed


async def test_a_wide_screen_shows_long_match_keys_whole():
    # a long entry label makes keys longer than a fifth of the screen; at 160 columns they still fit whole
    raw = scenario_dict(rounds=1, repeats=1)
    raw["games"][0]["label"] = "public-goods-three-seats-one-round-long-label"
    scenario = parse_scenario(raw)
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=160), "t") as view:
        result, records = await play(scenario, None, view)
    keys = [r.key for r in records]
    assert all(len(key) > 50 for key in keys), keys  # a fifth of the screen is 32
    feed = final_frame(buffer.getvalue()).split("latest messages", 1)[1]
    # the latest messages come from whichever matches ended last: each line's key is whole
    shown = re.findall(r"^\s*(\S+)\s+r1\s", feed, re.M)
    assert shown and set(shown) <= set(keys), feed


async def test_dashboard_flags_invalid_replies_and_counts_resumed_matches_as_done(tmp_path):
    raw = {
        "name": "noisy",
        "agents": {"giver": AGENTS["giver"], "noise": {"backend": "scripted", "strategy": "garbage"}},
        "games": [{"game": "public_goods", "params": {"rounds": 1}}],
        "match": {"max_retries": 1},
    }
    scenario = parse_scenario(raw)
    text = yaml.safe_dump(raw)
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, text, scenario.fingerprint())
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=140), "noisy") as view:
        await run_tournament(scenario, store, view)
    screen = final_frame(buffer.getvalue())
    assert re.search(r"r1\s+Player \d \(noise\)\s+.*INVALID \(attempt 2\)", screen), screen
    assert "1/1" in screen
    store.close()  # lets go of the run's lock, as `arena run` does on its way out

    # played again, the run replays nothing: the match counts as done at once, and says so
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, text, scenario.fingerprint())
    buffer = io.StringIO()
    with Dashboard(Console(file=buffer, force_terminal=True, width=140), "noisy") as view:
        await run_tournament(scenario, store, view)
    screen = final_frame(buffer.getvalue())
    assert re.search(r"\b1/1\b.*—/s.*done · 1 done before", screen), screen
    assert re.search(r"^\s*giver\s+1\s+\d+\.\d\d\s*$", screen, re.M), screen
    store.close()


# -- model runs: the runner's view and the watcher's agree ------------------------------------
def model_scenario(url: str, backend: str = "openai", repeats: int = 3, rounds: int = 3, **agent) -> dict:
    return {
        "name": "live",
        "seed": 5,
        "agents": {"giver": AGENTS["giver"], "taker": AGENTS["taker"],
                   "model": {"backend": backend, "model": "mock-model", "base_url": url, "backoff": 0.01, **agent}},
        "games": [{"game": "public_goods", "seats": 3, "params": {"rounds": rounds}}],
        "tournament": {"format": "round_robin", "repeats": repeats},
        "concurrency": 2,
        "prices": {"mock-model": {"input": 1.0, "output": 2.0}},
        "match": {"max_retries": 1},
    }


def figures(snap: Snapshot) -> dict:
    """What a person reads off the screen, rates and ETA aside."""
    return {
        "planned": snap.planned, "done": snap.done, "failed": snap.failed, "calls": snap.calls, "cached": snap.cached,
        "in flight": [(f.match, f.seat, f.round, f.agent) for f in snap.flights],
        "running": [(m.key, m.turn, m.calls) for m in snap.running],
        "agents": {a: (f.calls, f.in_flight, f.prompt_tokens, f.completion_tokens, f.unpriced, f.answered, f.retries,
                       f.errors, f.invalid, f.timeouts, f.cached) for a, f in snap.agents.items()},
        "spend": {a: pytest.approx(f.spend) for a, f in snap.agents.items()},
        "latency": {a: pytest.approx(f.mean_latency) for a, f in snap.agents.items()},
        "calls per match": snap.calls_per_match, "eta from": snap.eta_from, "notes": snap.notes,
    }


def same_window(spans: int, a: float | None, b: float | None, apart: float) -> bool:
    """Two views' rates over the same ``spans``: a rate is its spans over the time since the earliest of
    them began, so the two windows (spans / rate) may differ by as much as the two views' times of one
    fact do (``apart``), and no more."""
    return (a is None) == (b is None) and (a is None or abs(spans / a - spans / b) <= apart + 1e-6)


def to_come(snap: Snapshot) -> float | None:
    """What the ETA divides by its rate: the calls (or matches) still to come."""
    if not snap.eta:
        return snap.eta
    return snap.eta * (snap.call_rate if snap.eta_from == "calls" else snap.match_rate)


class Stamps:
    """The runner dashboard's clock: ``time.time``, remembering the time it gave last."""

    last = 0.0

    def __call__(self) -> float:
        self.last = time.time()
        return self.last


def screen_of(view: Dashboard) -> str:
    console = Console(file=io.StringIO(), width=160, record=True)
    console.print(view.render())
    return console.export_text()


class WatchAlongside(Observer):
    """Passes everything to the runner's dashboard and, each time a match ends (the store has just
    committed it), lets a watcher's dashboard read the store: both views are kept for comparison.

    The runner's dashboard hears of an event as it happens; the store keeps the event's rows until
    its next commit (a round's close after COMMIT_EVERY, a call, a match's end). So when a match is
    reported played, the other matches may have moved on (begun, closed a round) in rows not yet
    committed, which `arena watch` shows a moment later. The views are compared once the store has
    committed all it was told, the same facts on both sides; whether the match reported played was
    already in the store, as the run promises, is noted before that commit.

    The two views time one fact with two readings of the clock: the store's as it writes the row, the
    runner's as the callback comes, a moment later (a commit, or this process waiting for a core, lies
    between). The rates are measured from the starts of matches and the ends of calls: ``apart`` keeps,
    at each comparison, how far the two times of one such fact were apart at most."""

    def __init__(self, runner: Dashboard, watcher: Dashboard, follower: Follower, store: RunStore, stamps: Stamps):
        self.runner, self.watcher, self.follower, self.store, self.stamps = runner, watcher, follower, store, stamps
        self.views: list[tuple[Snapshot, Snapshot]] = []
        self.apart: list[float] = []
        self.stored: list[str | None] = []  # each match's status in the store when it was reported played
        self.timed: dict[tuple, float] = {}  # a match's start or a call's end -> when the runner's dashboard took it
        self.planned, self.call_started, self.note = runner.planned, runner.call_started, runner.note

    def event(self, event):
        self.runner.event(event)
        if isinstance(event, MatchStarted):
            self.timed[(event.match,)] = self.stamps.last

    def call(self, call):
        self.runner.call(call)
        if not call.cached:
            self.timed[(call.match, call.seat, call.round, call.attempt)] = self.stamps.last

    def finished(self, record, resumed):
        found = self.follower.store.match(record.key)
        self.stored.append(found and found.status)
        self.runner.finished(record, resumed)
        self.compare()

    def compare(self) -> None:
        self.store.flush()
        self.watcher.follow(self.follower.poll(), time.time())
        now = time.time()
        self.views.append((self.runner.snapshot(now), self.watcher.snapshot(now)))
        db = self.follower.store.db  # the times the store wrote, which `arena watch` reads
        written = {(key,): at for key, at in db.execute("SELECT match_key, at FROM events WHERE type = 'match_started'")}
        written |= {tuple(row[:4]): row[4] for row in db.execute(
            "SELECT match_key, seat, round, attempt, at FROM calls WHERE cached = 0")}
        self.apart.append(max((abs(at - written[fact]) for fact, at in self.timed.items()), default=0.0))


async def test_the_runner_and_arena_watch_show_the_same_figures_of_a_model_run(tmp_path, noting_backend):
    # the second request fails once (a retry), the third gets a reply the game rejects (an invalid turn)
    with OpenAIMock(["ok", "500", "garbage"]) as mock:
        raw = model_scenario(mock.base_url, backend=noting_backend)
        scenario = parse_scenario(raw)
        store = RunStore.create_or_resume(tmp_path / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        watch_store = open_run(tmp_path / "run")
        specs = {spec.key: spec for spec in plan(scenario)}
        stamps = Stamps()
        runner = Dashboard(Console(file=io.StringIO()), "live", specs=specs.get, clock=stamps)
        watcher = Dashboard(Console(file=io.StringIO(), width=160), "live", specs=watch_store.spec)
        both = WatchAlongside(runner, watcher, Follower(watch_store), store, stamps)
        result, records = await play(scenario, store, both)
        both.compare()  # and once more after the run
        requests, url = mock.answered(), mock.base_url
        store.close()
        watch_store.close()
    assert len(records) == 3 and all(r.status == "finished" for r in records)
    assert len(both.views) == 4
    assert both.stored == ["finished"] * 3  # a match reported played is in the store for any reader
    for (runner_view, watcher_view), apart in zip(both.views, both.apart):
        assert figures(runner_view) == figures(watcher_view)
        # the same rates, over windows as far apart as the two views' times of one fact; and the same
        # ETA: the same calls still to come, over that rate
        rates = (runner_view.call_rate, watcher_view.call_rate, runner_view.match_rate, watcher_view.match_rate, apart)
        assert same_window(runner_view.calls, runner_view.call_rate, watcher_view.call_rate, apart), rates
        assert same_window(runner_view.done, runner_view.match_rate, watcher_view.match_rate, apart), rates
        runner_left, watcher_left = to_come(runner_view), to_come(watcher_view)
        assert (runner_left is None) == (watcher_left is None), (runner_left, watcher_left)
        assert runner_left is None or runner_left == pytest.approx(watcher_left), (runner_left, watcher_left)
    # a view is taken as each match is reported played; matches that ended together share a commit,
    # so a view may already count the next one, which is over but waits for that commit
    dones = [v.done for v, _ in both.views]
    assert dones == sorted(dones) and dones[-2:] == [3, 3] and all(d >= n for n, d in enumerate(dones[:-1], 1))
    assert both.views[0][0].eta_from == "calls" and both.views[0][0].eta > 0

    end = both.views[-1][0]
    model = end.agents["model"]
    # every request the mock answered is a call; the one it refused was retried within its call
    assert mock.count == len(requests) + 1
    assert model.calls == len(requests) and model.retries == 1 and model.errors == 0 and model.invalid == 1
    assert end.in_flight == 0 and model.in_flight == 0 and end.running == []
    prompt = sum(mock_tokens(r.messages) for r in requests)
    completion = sum(mock_tokens(r.reply) for r in requests)
    assert (model.prompt_tokens, model.completion_tokens) == (prompt, completion)
    assert model.spend == pytest.approx((prompt * 1.0 + completion * 2.0) / 1e6)
    assert model.mean_latency > 0
    assert end.calls_per_match == pytest.approx(len(requests) / 3)
    mode = f"mock-model at {url}: output mode json_schema, {STRICT}"
    assert sorted(end.notes) == sorted([f"agent model at {url}: answers in JSON", mode])  # each said once
    assert set(end.agents) == {"model"}  # the scripted players made no calls and no mistakes

    # what the watcher's screen says, to the digit: the same calls, tokens and spend
    screen = screen_of(watcher)
    row = re.search(r"^\s*model\s+(\d+)\s+0\s+([\d,]+)\s+([\d,]+)\s+\$(\d+\.\d{4})\s+\d+\.\d\d s\s+1\s+1\s+0\s+0\s*$",
                    screen, re.M)
    assert row, screen
    assert (int(row[1]), int(row[2].replace(",", "")), int(row[3].replace(",", ""))) == (len(requests), prompt, completion)
    assert row[4] == f"{model.spend:.4f}"
    assert f"note: agent model at {url}: answers in JSON" in screen and "output mode json_schema" in screen
    assert re.search(rf"calls {len(requests)} done · 0 in flight", screen), screen


async def test_the_dashboard_shows_a_model_call_in_flight_and_the_turn_it_belongs_to(tmp_path):
    arrived, release = threading.Event(), threading.Event()
    requests = itertools.count(1)

    def responder(body):
        if next(requests) == 2:  # the model's turn in round 2: held until the test has looked
            arrived.set()
            release.wait(60)
        return {"reason": "half", "coins": 5}

    with OpenAIMock(responder=responder) as mock:
        raw = model_scenario(mock.base_url, repeats=1)
        scenario = parse_scenario(raw)
        run_dir = tmp_path / "run"
        store = RunStore.create_or_resume(run_dir, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        runner = Dashboard(Console(file=io.StringIO(), width=160), "live", specs=store.spec)
        watch_store = open_run(run_dir)
        watcher = Dashboard(Console(file=io.StringIO(), width=160), "live (watching)", specs=watch_store.spec)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_tournament, scenario, store, runner)
            try:
                assert await trio.to_thread.run_sync(arrived.wait, 60), "the model was never asked a second time"
                watcher.follow(Follower(watch_store).poll(), time.time())
                screens = [screen_of(runner), screen_of(watcher)]
            finally:
                release.set()
        store.close()
        watch_store.close()
    for screen in screens:
        # the match, its round out of the rounds it can take, and whom it waits for
        assert re.search(r"public_goods#1:Player=0\+1\+2\s+turn 2 of 3\s+model call: Player \d \(model\) \d+ s",
                         screen), screen
        assert re.search(r"^\s*model\s+1\s+1\s+[\d,]+\s+[\d,]+\s+\$\d+\.\d{4}\s+\d+\.\d\d s\s+0\s+0\s+0\s+0\s*$",
                         screen, re.M), screen
        assert "calls 1 done · 1 in flight" in screen
        assert re.search(r"matches .*\b0/1\b", screen), screen


async def test_a_resumed_runs_dashboard_counts_what_earlier_sessions_spent_as_arena_watch_does(tmp_path):
    with OpenAIMock() as mock:
        raw = model_scenario(mock.base_url, repeats=2)
        scenario = parse_scenario(raw)
        run_dir = tmp_path / "run"
        store = RunStore.create_or_resume(run_dir, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        store.record_session([], None)  # as `arena run` does before it plays
        await run_tournament(scenario, store)
        store.close()
        asked = mock.count
        # the same command again: every match is kept, nothing is asked again
        store = RunStore.create_or_resume(run_dir, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
        store.record_session([], None)
        runner = Dashboard(Console(file=io.StringIO(), width=160), "live", specs=store.spec)
        runner.catch_up(run_dir)
        await run_tournament(scenario, store, runner)
        store.close()
        assert mock.count == asked == 2 * 3  # two matches of three rounds, the model asked once a round
    watch_store = open_run(run_dir)
    watcher = Dashboard(Console(file=io.StringIO(), width=160), "live", specs=watch_store.spec)
    watcher.session(watch_store.sessions()[-1]["started"])  # as `arena watch` does: the latest session's notes
    watcher.follow(Follower(watch_store).poll(), time.time())
    watch_store.close()
    now = time.time()
    assert figures(runner.snapshot(now)) == figures(watcher.snapshot(now))
    snap = runner.snapshot(now)
    assert (snap.done, snap.planned, snap.agents["model"].calls) == (2, 2, asked)
    screen = screen_of(runner)
    assert "public_goods · 2 matches" in screen  # each earlier match counted once on the leaderboard
    assert re.search(r"^\s*model\s+2\s+\d+\.\d\d\s*$", screen, re.M), screen


def an_hour_earlier(run_dir) -> None:
    """As if the run's first session had played an hour ago: every time in the store an hour back, and its notes
    reworded so that a screen that shows one of them can be told."""
    import sqlite3

    db = sqlite3.connect(run_dir / "run.sqlite")
    with db:
        db.execute("UPDATE happened SET at = at - 3600")  # the table behind the events view
        db.execute("UPDATE calls SET at = at - 3600")
        db.execute("UPDATE matches SET started = started - 3600, ended = ended - 3600")
        db.execute("UPDATE notes SET at = at - 3600, text = text || ' (said an hour ago)'")
        db.execute("UPDATE sessions SET started = started - 3600")
    db.close()


async def test_a_resumed_runs_dashboard_shows_this_sessions_clock_and_notes_as_arena_watch_does(tmp_path, noting_backend):
    with OpenAIMock() as mock:
        raw = model_scenario(mock.base_url, backend=noting_backend, repeats=2)
        scenario = parse_scenario(raw)
        run_dir = tmp_path / "run"

        def session(limit=None) -> RunStore:
            store = RunStore.create_or_resume(run_dir, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
            store.record_session([], limit)  # as `arena run` does before it plays
            return store

        url = mock.base_url
        store = session(limit=1)
        await run_tournament(scenario, store, limit=1)
        store.close()
        an_hour_earlier(run_dir)
        store = session()
        runner = Dashboard(Console(file=io.StringIO(), width=160), "live", specs=store.spec)
        runner.catch_up(run_dir)
        with runner:
            await run_tournament(scenario, store, runner)
        store.close()
    watch_store = open_run(run_dir)
    watcher = Dashboard(Console(file=io.StringIO(), width=160), "live", specs=watch_store.spec)
    watcher.session(watch_store.sessions()[-1]["started"])
    watcher.follow(Follower(watch_store).poll(), time.time())
    watch_store.close()
    now = time.time()
    snap = runner.snapshot(now)
    assert (snap.done, snap.planned) == (2, 2)
    assert snap.elapsed < 600, snap.elapsed  # this session's clock, not the hour since the first began
    screen = screen_of(runner)
    assert re.search(r"matches .*\b2/2\b.* 0:0\d:\d\d +done", screen), screen
    assert "said an hour ago" not in screen
    assert screen.count(f"note: agent model at {url}: answers in JSON") == 1, screen  # said again, now
    assert figures(runner.snapshot(now)) == figures(watcher.snapshot(now))
    assert watcher.snapshot(now).elapsed < 600


# -- arena watch: following a run another process plays ----------------------------------------
def test_watch_follows_a_run_in_another_process_and_ends_with_its_results(tmp_path):
    # The model's first request is held until the watcher has shown it in flight: the watcher
    # really follows the run, however loaded the machine (the run cannot end before it looked).
    shown = threading.Event()
    requests = itertools.count(1)

    def responder(body):
        if next(requests) == 1:
            shown.wait(120)
        return {"reason": "a few", "coins": 3}

    watch_lines: list[str] = []

    def read(stream) -> None:
        for line in stream:
            watch_lines.append(line.rstrip("\n"))
            if "is asked: model call in flight" in line:
                shown.set()

    with OpenAIMock(responder=responder) as mock:
        raw = scenario_dict(rounds=3, concurrency=2)
        del raw["agents"]["dice"]
        raw["agents"]["model"] = {"backend": "openai", "model": "mock-model", "base_url": mock.base_url, "timeout": 600}
        raw["match"] = {"turn_timeout": 600}
        scenario_file = tmp_path / "dash.yaml"
        scenario_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
        run_dir = tmp_path / "run"
        run_log = tmp_path / "run.out"
        with open(run_log, "w") as run_out:
            run = subprocess.Popen(cli("run", scenario_file, "--run-dir", run_dir, "--plain"), cwd=tmp_path,
                                   stdout=run_out, stderr=subprocess.STDOUT)
            watch = reader = None
            try:
                wait_for(lambda: (run_dir / "run.sqlite").exists() or run.poll() is not None, 60,
                         "the run to create its store")
                watch = subprocess.Popen(cli("watch", run_dir, "--interval", "0.1"), cwd=tmp_path,
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                reader = threading.Thread(target=read, args=(watch.stdout,), daemon=True)
                reader.start()
                assert shown.wait(120), "\n".join(watch_lines) + run_log.read_text()
                assert watch.wait(timeout=120) == 0, watch.stderr.read()
                assert run.wait(timeout=60) == 0, run_log.read_text()
                reader.join(timeout=30)
            finally:
                shown.set()
                stop(run)
                if watch is not None:
                    stop(watch)
                    watch.stdout.close()
                    watch.stderr.close()
    lines = watch_lines
    text = "\n".join(lines) + "\n"
    agents = ("giver", "taker", "mirror", "model")

    # it says what it is watching, shows the call it waits for, then one line per message, seat labels beside agent names
    head = re.fullmatch(rf"Watching dash in {re.escape(str(run_dir))}: (\d+) of 8 matches done so far\.", lines[0])
    assert head, lines[0]
    already = int(head.group(1))
    assert already < 8  # it really did follow the run
    assert any(re.fullmatch(r"\[public_goods#\d:Player=[0-9+]+\] r1 Player \d \(model\) is asked: model call in flight", l)
               for l in lines), lines[:5]
    said = [l for l in lines if re.match(r"\[public_goods#\d:Player=[0-9+]+\] r\d+ ", l)]
    assert any(re.match(r"\[public_goods#\d:Player=[0-9+]+\] r\d+ Player \d \((giver|taker|mirror|model)\) -> referee only: \{", l)
               for l in said), said[:5]
    assert any(re.match(r"\[public_goods#\d:Player=[0-9+]+\] r\d+ Referee -> Player \d: Round \d+ is over", l) for l in said)

    # one line per match finished while it watched, with each seat's agent and payoff; then, for a match
    # the model played, its calls: one a round, with the tokens the mock counted
    ended = [i for i, l in enumerate(lines) if re.match(r"\[public_goods#\d:Player=[0-9+]+\] finished: ", l)]
    keys = [lines[i][1:lines[i].index("]")] for i in ended]
    assert len(keys) == len(set(keys)) == 8 - already
    assert all(re.search(r"finished: Player 1 \(\w+\)=[\d.]+, Player 2 \(\w+\)=[\d.]+, Player 3 \(\w+\)=[\d.]+$", lines[i])
               for i in ended), ended
    for i, key in zip(ended, keys):
        if "(model)" in lines[i]:
            assert re.fullmatch(rf"\[{re.escape(key)}\] calls: 3, tokens [\d,]+ in / [\d,]+ out, cost unknown, "
                                rf"mean latency \d+\.\d\d s",
                                lines[i + 1]), lines[i:i + 2]
        else:
            assert i + 1 == len(lines) or " calls: " not in lines[i + 1]
    # the run's own log says the same of every match the model played
    run_calls = re.findall(r"^\[(public_goods#\d:Player=[0-9+]+)\] calls: 3, tokens ", run_log.read_text(), re.M)
    model = str(list(yaml.safe_load(scenario_file.read_text())["agents"]).index("model"))  # its place in the keys
    assert len(run_calls) == 6 and all(model in k.split("=")[1].split("+") for k in run_calls)

    # then the run's status and its results table: the same as `arena rank` prints
    status = next(i for i, l in enumerate(lines) if l.startswith("Run dash in "))
    assert lines[status] == f"Run dash in {run_dir}: finished — 8 finished, 0 failed, of 8 planned."
    results = "\n".join(lines[status + 1:]) + "\n"
    for agent in agents:
        assert re.search(rf"│ {agent}\s+│\s+6 │", results), results
    rank = subprocess.run(cli("rank", run_dir), cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert rank.returncode == 0
    assert results == rank.stdout
    assert text.endswith(rank.stdout)
    # the run and its watcher gone, the store is one file again, whichever of them closed last
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("run.sqlite")) == ["run.sqlite"]


def test_watching_a_finished_run_prints_its_status_and_results(run_cli, tmp_path):
    scenario_file = tmp_path / "dash.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario_dict()), encoding="utf-8")
    run_dir = tmp_path / "run"
    assert run_cli("run", scenario_file, "--run-dir", run_dir, "--quiet").returncode == 0
    watched = run_cli("watch", run_dir)
    assert watched.returncode == 0, watched.stderr
    first, rest = watched.stdout.split("\n", 1)
    assert first == f"Run dash in {run_dir}: finished — 8 finished, 0 failed, of 8 planned."
    assert rest == run_cli("rank", run_dir).stdout


def test_watch_attached_when_a_run_ends_leaves_the_store_a_single_file(run_cli, tmp_path):
    scenario_file = tmp_path / "dash.yaml"
    raw = scenario_dict(rounds=2, repeats=1)
    scenario_file.write_text(yaml.safe_dump(raw), encoding="utf-8")
    run_dir = tmp_path / "run"
    assert run_cli("run", scenario_file, "--run-dir", run_dir, "--quiet").returncode == 0
    ranked = run_cli("rank", run_dir).stdout
    # the run played again (nothing left to play) while a watcher reads it: the watcher's connection keeps
    # the writer from leaving WAL mode as it closes, and a read-only connection cannot do it either
    scenario = parse_scenario(raw)
    writer = RunStore.create_or_resume(run_dir, scenario.name, scenario_file.read_text(), scenario.fingerprint())
    watcher = open_run(run_dir)
    assert watcher.counts()["finished"] == 4
    writer.set_status("finished")  # nothing was left to play
    writer.close()
    watcher.close()
    assert (run_dir / "run.sqlite-wal").exists(), "the situation a watcher attached at the end leaves"

    watched = run_cli("watch", run_dir)
    assert watched.returncode == 0, watched.stderr
    assert watched.stdout.startswith(f"Run dash in {run_dir}: finished — 4 finished")
    assert sorted(p.name for p in run_dir.iterdir() if p.name.startswith("run.sqlite")) == ["run.sqlite"]
    assert journal_mode(run_dir / "run.sqlite") == "rollback"
    assert run_cli("rank", run_dir).stdout == ranked


# -- Ctrl-C, then the same command again ------------------------------------------------------
def test_ctrl_c_keeps_finished_matches_and_the_same_command_resumes_to_the_same_results(run_cli, tmp_path):
    scenario_file = tmp_path / "dash.yaml"
    scenario_file.write_text(yaml.safe_dump(scenario_dict(delay=0.05, rounds=10, concurrency=2)), encoding="utf-8")
    runs = tmp_path / "runs"
    run_dir = runs / "dash"
    log = tmp_path / "first.out"
    with open(log, "w") as out:
        proc = subprocess.Popen(cli("run", scenario_file, "--run-dir", run_dir, "--plain"), cwd=ROOT,
                                stdout=out, stderr=subprocess.STDOUT, preexec_fn=interruptible)
        try:
            wait_for(lambda: finished_in_store(run_dir) >= 1, 60, "a first finished match")
            proc.send_signal(signal.SIGINT)  # the run is under way: 7 matches of 0.5 s each are still to come
            assert proc.wait(timeout=30) == 130
        finally:
            stop(proc)
    first = log.read_text(encoding="utf-8")
    assert f"Interrupted. Finished matches are kept in {run_dir}; run the same command to resume." in first
    kept = finished_in_store(run_dir)
    assert 1 <= kept < 8

    listed = run_cli("runs", runs, env={**os.environ, "COLUMNS": "250"})
    assert listed.returncode == 0
    row = next(l for l in listed.stdout.splitlines() if str(run_dir) in l)
    assert re.search(rf"│ dash\s+│ interrupted\s+│ {kept}\s+│ 0\s+│ 8\s+│", row), row

    resumed = run_cli("run", scenario_file, "--run-dir", run_dir, "--plain")
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"Resuming the run in {run_dir}: {kept} finished matches are kept." in resumed.stdout
    assert f"8 of 8 matches finished, {kept} from the earlier run." in " ".join(resumed.stdout.split())

    fresh_dir = tmp_path / "fresh"
    assert run_cli("run", scenario_file, "--run-dir", fresh_dir, "--quiet").returncode == 0

    def exported(d):
        out = run_cli("export", d, "--format", "jsonl")
        assert out.returncode == 0
        return sorted((json.loads(line) for line in out.stdout.splitlines()), key=lambda r: r["key"])

    after_resume, uninterrupted = exported(run_dir), exported(fresh_dir)
    assert len(after_resume) == 8 and all(r["status"] == "finished" for r in after_resume)
    assert after_resume == uninterrupted
