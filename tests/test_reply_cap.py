"""Bounded replies: a server that ignores max_tokens and sends megabytes is read only up to what a
reply within ``max_reply_chars`` can take; the reply is cut there, recorded as cut with the size that
had come, and the game asks again with the reason, then defaults. Nothing longer than the cap is kept.

The servers are the local mocks of tests/mock_llm.py; nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from arena.agents.llm import ENVELOPE_BYTES, REPLY_CEILING, body_limit
from arena.contract import ConfigError
from arena.contract.events import ActionTaken, TurnFailed
from arena.run.runner import KeepRecords, run_tournament
from arena.run.scenario import parse_scenario
from arena.contract import open_run
from arena.store import RunStore

from conformance_kit import LOCAL, local_only  # noqa: F401  (local_only: an autouse fixture, no real key or proxy)
from mock_llm import AnthropicMock, OpenAIMock

CUT = "Your reply was cut off unread: it ran past 1,600 characters, the most a reply may have."
FLOOD_WORDS = "I weigh what the others gave"  # the mock's flooded reason begins with these


def model(mock, backend: str, **extra) -> dict:
    # max_tokens 100: the cap is 1,600 characters, the body read at most 84,736 bytes
    return {"backend": backend, "base_url": mock.base_url, "model": "mock-model", "max_tokens": 100,
            "backoff": 0.01, "timeout": 20, "retries": 2, **extra}


def scenario(agents: dict, repeats: int = 1, rounds: int = 1) -> dict:
    return {"name": "flood", "seed": 11, "agents": {**agents, "carol": {"backend": "scripted", "strategy": "tit_for_tat"}},
            "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": 1}}],
            "tournament": {"repeats": repeats}, "match": {"max_retries": 2, "turn_timeout": 60}}


async def play(run_dir: Path, raw: dict):
    s = parse_scenario(raw)
    store = RunStore.create_or_resume(run_dir, s.name, yaml.safe_dump(raw), s.fingerprint())
    keep = KeepRecords()
    result = await run_tournament(s, store, keep)
    return keep.in_order(result), store


def bytes_seen(error: str) -> int:
    return int(re.search(r"; ([\d,]+) bytes", error).group(1).replace(",", ""))


@pytest.mark.parametrize("sized", [False, True], ids=["streamed", "announced"])
@pytest.mark.parametrize("mock_class, backend", [(OpenAIMock, "openai"), (AnthropicMock, "anthropic")],
                         ids=["openai", "anthropic"])
async def test_a_flooded_reply_is_cut_unread_asked_again_and_then_defaulted(tmp_path, mock_class, backend, sized):
    with mock_class() as mock:
        mock.set_script(lambda count, body: "flood:2000000:sized" if sized else "flood")
        records, store = await play(tmp_path / "run", scenario({"alice": model(mock, backend)}))
        try:
            (record,) = records
            assert record.status == "finished", record.error
            seat = next(s.label for s in record.seats if s.agent == "alice")
            (taken,) = [e for e in record.events if isinstance(e, ActionTaken) and e.seat == seat]
            # never a move: asked three times (max_retries 2), then the game's default, with no reply kept
            assert taken.defaulted and taken.attempts == 3 and taken.reply is None and taken.action == 0
            failed = [e for e in record.events if isinstance(e, TurnFailed) and e.seat == seat]
            assert [(f.attempt, f.failure, f.reply, f.reason) for f in failed] == [(n, "invalid", None, CUT) for n in (1, 2, 3)]

            # each call is recorded as cut, with the size that had come when reading stopped
            calls = [c for c in store.read.calls() if c.agent == "alice"]
            assert len(calls) == 3 and all(c.retries == 0 for c in calls)
            limit = body_limit(1600)
            for call in calls:
                assert call.error.startswith("ReplyCut: reply cut: longer than max_reply_chars (1,600 characters); ")
                if sized:  # the server said how long: nothing was read
                    assert call.error.endswith("bytes announced by the server, none read")
                    assert bytes_seen(call.error) > 2_000_000
                else:  # read until the limit was passed, one chunk at most past it
                    assert call.error.endswith(f"bytes had come when reading stopped (the most read is {limit:,})")
                    assert limit < bytes_seen(call.error) <= limit + 128 * 1024

            # the server was asked again with the reason, and never shown the flood
            bodies = mock.bodies()
            assert len(bodies) == 3
            for n, body in enumerate(bodies):
                sent = json.dumps(body)
                assert FLOOD_WORDS not in sent
                assert sent.count(CUT) == n
            assert not [m for m in bodies[2]["messages"] if m["role"] == "assistant"]
            for body in bodies[1:]:  # the reason closes the conversation, as the referee's words, before the prompt again
                last = body["messages"][-1]
                assert last["role"] == "user" and f"{CUT} " in last["content"]
            assert all(r.reply is None and r.sent is not None for r in mock.requests)
        finally:
            store.close()


async def test_a_reply_whose_body_fits_but_whose_text_is_too_long_is_cut_after_reading(tmp_path):
    """3,000 characters come in a body under the byte limit: parsed, found longer than the cap, and cut."""
    with OpenAIMock() as mock:
        mock.set_script(lambda count, body: "flood:3000" if count == 1 else "ok")
        records, store = await play(tmp_path / "run", scenario({"alice": model(mock, "openai")}))
        try:
            (record,) = records
            seat = next(s.label for s in record.seats if s.agent == "alice")
            (taken,) = [e for e in record.events if isinstance(e, ActionTaken) and e.seat == seat]
            assert not taken.defaulted and taken.attempts == 2  # the second, normal reply became the move
            assert taken.reply == mock.requests[1].reply
            (failed,) = [e for e in record.events if isinstance(e, TurnFailed)]
            assert failed.reason == CUT and failed.reply is None
            first, second = sorted((c for c in store.read.calls() if c.agent == "alice"), key=lambda c: c.attempt)
            found = re.fullmatch(r"ReplyCut: reply cut: longer than max_reply_chars \(1,600 characters\); ([\d,]+) characters came",
                                 first.error)
            assert found and 3000 < int(found.group(1).replace(",", "")) < 3100  # the reason and its JSON around it
            assert second.error is None
        finally:
            store.close()


# The run, in a process of its own: its peak resident memory once the CLI and the SDKs are imported, against its
# peak when the run ends (the servers run in the test's process and are not counted). The peak is
# the kernel's VmHWM: getrusage's ru_maxrss would start from the peak of the pytest process that
# forked it, which Linux carries across fork and exec.
MEASURED_RUN = """
import json, resource, sys
from arena.cli import main
import arena.agents.anthropic_backend, arena.agents.openai_backend, arena.cli.commands, arena.run.runner, anthropic, openai

def peak_kb():
    try:
        with open("/proc/self/status") as status:
            return next(int(line.split()[1]) for line in status if line.startswith("VmHWM:"))
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

before = peak_kb()
try:
    code = main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
print(json.dumps({"code": code, "before_kb": before, "after_kb": peak_kb()}), file=sys.stderr)
"""


def measured_run(scenario_file: Path, run_dir: Path, cwd: Path) -> tuple[subprocess.CompletedProcess, dict]:
    environment = {k: v for k, v in os.environ.items() if "API_KEY" not in k and "PROXY" not in k.upper()}
    environment.update(NO_PROXY=LOCAL, no_proxy=LOCAL, COLUMNS="200")
    done = subprocess.run([sys.executable, "-c", MEASURED_RUN, "run", str(scenario_file), "--plain", "--run-dir", str(run_dir)],
                          cwd=cwd, capture_output=True, text=True, timeout=300, env=environment)
    figures = json.loads(done.stderr.strip().splitlines()[-1])
    return done, figures


def test_four_matches_against_servers_sending_two_megabytes_per_reply_stay_small(tmp_path):
    """The case of issue 34: max_tokens 100, every reply 2 MB. Before the cap, 4 matches made a 504 MB
    store, a 378 MB cache and a 1 GB process. Now every reply is cut at the body limit, the run finishes
    with the defaults, and the store, the cache and the process stay small."""
    with OpenAIMock() as openai_mock, AnthropicMock() as anthropic_mock:
        for mock in (openai_mock, anthropic_mock):
            mock.set_script(lambda count, body: "flood")
        raw = scenario({"alice": model(openai_mock, "openai"), "bob": model(anthropic_mock, "anthropic")},
                       repeats=4, rounds=5)
        path = tmp_path / "flood.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        run_dir = tmp_path / "run"
        done, figures = measured_run(path, run_dir, tmp_path)
        assert figures["code"] == 0, done.stdout + done.stderr
        assert "4 of 4 matches finished" in done.stdout, done.stdout

        # memory: what the run added to the process once its code was loaded. The same run with normal
        # replies adds about 26 MB; without the cap this one added 200 MB (and a 160 MB store)
        growth_mb = (figures["after_kb"] - figures["before_kb"]) / 1024
        assert growth_mb < 100, growth_mb

        # files: the store and the cache (with their journals) under 1 MB each
        files = {p.name: p.stat().st_size for p in run_dir.iterdir() if p.is_file()}
        store_bytes = sum(size for name, size in files.items() if name.startswith("run.sqlite"))
        cache_bytes = sum(size for name, size in files.items() if name.startswith("responses.sqlite"))
        assert 0 < store_bytes < 1_000_000 and cache_bytes < 1_000_000, files

        # every model turn: asked 3 times, each reply cut and recorded with its size, then defaulted
        store = open_run(run_dir)
        try:
            records = list(store.records())
            assert len(records) == 4 and all(r.status == "finished" for r in records)
            model_turns = [e for r in records for e in r.events if isinstance(e, ActionTaken)
                           and r.agent_of(e.seat) in ("alice", "bob")]
            assert len(model_turns) == 4 * 5 * 2 and all(t.defaulted and t.attempts == 3 and t.reply is None
                                                         for t in model_turns)
            calls = [c for c in store.calls() if c.agent in ("alice", "bob")]
            assert len(calls) == 3 * len(model_turns)
            assert all(c.error.startswith("ReplyCut: reply cut: longer than max_reply_chars (1,600 characters); ")
                       and bytes_seen(c.error) > body_limit(1600) for c in calls)
        finally:
            store.close()
        # the re-asks carry the reason and none of the flood
        bodies = openai_mock.bodies() + anthropic_mock.bodies()
        assert len(bodies) == len(calls)
        assert sum(json.dumps(b).count(CUT) for b in bodies) == len(model_turns) * (0 + 1 + 2)
        assert not any(FLOOD_WORDS in json.dumps(b) for b in bodies)
        print(f"peak growth {growth_mb:.1f} MB, store {store_bytes:,} bytes, cache {cache_bytes:,} bytes")


async def test_a_server_error_quoting_megabytes_is_kept_to_its_first_two_thousand_characters(tmp_path):
    """The SDKs put a server's whole error body in their message: what the store keeps of it is bounded."""
    with OpenAIMock() as mock:
        mock.set_script(lambda count, body: "flood_error")
        records, store = await play(tmp_path / "run", scenario({"alice": model(mock, "openai")}))
        try:
            (record,) = records
            assert record.status == "failed"
            assert record.error.startswith("CallRefused: 400: Error code: 400 - I weigh what the others gave")
            assert len(record.error) < 2100 and re.search(r"… \(\d[\d,]* more characters\)", record.error)
            (call,) = [c for c in store.read.calls() if c.agent == "alice"]
            assert call.error.startswith("CallRefused: 400: Error code: 400") and len(call.error) <= 2000
        finally:
            store.close()
        assert (tmp_path / "run" / "run.sqlite").stat().st_size < 1_000_000


async def test_a_cached_reply_longer_than_the_cap_now_set_is_cut_too(tmp_path):
    """The cache answers the same request whatever max_reply_chars is: a reply it holds from a run with a
    larger cap is cut like one that came from the server, and so is the answer to the re-ask."""
    cache = str(tmp_path / "cache.sqlite")
    with OpenAIMock() as mock:
        first, store = await play(tmp_path / "first", {**scenario({"alice": model(mock, "openai")}), "cache": cache})
        store.close()
        (taken,) = [e for e in first[0].events if isinstance(e, ActionTaken) and first[0].agent_of(e.seat) == "alice"]
        assert not taken.defaulted and 10 < len(taken.reply) < 1600
        asked = mock.count

        raw = {**scenario({"alice": model(mock, "openai", max_reply_chars=10)}), "cache": cache}
        again, store = await play(tmp_path / "again", raw)
        try:
            (record,) = again
            (taken,) = [e for e in record.events if isinstance(e, ActionTaken) and record.agent_of(e.seat) == "alice"]
            assert taken.defaulted and taken.attempts == 3 and taken.reply is None
            calls = sorted((c for c in store.read.calls() if c.agent == "alice"), key=lambda c: c.attempt)
            assert [c.cached for c in calls] == [True, False, False]
            assert calls[0].error == (f"ReplyCut: reply cut: longer than max_reply_chars (10 characters); "
                                      f"{len(mock.requests[0].reply)} characters in the cache")
            assert all(re.fullmatch(r"ReplyCut: reply cut: longer than max_reply_chars \(10 characters\); \d+ characters came",
                                    c.error) for c in calls[1:])
            assert mock.count == asked + 2  # the re-asks, which the cache had not seen
        finally:
            store.close()


def test_max_reply_chars_defaults_from_max_tokens_and_has_a_ceiling():
    from arena.agents.openai_backend import OpenAIConfig

    assert OpenAIConfig(model="m").reply_cap() == 16 * 512
    assert OpenAIConfig(model="m", max_tokens=100).reply_cap() == 1600
    assert OpenAIConfig(model="m", max_tokens=10**7).reply_cap() == REPLY_CEILING  # derived, held to the ceiling
    assert OpenAIConfig(model="m", max_reply_chars=300).reply_cap() == 300
    assert body_limit(1600) == 12 * 1600 + ENVELOPE_BYTES
    raw = scenario({"alice": {"backend": "openai", "model": "m", "max_reply_chars": REPLY_CEILING + 1}})
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    assert "agents.alice.max_reply_chars: expected less than or equal to 1000000 (given: 1000001)" in caught.value.render()


async def test_the_embedded_model_stops_generating_at_the_cap(tmp_path):
    """llama.cpp in this process: generation is stopped where the reply passes max_reply_chars, long
    before max_tokens, and the reply is cut like a server's."""
    pytest.importorskip("llama_cpp")
    tiny = {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 200, "max_reply_chars": 8,
            "temperature": 0.8, "structured": False}
    raw = {**scenario({"tiny": tiny}), "match": {"max_retries": 1, "turn_timeout": 300}}
    records, store = await play(tmp_path / "run", raw)
    try:
        (record,) = records
        (taken,) = [e for e in record.events if isinstance(e, ActionTaken) and record.agent_of(e.seat) == "tiny"]
        assert taken.defaulted and taken.attempts == 2 and taken.reply is None
        calls = [c for c in store.read.calls() if c.agent == "tiny"]
        assert len(calls) == 2
        for call in calls:
            found = re.fullmatch(r"ReplyCut: reply cut: longer than max_reply_chars \(8 characters\); (\d+) characters "
                                 r"generated when generation stopped", call.error)
            assert found, call.error
            assert 8 < int(found.group(1)) <= 8 + 40  # one token past the cap, not 200 tokens on
    finally:
        store.close()


async def test_the_connection_of_a_cut_reply_is_closed_not_drained(tmp_path):
    """A 20 MB reply: the client hangs up once past the limit, so the server cannot send it all (what
    it did send sits in the kernel's buffers, a few MB at most)."""
    with OpenAIMock() as mock:
        mock.set_script(lambda count, body: "flood:20000000")
        records, store = await play(tmp_path / "run", scenario({"alice": model(mock, "openai")}))
        store.close()
        assert len(mock.requests) == 3
        assert all(r.sent is not None and r.sent < 20_000_000 for r in mock.requests), [r.sent for r in mock.requests]


@pytest.mark.parametrize("mock_class, backend", [(OpenAIMock, "openai"), (AnthropicMock, "anthropic")],
                         ids=["openai", "anthropic"])
async def test_an_answer_broken_off_midway_is_tried_again(tmp_path, mock_class, backend):
    """The body is read here, not by the SDK: a connection that closes halfway through it is a
    transient failure, tried again within the call, and the second answer is the move."""
    with mock_class() as mock:
        mock.set_script(["broken_off"])
        records, store = await play(tmp_path / "run", scenario({"alice": model(mock, backend)}))
        try:
            (record,) = records
            (taken,) = [e for e in record.events if isinstance(e, ActionTaken) and record.agent_of(e.seat) == "alice"]
            assert not taken.defaulted and taken.attempts == 1 and taken.reply == mock.requests[1].reply
            (call,) = [c for c in store.read.calls() if c.agent == "alice"]
            assert call.retries == 1 and call.error is None
            assert [r.behaviour for r in mock.requests] == ["broken_off", "ok"] and mock.bodies()[0] == mock.bodies()[1]
        finally:
            store.close()
