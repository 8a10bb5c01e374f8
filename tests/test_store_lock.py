"""One writer per run, said at once: `arena run` holds run.lock (an flock naming its pid and host) from
before it touches the store until it exits, however it exits; a second `arena run` on the folder is
refused at once with the holder's name, while readers follow the run; a lock left by a writer that
died is taken over, saying so."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
from contextlib import contextmanager

import pytest

from arena.store.lock import LOCK_FILE, RunLock
from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import interruptible
from mock_llm import OpenAIMock
from store_kit import TINY, cli, one_line, write_scenario



def arena(*args, cwd, wait: bool = True):
    command = [sys.executable, "-m", "arena.cli", *map(str, args)]
    env = {**os.environ, "COLUMNS": "250"}
    if wait:
        return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=300, env=env)
    return subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=interruptible)


def with_model(url: str, **top) -> dict:
    return {**TINY, "agents": {"model": {"backend": "openai", "model": "mock-model", "base_url": url, "backoff": 0.01},
                               "keep": TINY["agents"]["keep"]}, "match": {"turn_timeout": 600}, **top}


@contextmanager
def held_model():
    """A mock model server whose every call waits until the test lets it go: (mock, asked, release).
    ``asked`` is set at the first call; leaving the block lets every call go."""
    asked, release = threading.Event(), threading.Event()

    def held(body):
        asked.set()
        release.wait(300)
        return {"reason": "held", "coins": 4}

    with OpenAIMock(responder=held) as mock:
        try:
            yield mock, asked, release
        finally:
            release.set()


def lock_is_free(run_dir) -> bool:
    lock = RunLock.acquire(run_dir)
    try:
        return lock.previous is None  # and nobody died holding it: the last holder let go
    finally:
        lock.release()


def test_a_second_run_is_refused_at_once_naming_the_first_while_readers_follow_the_run(tmp_path, capsys):
    with held_model() as (mock, asked, release):  # every model call waits until the test lets the run go on
        scenario = write_scenario(tmp_path, with_model(mock.base_url, tournament={"repeats": 1}))
        run_dir = tmp_path / "run"
        first = arena("run", scenario, "--plain", "--run-dir", run_dir, cwd=tmp_path, wait=False)
        watcher = None
        try:
            assert asked.wait(300), "the first run reaches its first model call"
            second = arena("run", scenario, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
            said = one_line(second.stderr)
            assert second.returncode == 2, second.stdout + second.stderr
            assert f"is being played by another `arena run` (pid {first.pid} on host {socket.gethostname()}" in said
            assert "arena watch" in said and "Traceback" not in said
            assert first.poll() is None, "refused while the first still holds the run: it did not wait for it"

            # the readers work while the run is being written, and see it as it is
            code, out, err = cli(capsys, "show", run_dir)
            assert code == 0 and "running" in out, err
            code, out, err = cli(capsys, "rank", run_dir, "--json")
            assert code == 0 and json.loads(out)["run"]["status"] == "running", err
            code, out, err = cli(capsys, "runs", tmp_path)
            assert code == 0 and "running" in out, err
            code, out, err = cli(capsys, "export", run_dir)
            [playing] = [json.loads(line) for line in out.splitlines()]
            assert code == 0 and playing["messages"] and not playing["payoffs"], "the match so far, not scored yet"
            watcher = arena("watch", run_dir, "--plain", "--interval", "0.1", cwd=tmp_path, wait=False)
        finally:
            release.set()
            out, err = first.communicate(timeout=300)
        assert first.returncode == 0, out + err
        assert "1 of 1 matches finished" in one_line(out)
        watched, err = watcher.communicate(timeout=300)
    assert watcher.returncode == 0, err
    assert "finished — 1 finished, 0 failed, of 1 planned" in one_line(watched)
    assert lock_is_free(run_dir) and (run_dir / LOCK_FILE).read_text() == ""


def test_ctrl_c_lets_go_of_the_run_so_the_next_run_resumes_without_a_takeover(tmp_path, capsys):
    with held_model() as (mock, asked, release):
        scenario = write_scenario(tmp_path, with_model(mock.base_url, tournament={"repeats": 1}))
        run_dir = tmp_path / "run"
        first = arena("run", scenario, "--quiet", "--run-dir", run_dir, cwd=tmp_path, wait=False)
        try:
            assert asked.wait(300)
            assert json.loads((run_dir / LOCK_FILE).read_text())["pid"] == first.pid
            first.send_signal(signal.SIGINT)
            out, err = first.communicate(timeout=300)
        finally:
            release.set()
        assert first.returncode == 130, out + err
        assert (run_dir / LOCK_FILE).read_text() == "", "let go on the way out: the file names nobody"
        code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
    assert code == 0, err
    assert "takes over" not in out and "1 of 1 matches finished" in one_line(out)


def test_a_lock_left_by_a_writer_that_died_is_taken_over_with_a_note(tmp_path, capsys):
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    pid = int(gone.stdout)  # a process that has ended: its pid names nobody now
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    (run_dir / LOCK_FILE).write_text(json.dumps({"pid": pid, "host": socket.gethostname(), "started": 1.7e9}))
    code, out, err = cli(capsys, "run", write_scenario(tmp_path), "--quiet", "--run-dir", run_dir)
    assert code == 0, err
    said = one_line(out)
    assert f"the `arena run` that last played {run_dir} (pid {pid} on host {socket.gethostname()}, since" in said
    assert "ended without letting go of it; this run takes over" in said and "2 of 2 matches finished" in said
    assert lock_is_free(run_dir)


def test_a_lock_held_in_this_process_refuses_a_writer_too(tmp_path, capsys):
    """flock locks belong to an open file, not to a process: a second store opened here is refused as well."""
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    holder = RunLock.acquire(run_dir)
    try:
        code, _, err = cli(capsys, "run", write_scenario(tmp_path), "--quiet", "--run-dir", run_dir)
        assert code == 2 and f"(pid {os.getpid()} on host" in one_line(err)
        assert not (run_dir / "run.sqlite").exists(), "refused before the store was touched"
    finally:
        holder.release()


@contextmanager
def _interrupted(monkeypatch):
    import arena.run.runner

    async def ctrl_c(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(arena.run.runner, "run_tournament", ctrl_c)
    yield TINY, 130


@contextmanager
def _outage(monkeypatch):
    with OpenAIMock() as mock:
        url = mock.base_url  # a server that was there and is gone: every call is refused
    yield {**with_model(url), "match": {"outage_wait": 0}}, 4


@contextmanager
def _budget(monkeypatch):
    with OpenAIMock() as mock:
        yield {**with_model(mock.base_url, concurrency=1), "budget": {"tokens": 1}}, 3


@contextmanager
def _missing_key(monkeypatch):
    monkeypatch.delenv("ARENA_TEST_NO_SUCH_KEY", raising=False)
    model = {"backend": "openai", "model": "gpt-4o-mini", "api_key_env": "ARENA_TEST_NO_SUCH_KEY"}
    yield {**TINY, "agents": {"model": model, "keep": TINY["agents"]["keep"]}}, 2


@pytest.mark.parametrize("ending", [_interrupted, _outage, _budget, _missing_key],
                         ids=["ctrl-c", "outage", "budget", "missing key"])
def test_the_lock_is_let_go_however_the_run_ends(tmp_path, capsys, monkeypatch, ending):
    with ending(monkeypatch) as (raw, status):
        code, out, err = cli(capsys, "run", write_scenario(tmp_path, raw), "--quiet", "--run-dir", tmp_path / "run")
    assert code == status, out + err
    assert (tmp_path / "run" / "run.sqlite").exists(), "the store was made before the run ended"
    assert lock_is_free(tmp_path / "run"), "the lock file names nobody and can be taken"


def test_a_run_killed_during_a_model_call_records_the_call_and_shows_its_match_interrupted(tmp_path, capsys):
    """`kill -9` while a model call is in flight: the call was sent (a provider bills what it answers),
    so the next writer records it, tokens unknown, and no in-flight row is left; meanwhile the
    readers show the match as interrupted, not running; the resumed run finishes it."""
    from arena.contract import open_run
    from arena.store import RunStore
    from arena.store.writer import IN_FLIGHT_AT_DEATH

    with held_model() as (mock, asked, release):  # the first call waits; the run is killed meanwhile
        scenario = write_scenario(tmp_path, with_model(mock.base_url, tournament={"repeats": 1}))
        run_dir = tmp_path / "run"
        first = arena("run", scenario, "--plain", "--run-dir", run_dir, cwd=tmp_path, wait=False)
        try:
            assert asked.wait(300), "the run reaches its first model call"
            first.kill()
            first.communicate(timeout=300)
        finally:
            release.set()
        store = open_run(run_dir)
        try:
            assert store.status() == "stopped (resumable)" and len(store.calls_in_flight()) == 1
        finally:
            store.close()
        code, out, err = cli(capsys, "show", run_dir, "--json")
        assert code == 0, err
        assert [m["status"] for m in json.loads(out)["matches"]] == ["interrupted"]

        code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
        assert code == 0 and "1 of 1 matches finished" in one_line(out), err
        store = open_run(run_dir)
        try:
            calls = list(store.calls())
            assert not store.calls_in_flight()
            assert len(calls) == mock.count  # every request the server saw is a call of the run
            dead = [c for c in calls if c.error == IN_FLIGHT_AT_DEATH]
            assert len(dead) == 1 and dead[0].prompt_tokens is None and dead[0].agent == "model"
            assert dead[0].round == 1 and dead[0].match == calls[-1].match
        finally:
            store.close()
