"""What a run holds for all its Ray workers, and the faults a cluster adds: the driver killed with
``kill -9`` and run again, the limits and the budget held by the run's process for every actor, the
response cache read and filled over the workers' sockets, and a worker killed or gone silent (its
process frozen, as a lost node's is) whose matches are played again elsewhere, each stored once.

One local Ray instance (127.0.0.1, no dashboard, 2 CPUs) serves the module; the driver-kill test's
own run starts its own instance, as `arena run` does with no cluster around. Nothing leaves
127.0.0.1."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
import trio
import yaml

from arena.run.runner import Observer, run_tournament
from arena.run.scenario import Execution, parse_scenario
from arena.run.tournament import count
from arena.store import RunStore

from conformance_kit import LOCAL, local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import coins
from mock_llm import OpenAIMock
from test_chaos import LAUNCH, W, finished
from test_ray_executor import cli, cluster, exported, model_scenario, needs_ray, no_workers_left, public_goods, ray, write  # noqa: F401

pytestmark = needs_ray


# -- the driver killed with kill -9, then run again ------------------------------------------------


def _marked(marker: str) -> dict[int, str]:
    """The processes whose environment holds ``marker`` (a run's and every Ray process it started, which
    inherit it), by id, with their command line."""
    found = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                if marker.encode() in (entry / "environ").read_bytes().split(b"\0"):
                    found[int(entry.name)] = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                pass  # gone meanwhile, or not ours to read
    return found


# Ray's two helper processes of a node (its dashboard and runtime-env agents) see their raylet die at
# once, then spend a fixed minute trying to tell the dead cluster before they exit (Ray's own
# publish_error timeout); they hold no worker, no match and no CPU meanwhile.
RAY_AGENTS = ("ray::DashboardAgent", "ray::RuntimeEnvAgent")


def test_the_driver_killed_under_ray_leaves_no_worker_behind_and_resumes_to_the_same_export(tmp_path, capsys, cluster):
    raw = public_goods()
    path = write(tmp_path / "s.yaml", raw)
    assert cli("run", path, "--quiet", "--run-dir", tmp_path / "local") == 0
    expected = exported(tmp_path / "local", capsys)
    total = len(expected[0].splitlines())

    tag = f"{os.getpid()}-{time.monotonic_ns()}"  # marks the run's processes, and the Ray processes it starts
    env = {**os.environ, "NO_PROXY": LOCAL, "no_proxy": LOCAL, "ARENA_TEST_RUN": tag}
    env.pop("RAY_ADDRESS", None)  # `arena run` with no address starts its own local instance
    marker = f"ARENA_TEST_RUN={tag}"
    crashed = tmp_path / "crashed"
    killed = subprocess.run([sys.executable, str(LAUNCH), W + "finish", "6", "after", "--", "run", str(path), "--quiet",
                             "--executor", "ray", "--workers", "2", "--run-dir", str(crashed)],
                            capture_output=True, text=True, timeout=300, env=env)
    assert killed.returncode == -9, killed.stderr  # killed where aimed: six matches played, the others under way
    assert finished(crashed) < total  # (the last few stored were not yet committed)
    gone_at = time.monotonic()

    deadline = time.monotonic() + 60
    while any(not line.startswith(RAY_AGENTS) for line in _marked(marker).values()) and time.monotonic() < deadline:
        time.sleep(0.1)
    left = _marked(marker)
    assert all(line.startswith(RAY_AGENTS) for line in left.values()), f"outlived the killed driver: {left}"
    print(f"the killed run's workers and Ray instance were gone {time.monotonic() - gone_at:.1f} s after it")
    for pid in left:  # not wait a minute for Ray's agents: this test's own processes, by id
        os.kill(pid, signal.SIGKILL)

    assert cli("run", path, "--quiet", "--executor", "ray", "--workers", 2, "--run-dir", crashed) == 0
    assert exported(crashed, capsys) == expected  # each match once, unchanged
    assert no_workers_left()


# -- the limits and the budget, held for every actor by the run's process ------------------------------


async def _run(tmp_path: Path, name: str, raw: dict, ray_run: bool, **options):
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / name, scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
    try:
        execution = Execution(executor="ray", workers=2) if ray_run else None
        result = await run_tournament(scenario, store, execution=execution, **options)
        return result, list(store.read.calls())
    finally:
        store.close()


@pytest.mark.parametrize("limit, per_window", [({"rpm": 2}, 2), ({"tpm": 1}, 1)], ids=["rpm", "tpm"])
async def test_requests_and_tokens_per_minute_hold_across_ray_workers(tmp_path, monkeypatch, cluster, limit, per_window):
    """The per-minute window is the run's (its process holds the limits for every actor), shortened here
    to a second so that a test sees several. rpm: 2 lets two requests of the whole run into a window;
    tpm: 1 one (a request larger than the whole budget goes alone). Two actors with a limit each would
    send all four requests at once."""
    window = 1.0
    monkeypatch.setattr("arena.services.ratelimit.WINDOW", window)
    arrived: list[float] = []
    lock = threading.Lock()

    def answer(body):
        with lock:
            arrived.append(time.monotonic())
        return coins(4)

    with OpenAIMock(responder=answer) as mock:
        raw = model_scenario(mock.base_url) | {"limits": {"openai": limit}}
        result, calls = await _run(tmp_path, "ray", raw, True, use_cache=False)
    assert result.count("finished") == 2 and len(calls) == len(arrived) == 4
    # the (per_window + 1)-th request after any one waits for that one's window to pass (less the first
    # one's trip to the server, which a loaded machine can stretch: all at once, were the limit per actor)
    gaps = [later - first for first, later in zip(arrived, arrived[per_window:])]
    assert min(gaps) >= window / 2, f"requests reached the server {gaps} s apart under {limit} a {window} s window"


async def test_the_budget_counts_every_ray_worker_s_calls(tmp_path, cluster):
    """A budget of one token is spent by the first two matches' calls (both actors', started at once):
    no further match starts, as in a run played by one process."""
    seen = {}
    for ray_run in (False, True):
        with OpenAIMock(responder=lambda body: coins(4)) as mock:
            raw = model_scenario(mock.base_url) | {"budget": {"tokens": 1}}
            raw["tournament"]["repeats"] = 6
            result, calls = await _run(tmp_path, str(ray_run), raw, ray_run, use_cache=False)
            seen[ray_run] = (result.count("finished"), len(result.not_started), result.budget_note.split(" (")[0],
                             len(calls), mock.count)  # (what was spent when it was seen depends on timing)
    assert seen[True] == seen[False]
    assert seen[True][:2] == (2, 4) and seen[True][3:] == (4, 4)  # two matches of two requests each, then none
    assert seen[True][2] == "the budget of 1 tokens is used"


# -- the response cache, shared with actors that cannot open its file -----------------------------


async def test_ray_workers_on_another_node_share_the_run_s_cache_over_their_socket(tmp_path, monkeypatch, capsys, cluster):
    """On one machine every actor could open the cache file; the run is told its node is another one, so
    each actor takes the path of a worker on another machine: saved replies come from the run with its
    turn at a request, new ones go to the run to be saved. The run's own process does every read and
    write of the file, and a rerun asks the server nothing."""
    from arena.services.cache import ResponseCache

    monkeypatch.setattr("arena.run.ray_workers._this_node", lambda ray: "the run's node")
    saved, found = [], []
    put, get = ResponseCache.put, ResponseCache.get

    def counted_put(self, key, reply):
        saved.append(key)
        put(self, key, reply)

    def counted_get(self, key):
        reply = get(self, key)
        if reply is not None:
            found.append(key)
        return reply

    monkeypatch.setattr(ResponseCache, "put", counted_put)  # in the run's process only: the actors' code is their own
    monkeypatch.setattr(ResponseCache, "get", counted_get)
    with OpenAIMock(responder=lambda body: coins(4)) as mock:
        raw = model_scenario(mock.base_url) | {"cache": str(tmp_path / "responses.sqlite")}
        first, asked = await _run(tmp_path, "first", raw, True)
        paid = mock.count  # the two matches' seats ask the same two requests: each asked once, by either actor
        assert len(asked) == 4 and paid == sum(not call.cached for call in asked) == 2
        assert len(saved) == len(set(saved)) == paid  # each reply sent back and saved by the run, once
        found.clear()
        again, answered = await _run(tmp_path, "again", raw, True)
        assert mock.count == paid  # the rerun on the cluster asked nothing
    assert again.count("finished") == 2 and len(answered) == 4 and all(call.cached for call in answered)
    assert sorted(found) == sorted(saved * 2)  # each seat's reply read by the run and sent with the actor's turn
    assert exported(tmp_path / "again", capsys) == exported(tmp_path / "first", capsys)


# -- a worker lost mid-run: killed, or gone silent ------------------------------------------------------


class StrikesAWorker(Observer):
    """At the first thing a match says, sends one of the run's actors a signal. SIGKILL ends it as the
    system or a lost node would: no clean-up, nothing said. SIGSTOP freezes it: its socket stays open and
    the system still answers for it, as for a process stuck or a node cut off without a word; only its
    silence tells. Counts every match's starts."""

    def __init__(self, signal_: signal.Signals):
        self.signal = signal_
        self.starts: Counter[str] = Counter()
        self.earlier = set(ray.util.list_named_actors())  # another run's actors, if the cluster has not forgotten them yet
        self.victim: int | None = None
        self.struck = False
        self.notes: list[str] = []

    def planned(self, total: int) -> None:  # the actors are ready and no match has started: ask one its process
        if self.victim is None:
            names = sorted(n for n in set(ray.util.list_named_actors()) - self.earlier if n.startswith("arena-worker"))
            self.victim = ray.get(ray.get_actor(names[0]).pid.remote())

    def event(self, event) -> None:
        if event.type == "match_started":
            self.starts[event.match] += 1
        if not self.struck:
            os.kill(self.victim, self.signal)
            self.struck = True

    def note(self, text: str) -> None:
        self.notes.append(text)


@pytest.mark.parametrize("signal_, lost_after, how", [
    (signal.SIGKILL, None, "ended mid-run"),  # its socket closes: known at once
    (signal.SIGSTOP, 2, "went silent mid-run (nothing for 2 s: its node lost, or its process frozen)"),
], ids=["killed", "frozen"])
async def test_a_worker_lost_mid_run_has_its_matches_played_again_and_nothing_stored_twice(tmp_path, capsys, cluster,
                                                                                            signal_, lost_after, how):
    raw = public_goods()
    for agent in raw["agents"].values():  # a match takes a few turns of 20 ms: the worker is struck in the middle
        agent["delay"] = 0.02
    path = write(tmp_path / "s.yaml", raw)
    assert await trio.to_thread.run_sync(cli, "run", path, "--quiet", "--run-dir", tmp_path / "local") == 0
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "ray", scenario.name, path.read_text(), scenario.fingerprint())
    striker = StrikesAWorker(signal_)
    execution = Execution(executor="ray", workers=2, **({"lost_after": lost_after} if lost_after else {}))
    try:
        result = await run_tournament(scenario, store, striker, execution=execution)
    finally:
        store.close()
    assert result.count("finished") == count(scenario) == 30
    said = [n for n in striker.notes if n.startswith(f"worker process {striker.victim} {how}: its ")]
    lost = re.search(r"its (\d+) unfinished matches are played again by the 1 other worker\(s\)$", said[0]) if said else None
    assert len(said) == 1 and lost, striker.notes
    assert 1 <= int(lost[1]) <= 4  # it had its half of the 8 matches at once, none finished
    assert max(striker.starts.values()) <= 2  # a match it had begun started once more, on the other worker
    assert exported(tmp_path / "ray", capsys) == exported(tmp_path / "local", capsys)  # each match once, unchanged
    deadline = time.monotonic() + 30
    while _alive(striker.victim) and time.monotonic() < deadline:  # a frozen one, the run had Ray end: it never plays on
        await trio.sleep(0.05)
    assert not _alive(striker.victim)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] if Path(f"/proc/{pid}/stat").exists() else "X"
    return state not in ("Z", "X")  # a zombie has ended


def test_how_long_a_worker_may_be_silent_is_a_ray_setting(tmp_path, capsys):
    from arena.contract.errors import ConfigError

    base = {"name": "x", "agents": {"a": {"backend": "scripted", "strategy": "free_rider"},
                                    "b": {"backend": "scripted", "strategy": "free_rider"}},
            "games": [{"game": "public_goods"}]}
    ray_ = {"execution": {"executor": "ray", "lost_after": 5}}
    assert parse_scenario(base | ray_).execution_settings() == Execution(executor="ray", lost_after=5)
    assert Execution(executor="ray").lost_after == 40
    with pytest.raises(ConfigError) as caught:
        parse_scenario(base | {"execution": {"executor": "processes", "lost_after": 5}})
    assert "lost_after is how long a Ray worker may be silent, for executor: ray, not processes" in str(caught.value)
    # the command line's --workers over a processes block leaves lost_after unsaid, and so allowed
    path = write(tmp_path / "s.yaml", base | {"execution": {"executor": "processes", "workers": 2}})
    assert cli("run", path, "--quiet", "--workers", 1, "--run-dir", tmp_path / "run") == 0
    assert capsys.readouterr().err == ""
