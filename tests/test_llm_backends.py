"""The model backends against local mock servers (tests/mock_llm.py): retries, faults,
structured output, keys, the response cache, the budget, and the commands around them.

Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import os
import re
import secrets
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from arena.contract import seeding
from arena.contract.events import ActionTaken, TurnFailed
from arena.games.public_goods import contribution_schema
from arena.run.runner import KeepRecords, run_tournament
from arena.run.scenario import parse_scenario
from arena.contract import open_run
from arena.store import RunStore

from mock_llm import AnthropicMock, OpenAIMock, is_probe

LOCAL = "127.0.0.1,localhost"
KEY_VARIABLES = ("OPENAI_API_KEY", "ANTHROPIC_API_KEY")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy")


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    """No real key reaches a mock by accident, and no proxy stands between the client and 127.0.0.1."""
    for variable in KEY_VARIABLES + PROXY_VARIABLES:
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NO_PROXY", LOCAL)
    monkeypatch.setenv("no_proxy", LOCAL)


@pytest.fixture
def openai_mock():
    with OpenAIMock(slow_seconds=3.0) as mock:
        yield mock


@pytest.fixture
def anthropic_mock():
    with AnthropicMock(slow_seconds=3.0) as mock:
        yield mock


# -- helpers -------------------------------------------------------------------------------
def openai_agent(mock, **extra):
    return {"backend": "openai", "base_url": mock.base_url, "model": "mock-model", "backoff": 0.01,
            "timeout": 10, "retries": 6, **extra}


def anthropic_agent(mock, **extra):
    return {"backend": "anthropic", "base_url": mock.base_url, "model": "mock-model", "backoff": 0.01,
            "timeout": 10, "retries": 6, **extra}


def scenario(name, agents, rounds=2, repeats=2, mode=1, **top):
    return {
        "name": name, "seed": 5, "agents": agents,
        "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": mode}}],
        "tournament": {"repeats": repeats}, **top,
    }


def write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


async def play(run_dir: Path, raw: dict):
    s = parse_scenario(raw)
    store = RunStore.create_or_resume(run_dir, s.name, yaml.safe_dump(raw), s.fingerprint())
    keep = KeepRecords()  # the runner keeps no record once stored: the test collects them as they go by
    result = await run_tournament(s, store, keep)
    return result, keep.in_order(result), store


def env(**extra) -> dict[str, str]:
    base = {k: v for k, v in os.environ.items() if k not in KEY_VARIABLES + PROXY_VARIABLES}
    return {**base, "COLUMNS": "200", "NO_PROXY": LOCAL, "no_proxy": LOCAL, **extra}


def arena(*args, cwd: Path, environment=None, timeout=60):
    # Run from the test's own folder, not the source tree: a stale arena_eval.egg-info left there by
    # a build would shadow the installed entry points (and hide the model backends).
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout, env=environment or env())


def flat(text: str) -> str:
    return " ".join(text.split())


def model_turns(records, model_agents):
    """(record, ActionTaken) for every turn taken by a model agent."""
    for record in records:
        seat_agent = {s.label: s.agent for s in record.seats}
        for event in record.events:
            if isinstance(event, ActionTaken) and seat_agent[event.seat] in model_agents:
                yield record, event


def request_seed(record, call) -> int:
    """The seed a call's request carries: derived from the match, seat, round and attempt."""
    return seeding.derive(record.seed, "turn", call.seat, call.round, call.attempt) % 2**31


def calls_table(run_dir: Path):
    store = open_run(run_dir)
    try:
        return list(store.calls())
    finally:
        store.close()


# -- openai: faults, retries, Retry-After ---------------------------------------------------
FAULTS = ["429:0.3", "500", "slow", "drop", "malformed"]


async def test_openai_faults_are_retried_and_nothing_is_lost(tmp_path, openai_mock):
    openai_mock.set_script(list(FAULTS))
    raw = scenario("faults", {
        "alice": openai_agent(openai_mock, timeout=1.0),
        "bob": openai_agent(openai_mock, timeout=1.0),
        "carol": {"backend": "scripted", "strategy": "tit_for_tat"},
    }, rounds=2, repeats=3)
    result, records, store = await play(tmp_path / "run", raw)
    try:
        assert len(records) == 3 and all(r.status == "finished" for r in records) and not result.not_started
        assert {r.key for r in store.read.records()} == {r.key for r in records}

        # every model turn was answered at the first attempt, by the mock's own reply
        turns = list(model_turns(records, {"alice", "bob"}))
        assert len(turns) == 3 * 2 * 2
        assert all(not t.defaulted and t.attempts == 1 for _, t in turns)
        assert not [e for r in records for e in r.events if isinstance(e, TurnFailed)]
        answered = openai_mock.answered()
        assert Counter(t.reply for _, t in turns) == Counter(r.reply for r in answered)
        assert all(json.loads(t.reply)["reason"].startswith("mock reply") for _, t in turns)

        # each fault cost one more request, and the store counts it as a retry of its call
        assert openai_mock.count == len(turns) + len(FAULTS)
        assert sorted(r.behaviour for r in openai_mock.requests if r.behaviour != "ok") == sorted(FAULTS)
        calls = list(store.read.calls())
        assert len(calls) == len(turns)  # one row per turn: a retried call is not recorded twice
        assert len({(c.match, c.seat, c.round) for c in calls}) == len(turns)
        assert sum(c.retries for c in calls) == len(FAULTS)
        assert all(c.error is None and not c.cached and c.prompt_tokens and c.completion_tokens for c in calls)

        # Retry-After: the request that got "429, Retry-After: 0.3" was tried again no sooner
        first = openai_mock.requests[0]
        assert first.behaviour == "429:0.3"
        again = next(r for r in openai_mock.requests[1:] if r.body == first.body)
        assert again.at - first.at >= 0.3
        by_key = {r.key: r for r in records}
        (limited,) = [c for c in calls if request_seed(by_key[c.match], c) == first.body["seed"]]
        assert limited.retries >= 1 and limited.latency >= 0.3
    finally:
        store.close()


# -- openai: refusals --------------------------------------------------------------------------
@pytest.mark.parametrize("mock_class, agent", [(OpenAIMock, openai_agent), (AnthropicMock, anthropic_agent)])
def test_a_rejected_key_stops_the_run_before_anything_is_played(tmp_path, mock_class, agent):
    """The server refuses the key to the model listing too, as the vendors' APIs do: found once,
    before the first match, with no model asked and nothing left to resume."""
    key = f"sk-test-{secrets.token_hex(16)}"
    with mock_class(keys={"the-right-one"}) as mock:
        path = write(tmp_path / "s.yaml", scenario("badkey", {
            "alice": agent(mock, api_key_env="ARENA_TEST_KEY"),
            "carol": {"backend": "scripted", "strategy": "free_rider"},
        }, rounds=2, repeats=2))
        run_dir = tmp_path / "run"
        result = arena("run", path, "--plain", "--run-dir", run_dir, environment=env(ARENA_TEST_KEY=key), cwd=tmp_path)
        out = flat(result.stdout + result.stderr)
        assert result.returncode == 2, out
        assert "agent 'alice': the server refused the API key (401); check the environment variable ARENA_TEST_KEY" in out
        assert mock.count == 0 and "matches finished" not in out  # no model was asked, no match begun
        assert key not in result.stdout + result.stderr


def test_a_key_refused_only_by_the_model_fails_the_match_naming_the_agent_and_the_variable(tmp_path, openai_mock):
    """A server (a proxy) that lists its models to anyone but refuses the key for a reply: the
    check before the run passes, and each match fails with the refusal, none scored."""
    key = f"sk-test-{secrets.token_hex(16)}"
    openai_mock.set_script(lambda count, body: "401")  # whose error message quotes the key it was given
    path = write(tmp_path / "s.yaml", scenario("badkey", {
        "alice": openai_agent(openai_mock, api_key_env="ARENA_TEST_KEY"),
        "carol": {"backend": "scripted", "strategy": "free_rider"},
    }, rounds=2, repeats=2))
    run_dir = tmp_path / "run"
    result = arena("run", path, "--plain", "--run-dir", run_dir, environment=env(ARENA_TEST_KEY=key), cwd=tmp_path)
    out = flat(result.stdout + result.stderr)
    assert result.returncode == 1, out
    assert "0 of 2 matches finished" in out
    assert out.count("failed: FatalAgentError: agent 'alice': the server refused the API key (401)") == 2
    assert "check the environment variable ARENA_TEST_KEY" in out
    # no retries on a refused key: one request per match
    assert openai_mock.count == 2
    assert all(r.api_key == key for r in openai_mock.requests)
    assert key not in result.stdout + result.stderr
    for file in run_dir.rglob("*"):
        assert key.encode() not in file.read_bytes(), file


async def test_a_bad_request_is_not_retried_and_fails_the_match_instead_of_scoring_a_default(tmp_path, openai_mock):
    """A refused request would be refused again, and a default would score the refusal as the
    model's move: the match fails with the server's reason, and a resume plays it again."""
    openai_mock.set_script(lambda count, body: "400")
    raw = scenario("badrequest", {
        "alice": openai_agent(openai_mock, structured=False),
        "carol": {"backend": "scripted", "strategy": "always_all"},
    }, rounds=1, repeats=1, match={"max_retries": 1})
    result, records, store = await play(tmp_path / "run", raw)
    try:
        (record,) = records
        assert record.status == "failed" and record.payoffs == {}
        assert record.error.startswith("CallRefused: 400") and "this mock refuses the request" in record.error
        assert not [e for e in record.events if isinstance(e, (TurnFailed, ActionTaken))]  # nothing defaulted
        assert list(store.read.records()) == []  # nothing scored; the match is played again on resume
        # one request in all: neither the backend nor the match asked again
        assert openai_mock.count == 1
        (call,) = list(store.read.calls())
        assert call.retries == 0 and call.error.startswith("CallRefused: 400")
    finally:
        store.close()


# -- openai: structured output ------------------------------------------------------------
async def test_openai_asks_for_the_games_json_schema_and_falls_back_to_text(tmp_path, openai_mock):
    agents = {
        "alice": openai_agent(openai_mock),
        "bob": openai_agent(openai_mock),
        "carol": {"backend": "scripted", "strategy": "tit_for_tat"},
    }
    raw = scenario("structured", agents, rounds=2, repeats=2, concurrency=1)
    result, records, store = await play(tmp_path / "one", raw)
    store.close()
    assert all(r.status == "finished" for r in records)
    schema = contribution_schema(10)  # the game's schema, narrowed to the default endowment
    assert openai_mock.count == 8
    for body in openai_mock.bodies():
        assert body["response_format"] == {"type": "json_schema", "json_schema": {
            "name": "action", "schema": {**schema, "additionalProperties": False}, "strict": True}}
        assert body["model"] == "mock-model" and body["messages"][-1]["role"] == "user"
    assert set(schema["properties"]) == {"reason", "coins"}

    # a server without response_format answers 400 to it: the backend finds what it takes (here a grammar, or
    # plain text where no grammar can be built), once for the endpoint
    openai_mock.reset(lambda count, body: "400" if "response_format" in body else "ok")
    result, records, store = await play(tmp_path / "two", raw)
    try:
        assert len(records) == 2 and all(r.status == "finished" for r in records)
        turns = list(model_turns(records, {"alice", "bob"}))
        assert all(not t.defaulted and t.attempts == 1 for _, t in turns)
        assert Counter(t.reply for _, t in turns) == Counter(r.reply for r in openai_mock.answered())
        with_schema = [b for b in openai_mock.bodies() if "response_format" in b]
        assert len(with_schema) == 2  # json_schema, then json_object, once for both agents; then remembered
        assert openai_mock.count == len(turns) + 2
        calls = list(store.read.calls())
        assert sum(c.retries for c in calls) == 0 and all(c.error is None for c in calls)  # the fallback is not a retry
    finally:
        store.close()


# -- anthropic -------------------------------------------------------------------------------
async def test_anthropic_messages_alternate_carry_the_system_prompt_and_use_a_forced_tool(
        tmp_path, anthropic_mock, monkeypatch):
    key = f"sk-ant-test-{secrets.token_hex(16)}"
    monkeypatch.setenv("ANTHROPIC_API_KEY", key)
    script = ["529", "garbage", "malformed", "ok", "garbage", "529", "drop"]
    anthropic_mock.set_script(list(script))
    system = "You are a careful player."
    raw = scenario("claude", {
        "ann": anthropic_agent(anthropic_mock, system=system),
        "ben": anthropic_agent(anthropic_mock, system=system),
        "carol": {"backend": "scripted", "strategy": "conditional_cooperator"},
    }, rounds=3, repeats=1, mode=2, match={"max_retries": 2})
    result, records, store = await play(tmp_path / "run", raw)
    try:
        (record,) = records
        assert record.status == "finished"
        requests = anthropic_mock.requests
        assert {r.path for r in requests} == {"/v1/messages"}
        for r in requests:
            roles = [m["role"] for m in r.body["messages"]]
            assert roles[0] == "user" and roles[-1] == "user"
            assert all(a != b for a, b in zip(roles, roles[1:])), roles
            assert r.body["system"] == system
            assert r.body["tools"] == [{"name": "act", "description": "Your move in the game.",
                                        "input_schema": contribution_schema(10)}]
            assert r.body["tool_choice"] == {"type": "tool", "name": "act"}
            assert r.api_key == key and r.headers.get("anthropic-version")
        # the rules and the first prompt, both from the referee, arrive as one user message, untagged
        assert requests[0].body["messages"][0]["content"].startswith("You are Player")
        assert "Round 1 of 3" in requests[0].body["messages"][0]["content"]
        # a garbage reply went back to the model as its own turn, followed by the referee's complaint
        retried = [r for r in requests if any(m["role"] == "assistant" and "a few coins, maybe" in m["content"]
                                               for m in r.body["messages"])]
        assert retried

        # 529 overloaded, a broken body, a dropped connection: retried by the backend; garbage: re-asked by the match
        calls = list(store.read.calls())
        assert sum(c.retries for c in calls) == len(script) - script.count("ok") - script.count("garbage")
        assert anthropic_mock.count == len(calls) + sum(c.retries for c in calls)
        invalid = [e for e in record.events if isinstance(e, TurnFailed)]
        assert len(invalid) == script.count("garbage") and {e.failure for e in invalid} == {"invalid"}
        turns = list(model_turns([record], {"ann", "ben"}))
        assert len(turns) == 6 and not any(t.defaulted for _, t in turns)
        # the forced tool's input became the JSON reply the game parsed
        good = [r.reply for r in anthropic_mock.answered() if r.behaviour != "garbage"]
        assert Counter(t.reply for _, t in turns) == Counter(good)
        for _, t in turns:
            assert set(json.loads(t.reply)) == {"reason", "coins"} and t.action == json.loads(t.reply)["coins"]
        assert all(c.backend == "anthropic" and c.prompt_tokens and c.completion_tokens for c in calls)
    finally:
        store.close()


async def test_an_empty_anthropic_reply_is_shown_back_marked_never_as_an_empty_assistant_turn(tmp_path):
    """The Messages API refuses a message without text (400), as the mock does: an agent's empty reply,
    re-asked, goes back as a marked assistant turn followed by the referee's complaint, and the match plays."""
    from arena.agents.anthropic_backend import EMPTY_REPLY

    asked: Counter = Counter()

    def first_empty(body):  # each seat's first turn is answered with no text at all; every later one validly
        if is_probe(body):  # the empty reply makes the backend probe the server: it answers, so the reply is invalid
            return "ready"
        seat = re.search(r"You are (Player \d)", json.dumps(body)).group(1)
        asked[seat] += 1
        return "" if asked[seat] == 1 else {"reason": "a fair share", "coins": 5}

    with AnthropicMock(responder=first_empty) as server:
        raw = scenario("empty", {"ann": anthropic_agent(server), "ben": anthropic_agent(server)},
                       rounds=2, repeats=1, match={"max_retries": 1})
        result, records, store = await play(tmp_path / "run", raw)
        try:
            (record,) = records
            assert record.status == "finished", record.error
            assert all(r.behaviour == "ok" for r in server.requests) and len(server.turns()) == 6  # nothing refused
            assert len(server.probes()) == 2  # one after each empty reply
            for body in server.bodies():  # no message without text ever left the backend
                assert all(m["content"].strip() for m in body["messages"]), body["messages"]
            reasked = [b for b in server.bodies() if any(m["content"] == EMPTY_REPLY for m in b["messages"])]
            assert len(reasked) == 2  # each seat's second attempt at round 1
            for body in reasked:
                (mine,) = [i for i, m in enumerate(body["messages"]) if m["content"] == EMPTY_REPLY]
                assert body["messages"][mine]["role"] == "assistant"
                assert body["messages"][mine + 1]["role"] == "user"  # the referee says what was wrong with it
            failed = [e for e in record.events if isinstance(e, TurnFailed)]
            assert len(failed) == 2 and all(f.reply == "" for f in failed)  # recorded as it was: empty
            turns = list(model_turns(records, {"ann", "ben"}))
            assert len(turns) == 4 and not any(t.defaulted for _, t in turns)
        finally:
            store.close()


class RefusesMaxTokens(OpenAIMock):
    """Answers as OpenAI's API does for a reasoning model sent max_tokens."""

    def answer(self, route, body, handler, garbage=False):
        if "max_tokens" in (body or {}):
            return 400, {}, {"error": {"message": "Unsupported parameter: 'max_tokens' is not supported with this model. "
                                                  "Use 'max_completion_tokens' instead.", "type": "invalid_request_error",
                                       "param": "max_tokens", "code": "unsupported_parameter"}}, None
        return super().answer(route, body, handler, garbage)


async def test_reasoning_models_get_max_completion_tokens_and_the_field_can_be_forced(tmp_path, openai_mock):
    agents = {"reasoner": openai_agent(openai_mock, model="o3-mini", max_tokens=900),
              "gpt5": openai_agent(openai_mock, model="gpt-5-mini", max_tokens=900),
              "forced": openai_agent(openai_mock, max_tokens_field="max_completion_tokens", max_tokens=900),
              "classic": openai_agent(openai_mock, model="gpt-4o-mini", max_tokens=700)}
    raw = scenario("reasoning", agents, rounds=1, repeats=1)
    result, records, store = await play(tmp_path / "run", raw)
    store.close()
    assert records[0].status == "finished"
    by_model = {}
    for body in openai_mock.bodies():
        by_model.setdefault(body["model"], []).append(body)
    for name in ("o3-mini", "gpt-5-mini", "mock-model"):
        for body in by_model[name]:
            assert body["max_completion_tokens"] == 900 and "max_tokens" not in body
    for body in by_model["gpt-4o-mini"]:
        assert body["max_tokens"] == 700 and "max_completion_tokens" not in body


async def test_a_server_refusing_max_tokens_for_max_completion_tokens_gets_it_from_then_on(tmp_path):
    with RefusesMaxTokens() as server:
        raw = scenario("renamed", {"alice": openai_agent(server, model="my-reasoner"),
                                   "carol": {"backend": "scripted", "strategy": "tit_for_tat"}}, rounds=3, repeats=1)
        result, records, store = await play(tmp_path / "run", raw)
        try:
            assert records[0].status == "finished"
            assert ["max_tokens" in b for b in server.bodies()] == [True, False, False, False]
            assert all(b.get("max_completion_tokens") == 512 for b in server.bodies()[1:])
            calls = list(store.read.calls())
            assert len(calls) == 3 and all(c.error is None and c.retries == 0 for c in calls)
            (note,) = [n for n in store.read.notes() if n["topic"] == "token limit"]
            assert note["agent"] == "alice" and "max_completion_tokens is sent instead" in note["text"]
        finally:
            store.close()


async def test_system_in_first_user_carries_the_system_text_and_persona_in_the_first_user_turn(tmp_path, openai_mock):
    agents = {"gemma": openai_agent(openai_mock, system="Be terse.", persona="You are a miser.", system_in_first_user=True),
              "plain": openai_agent(openai_mock, system="Be terse."),
              "carol": {"backend": "scripted", "strategy": "tit_for_tat"}}
    result, records, store = await play(tmp_path / "run", scenario("layout", agents, rounds=2, repeats=1))
    store.close()
    assert records[0].status == "finished"
    laid_out = [b for b in openai_mock.bodies() if "You are a miser." in json.dumps(b)]
    assert len(laid_out) == 2
    for body in laid_out:
        assert [m["role"] for m in body["messages"]][0] == "user" and "system" not in [m["role"] for m in body["messages"]]
        first = body["messages"][0]["content"]
        assert first.startswith("Be terse.\n\nYou are a miser.\n\nYou are ")  # then the rules, as the referee wrote them
        assert sum("Be terse." in m["content"] for m in body["messages"]) == 1  # said once, at the top
    plain = [b for b in openai_mock.bodies() if b not in laid_out]
    assert len(plain) == 2 and all(b["messages"][0] == {"role": "system", "content": "Be terse."} for b in plain)


def test_the_first_call_is_not_timed_while_the_sdk_loads(tmp_path):
    """Importing an SDK and building its client take a second or more; a short per-call timeout
    must not fail the first call of a fresh process for that. (1.5 s: shorter than an import on a
    busy machine, longer than the first request's own warm-up there.)"""
    with OpenAIMock() as gpt, AnthropicMock() as claude:
        path = write(tmp_path / "s.yaml", scenario("quick", {
            "olive": openai_agent(gpt, timeout=1.5, retries=0),
            "andy": anthropic_agent(claude, timeout=1.5, retries=0),
        }, rounds=1, repeats=1, match={"max_retries": 0}))
        result = arena("run", path, "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
        assert result.returncode == 0, result.stdout + result.stderr
        assert gpt.count == claude.count == 1
    calls = calls_table(tmp_path / "run")
    assert len(calls) == 2 and all(c.error is None and c.retries == 0 for c in calls), calls


# -- the response cache ------------------------------------------------------------------------
def test_a_second_run_is_answered_from_the_cache(tmp_path, openai_mock):
    raw = scenario("cached", {
        "alice": openai_agent(openai_mock),
        "bob": openai_agent(openai_mock),
        "carol": {"backend": "scripted", "strategy": "tit_for_tat"},
    }, rounds=2, repeats=2)
    path = write(tmp_path / "s.yaml", raw)
    run_dir = tmp_path / "run"
    first = arena("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
    assert first.returncode == 0, first.stdout + first.stderr
    asked = openai_mock.count
    assert asked == 2 * 2 * 2
    calls = calls_table(run_dir)
    assert len(calls) == asked and not any(c.cached for c in calls)
    paid = {(c.match, c.seat, c.round): (c.prompt_tokens, c.completion_tokens, c.cost, c.latency) for c in calls}
    results = arena("export", run_dir, cwd=tmp_path).stdout

    # the same scenario again, as a new run in the same directory: the old run is set aside,
    # the cache file stays, and every reply comes from it
    fresh = arena("run", path, "--quiet", "--run-dir", run_dir, "--force-new", cwd=tmp_path)
    assert fresh.returncode == 0, fresh.stdout + fresh.stderr
    assert list(run_dir.glob("run.sqlite.old-*")) and (run_dir / "responses.sqlite").exists()
    assert "from the earlier run" not in fresh.stdout
    assert openai_mock.count == asked  # zero requests
    calls = calls_table(run_dir)
    assert len(calls) == asked and all(c.cached and c.retries == 0 for c in calls)
    # each cached reply keeps what it cost when first asked (reported as saved; the budget ignores it)
    assert {(c.match, c.seat, c.round): (c.prompt_tokens, c.completion_tokens, c.cost, c.latency) for c in calls} == paid
    assert arena("export", run_dir, cwd=tmp_path).stdout == results  # the same games, replayed from the cache

    # resuming that finished run plays nothing at all
    again = arena("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
    assert again.returncode == 0 and "2 from the earlier run" in flat(again.stdout)
    assert openai_mock.count == asked

    # --no-cache asks the model again
    uncached = arena("run", path, "--quiet", "--run-dir", run_dir, "--force-new", "--no-cache", cwd=tmp_path)
    assert uncached.returncode == 0, uncached.stdout + uncached.stderr
    assert openai_mock.count == 2 * asked
    calls = calls_table(run_dir)
    assert len(calls) == asked and not any(c.cached for c in calls)


# -- the budget -----------------------------------------------------------------------------------
def test_a_spent_budget_stops_new_matches_and_a_bigger_one_resumes(tmp_path, openai_mock):
    raw = scenario("budget", {
        "alice": openai_agent(openai_mock),
        "bob": openai_agent(openai_mock),
        "carol": {"backend": "scripted", "strategy": "free_rider"},
    }, rounds=2, repeats=4, concurrency=1, budget={"tokens": 1})
    path = write(tmp_path / "s.yaml", raw)
    run_dir = tmp_path / "run"
    stopped = arena("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
    out = flat(stopped.stdout)
    assert stopped.returncode == 3, out + stopped.stderr
    assert "1 of 4 matches finished" in out  # of the four planned: the budget kept three from starting
    assert re.search(r"Stopped: the budget of 1 tokens is used \(\d+\); 3 matches were not started", out), out
    assert openai_mock.count == 4  # one match: 2 rounds x 2 model seats
    assert "stopped by budget" in flat(arena("runs", tmp_path, cwd=tmp_path).stdout)

    raw["budget"] = {"tokens": 1_000_000}
    write(path, raw)
    resumed = arena("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
    out = flat(resumed.stdout)
    assert resumed.returncode == 0, out + resumed.stderr
    assert "4 of 4 matches finished, 1 from the earlier run" in out and "Stopped" not in out
    assert openai_mock.count == 16
    assert len(calls_table(run_dir)) == 16


# -- keys ---------------------------------------------------------------------------------------
def test_api_keys_reach_the_servers_and_nothing_else(tmp_path):
    openai_key = f"sk-test-{secrets.token_hex(20)}"
    anthropic_key = f"sk-ant-test-{secrets.token_hex(20)}"
    # these servers quote the key they were given in their error messages, and the errors are stored and shown
    with OpenAIMock(["500", "400"], echo_key=True) as gpt, AnthropicMock(["529", "400"], echo_key=True) as claude:
        raw = scenario("keys", {
            "olive": openai_agent(gpt, structured=False),
            "andy": anthropic_agent(claude),
            "carol": {"backend": "scripted", "strategy": "tit_for_tat"},
        }, rounds=2, repeats=2, match={"max_retries": 1}, concurrency=1)
        # one model per table, one table at a time: which request meets which fault is fixed
        raw["games"] = [{**raw["games"][0], "label": f"with-{name}", "agents": [name, "carol"]} for name in ("olive", "andy")]
        path = write(tmp_path / "s.yaml", raw)
        run_dir = tmp_path / "run"
        environment = env(OPENAI_API_KEY=openai_key, ANTHROPIC_API_KEY=anthropic_key)
        result = arena("run", path, "--plain", "--run-dir", run_dir, environment=environment, cwd=tmp_path)
        out = flat(result.stdout)
        # each model's first match: a server error retried, then a refused request, which fails the match
        assert result.returncode == 1, result.stdout + result.stderr
        assert "2 of 4 matches finished" in out
        assert out.count("failed: CallRefused: 400") == 2 and "(key presented: ***)" in out
        shown = [arena(command, run_dir, cwd=tmp_path) for command in ("export", "show", "rank")]
        failed = [line.split()[1] for line in result.stdout.splitlines() if line.startswith("match ") and " failed: " in line]
        shown += [arena("show", run_dir, "--match", key, cwd=tmp_path) for key in failed]  # their errors quoted the keys
        assert len(failed) == 2 and all(r.returncode == 0 for r in shown)

        # the test means something: the keys were sent, and the servers echoed them back
        assert gpt.count == claude.count == 2 + 2  # the failed match's fault and refusal, two turns of the other
        assert all(r.api_key == openai_key for r in gpt.requests)
        assert all(r.api_key == anthropic_key for r in claude.requests)
        errors = [c.error for c in calls_table(run_dir) if c.error]
        assert len(errors) == 2 and all("key presented: ***" in e for e in errors), errors

    for key in (openai_key, anthropic_key):
        for output in [result, *shown]:
            assert key not in output.stdout + output.stderr
        files = [f for f in run_dir.rglob("*") if f.is_file()]
        assert {"run.sqlite", "responses.sqlite", "scenario.yaml"} <= {f.name for f in files}
        for file in files:  # WAL and shared-memory files too, when they are left
            assert key.encode() not in file.read_bytes(), file


def test_the_mock_lists_its_model_without_counting_it_as_a_call(openai_mock):
    import urllib.request

    with urllib.request.urlopen(f"{openai_mock.base_url}/models", timeout=5) as response:
        listing = json.load(response)
    assert [m["id"] for m in listing["data"]] == ["mock-model"] and openai_mock.count == 0


# -- commands ------------------------------------------------------------------------------------
def test_arena_agents_lists_the_backends_and_their_parameters(tmp_path):
    result = arena("agents", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    listing = {b["name"]: b for b in json.loads(result.stdout)}
    assert {"openai", "anthropic", "llamacpp", "scripted"} <= set(listing)
    params = {name: {p["name"]: p for p in b["params"]} for name, b in listing.items()}
    assert params["openai"]["base_url"]["default"] is None
    assert params["openai"]["api_key_env"]["default"] == "OPENAI_API_KEY"
    assert params["anthropic"]["api_key_env"]["default"] == "ANTHROPIC_API_KEY"
    for name in ("openai", "anthropic", "llamacpp"):
        assert listing[name]["calls_models"] is True
        assert params[name]["max_tokens"]["default"] == 512
        assert params[name]["model"]["required"] is (name != "llamacpp")
        assert {"temperature", "timeout", "retries", "backoff", "structured", "system"} <= set(params[name])
    assert params["llamacpp"]["model"]["default"] == "gemma3-270m" and "n_ctx" in params["llamacpp"]
    assert listing["scripted"]["calls_models"] is False and params["scripted"]["strategy"]["required"]
    assert "backend" not in params["openai"]


def dry_run(tmp_path, mock, model, scripted=False):
    agents = {"alice": openai_agent(mock, model=model), "bob": openai_agent(mock, model=model)}
    if scripted:
        agents["carol"] = {"backend": "scripted", "strategy": "tit_for_tat"}
    path = write(tmp_path / f"{model}-{scripted}.yaml", scenario("dry", agents, rounds=3, repeats=2))
    result = arena("run", path, "--dry-run", "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    return result.stdout


def agent_row(output: str, agent: str) -> list[str]:
    """The cells of an agent's row in the dry run's estimate table."""
    line = next(line for line in output.splitlines() if line.startswith(f"│ {agent} "))
    return [cell.strip() for cell in line.strip("│").split("│")]


def test_dry_run_plans_calls_and_cost_without_asking_anything(tmp_path, openai_mock):
    priced = dry_run(tmp_path, openai_mock, "gpt-4o-mini")
    assert "dry: 2 matches planned" in priced
    assert re.search(r"│ public_goods\s+│ 2\s+│ 6\s+│", priced)  # 3 rounds x 2 model seats per match
    for agent in ("alice", "bob"):
        name, backend, model, calls, prompt, replies, cost, most = agent_row(priced, agent)
        assert (backend, model, calls) == ("openai", "gpt-4o-mini", "6")  # 3 rounds x 2 matches
        assert int(prompt) > 0 and 0 < int(replies) < 6 * 512  # replies as long as the game's example, under max_tokens
        assert re.fullmatch(r"\$0\.\d{4}", most) and 0 < float(cost[1:]) < float(most[1:])
    total = re.search(r"Total: 12 calls, \d+ prompt tokens, about \d+ reply tokens \(at most 6144\); "
                      r"about \$(\d+\.\d+), at most \$(\d+\.\d+)\.", flat(priced))
    assert total and 0 < float(total.group(1)) < float(total.group(2)) and "no known price" not in priced

    unknown = dry_run(tmp_path, openai_mock, "mock-model")
    assert [agent_row(unknown, a)[-2:] for a in ("alice", "bob")] == [["unknown", "unknown"]] * 2
    assert "; cost unknown (no model has a known price" in flat(unknown) and "Total: 12 calls," in flat(unknown)
    assert openai_mock.count == 0
    assert not (tmp_path / "run").exists()


def test_dry_run_counts_model_calls_when_scripted_agents_share_the_table(tmp_path, openai_mock):
    mixed = dry_run(tmp_path, openai_mock, "gpt-4o-mini", scripted=True)
    assert re.search(r"│ public_goods\s+│ 2\s+│ 6\s+│", mixed)  # right: 3 rounds x 2 model seats
    assert "Total: 12 calls" in flat(mixed)  # wrong today: 8 (6 model calls per match / 3 seats x 2 matches x 2 agents)
    assert [agent_row(mixed, a)[3] for a in ("alice", "bob")] == ["6", "6"]


def test_a_missing_key_stops_the_run_before_any_match(tmp_path):
    raw = scenario("nokey", {
        "alice": {"backend": "openai", "model": "gpt-4o-mini", "api_key_env": "ARENA_TEST_UNSET_KEY"},
        "carol": {"backend": "scripted", "strategy": "free_rider"},
    })
    path = write(tmp_path / "s.yaml", raw)
    environment = {k: v for k, v in env().items() if k != "ARENA_TEST_UNSET_KEY"}
    result = arena("run", path, "--quiet", "--run-dir", tmp_path / "run", environment=environment, cwd=tmp_path)
    assert result.returncode == 2
    assert "agent 'alice': set the environment variable ARENA_TEST_UNSET_KEY to its API key" in flat(result.stderr)
    assert calls_table(tmp_path / "run") == [] and "matches finished" not in result.stdout
