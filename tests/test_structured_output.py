"""Structured output where people run models: on the first structured call to an endpoint the
backend finds what the server takes (json_schema, json_object with the schema, a grammar, plain
text with the schema in the prompt), keeps it for the run, shared by the agents on that endpoint,
and says it once (a note the log prints and the run keeps). Proven by the request bodies local
mock servers receive; the real llama.cpp server is in test_llamacpp.py."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
import yaml
from rich.console import Console

from arena.cli.live import RoundLog
from arena.contract.events import ActionTaken, TurnFailed
from arena.games.public_goods import contribution_schema
from arena.results.summary import rank_json
from arena.run.runner import KeepRecords, run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore

from mock_llm import AnthropicMock, OpenAIMock, _tokens

LOCAL = "127.0.0.1,localhost"

# what llama-cpp-python's server (0.3) answers to response_format json_schema, as it was seen
LLAMA_CPP_500 = {"error": {
    "message": "1 validation error:\n  {'type': 'literal_error', 'loc': ('body', 'response_format', 'type'), "
               "'msg': \"Input should be 'text' or 'json_object'\", 'input': 'json_schema'}",
    "type": "internal_server_error", "param": None, "code": None}}


class LlamaCppLikeMock(OpenAIMock):
    """Refuses response_format json_schema the way llama.cpp's Python server does: HTTP 500 naming the field."""

    def answer(self, route, body, handler, garbage=False):
        if ((body or {}).get("response_format") or {}).get("type") == "json_schema":
            return 500, {}, LLAMA_CPP_500, None
        return super().answer(route, body, handler, garbage)


class NoToolsMock(AnthropicMock):
    """An Anthropic look-alike without tools: a 400 naming them to every request that has some."""

    def answer(self, route, body, handler, garbage=False):
        if (body or {}).get("tools"):
            return 400, {}, {"type": "error", "error": {"type": "invalid_request_error",
                                                        "message": "tools: this server does not support tools"}}, None
        return super().answer(route, body, handler, garbage)


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    for variable in ("OPENAI_API_KEY", "ANTHROPIC_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY",
                     "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NO_PROXY", LOCAL)
    monkeypatch.setenv("no_proxy", LOCAL)


@pytest.fixture
def openai_mock():
    with OpenAIMock() as mock:
        yield mock


def model(mock, backend="openai", **extra) -> dict:
    # no response_format: the default is to find out
    return {"backend": backend, "base_url": mock.base_url, "model": "mock-model", "backoff": 0.01, "timeout": 20,
            "retries": 3, **extra}


def scenario(agents: dict, rounds: int = 2, repeats: int = 1, endowment: int = 10, **top) -> dict:
    return {"name": "structured", "seed": 9, "agents": agents,
            "games": [{"game": "public_goods", "params": {"rounds": rounds, "mode": 2, "endowment": endowment}}],
            "tournament": {"repeats": repeats}, "match": {"max_retries": 1}, **top}


async def play(run_dir: Path, raw: dict, observer=None):
    """The run's result, the records of the matches it played (the runner keeps none: they are
    collected as they go by) and its store."""
    parsed = parse_scenario(raw)
    store = RunStore.create_or_resume(run_dir, parsed.name, yaml.safe_dump(raw), parsed.fingerprint())
    keep = KeepRecords(observer)
    result = await run_tournament(parsed, store, keep)
    return result, keep.in_order(result), store


def mode_notes(store, endpoint: str | None = None) -> list[dict]:
    return [n for n in store.read.notes() if n["topic"] == "output mode" and endpoint in (None, n["endpoint"])]


def turns_of(records, agents: set[str]) -> list[ActionTaken]:
    out = []
    for record in records:
        who = {s.label: s.agent for s in record.seats}
        out += [e for e in record.events if isinstance(e, ActionTaken) and who[e.seat] in agents]
    return out


def kind(body: dict) -> str:
    """How a request asked for the JSON: its response_format type, grammar, or text."""
    if "response_format" in body:
        return body["response_format"]["type"]
    return "grammar" if "grammar" in body else "text"


def last_user_text(body: dict) -> str:
    return body["messages"][-1]["content"]


# -- the OpenAI API and its look-alikes -------------------------------------------------------
async def test_a_server_taking_json_schema_gets_it_with_the_games_narrowed_schema_and_says_so_once(tmp_path, openai_mock):
    raw = scenario({"alice": model(openai_mock), "bob": model(openai_mock)}, rounds=3, endowment=7)
    result, records, store = await play(tmp_path / "run", raw)
    try:
        (record,) = records
        assert record.status == "finished"
        schema = contribution_schema(7)
        assert schema["properties"]["coins"]["maximum"] == 7 and schema["properties"]["coins"]["enum"] == list(range(8))
        bodies = openai_mock.bodies()
        assert len(bodies) == 6  # 2 seats x 3 rounds, none asked twice
        for body in bodies:  # every turn: the schema of this match's endowment, closed and strict, for the server to enforce
            assert body["response_format"] == {"type": "json_schema", "json_schema": {
                "name": "action", "schema": {**schema, "additionalProperties": False}, "strict": True}}
            assert "max_tokens" in body and "max_completion_tokens" not in body  # not a reasoning model
            assert "JSON schema" not in last_user_text(body)  # nothing added to the prompt
        turns = turns_of(records, {"alice", "bob"})
        assert len(turns) == 6 and not any(t.defaulted for t in turns)
        (note,) = mode_notes(store)  # two agents on one endpoint: found and said once
        assert note["endpoint"] == openai_mock.base_url and note["agent"] in ("alice", "bob")
        assert "output mode json_schema" in note["text"] and "refused" not in note["text"]
        assert "strict: true" in note["text"] and "not strict" not in note["text"]
        assert rank_json(store.read)["notes"] == store.read.notes()  # the results carry it
    finally:
        store.close()


def test_strict_goes_only_with_a_schema_strict_mode_takes_every_object_closed():
    from arena.agents.openai_backend import strict_problem, strict_schema

    nested = {"type": "object", "required": ["move"], "properties": {"move": {
        "type": "object", "required": ["to"], "properties": {"to": {"type": "array", "items": {
            "type": "object", "required": ["x"], "properties": {"x": {"type": "integer", "minimum": 0}}}}}}}}
    closed = strict_schema(nested)
    assert closed["additionalProperties"] is False
    assert closed["properties"]["move"]["additionalProperties"] is False
    assert closed["properties"]["move"]["properties"]["to"]["items"] == {
        "type": "object", "required": ["x"], "properties": {"x": {"type": "integer", "minimum": 0}},
        "additionalProperties": False}
    assert "additionalProperties" not in nested  # the game's own schema is left as it was
    optional = {"type": "object", "required": ["coins"], "properties": {"coins": {"type": "integer"},
                                                                      "note": {"type": "string"}}}
    assert strict_schema(optional) is None and strict_problem(optional) == "the schema has optional fields (note)"
    unique = {"type": "object", "required": ["picks"], "properties": {"picks": {"type": "array", "uniqueItems": True}}}
    assert strict_problem(unique) == "field picks uses uniqueItems"
    assert strict_problem({**nested, "properties": {"move": {**nested["properties"]["move"], "required": []}}}) == \
        "field move has optional fields (to)"
    assert "extra fields" in strict_problem({**optional, "required": ["coins", "note"], "additionalProperties": True})
    assert strict_problem({"anyOf": [{"type": "object"}]}) == "the schema's root is not an object"


async def test_strict_off_sends_the_schema_as_the_game_gave_it_and_the_note_says_it_is_a_guide(tmp_path, openai_mock):
    raw = scenario({"alice": model(openai_mock, strict=False), "bob": model(openai_mock, strict=False)}, rounds=1)
    result, records, store = await play(tmp_path / "run", raw)
    try:
        assert records[0].status == "finished"
        for body in openai_mock.bodies():
            assert body["response_format"] == {"type": "json_schema", "json_schema": {
                "name": "action", "schema": contribution_schema(10)}}
        (note,) = mode_notes(store)
        assert "output mode json_schema" in note["text"] and "OpenAI's API takes it as a guide only" in note["text"]
        assert "(not strict: strict is off for this agent)" in note["text"]
    finally:
        store.close()


async def test_llama_cpps_500_to_json_schema_moves_to_json_object_once_for_the_endpoint(tmp_path):
    with LlamaCppLikeMock() as server:
        log = io.StringIO()
        raw = scenario({"alice": model(server), "bob": model(server)}, rounds=2, repeats=2)
        result, records, store = await play(tmp_path / "run", raw, RoundLog(Console(file=log, width=300), plain=True))
        try:
            assert all(r.status == "finished" for r in records)
            kinds = [kind(b) for b in server.bodies()]
            # the first call asked for json_schema, was refused, asked again with json_object; every other
            # call (both agents, both matches) went straight to json_object
            assert kinds == ["json_schema"] + ["json_object"] * 8
            assert [r.behaviour for r in server.requests].count("ok") == 9
            for body in server.bodies()[1:]:
                assert body["response_format"] == {"type": "json_object", "schema": contribution_schema(10)}
            turns = turns_of(records, {"alice", "bob"})
            assert len(turns) == 8 and not any(t.defaulted for t in turns)
            calls = list(store.read.calls())
            assert len(calls) == 8 and all(c.error is None and c.retries == 0 for c in calls)  # a refused mode is no retry
            (note,) = mode_notes(store)
            assert "output mode json_object" in note["text"] and "refused: json_schema (500: " in note["text"]
            printed = log.getvalue()
            assert printed.count("output mode json_object") == 1 and "note: " in printed  # said once in the log
        finally:
            store.close()


async def test_a_400_to_json_schema_moves_to_json_object_and_each_endpoint_is_noted_once(tmp_path, openai_mock):
    openai_mock.set_script(lambda count, body: "400" if kind(body) == "json_schema" else "ok")
    with OpenAIMock() as other:  # a second endpoint that takes json_schema
        raw = scenario({"alice": model(openai_mock), "bob": model(openai_mock), "carol": model(other)}, rounds=2)
        result, records, store = await play(tmp_path / "run", raw)
        try:
            (record,) = records
            assert record.status == "finished"
            assert [kind(b) for b in openai_mock.bodies()] == ["json_schema"] + ["json_object"] * 4
            assert [kind(b) for b in other.bodies()] == ["json_schema"] * 2
            assert not any(t.defaulted for t in turns_of(records, {"alice", "bob", "carol"}))
            (first,) = mode_notes(store, openai_mock.base_url)
            (second,) = mode_notes(store, other.base_url)
            assert "output mode json_object" in first["text"] and "refused: json_schema (400: " in first["text"]
            assert second["agent"] == "carol" and "output mode json_schema" in second["text"]
            assert len(mode_notes(store)) == 2
        finally:
            store.close()


async def test_a_server_refusing_both_response_formats_gets_a_grammar(tmp_path, openai_mock):
    pytest.importorskip("llama_cpp.llama_grammar", reason="the grammar is built by llama-cpp-python (the [llama] extra)")
    openai_mock.set_script(lambda count, body: "400" if "response_format" in body else "ok")
    result, records, store = await play(tmp_path / "run", scenario({"alice": model(openai_mock), "bob": model(openai_mock)}))
    try:
        assert records[0].status == "finished"
        assert [kind(b) for b in openai_mock.bodies()] == ["json_schema", "json_object"] + ["grammar"] * 4
        grammar = openai_mock.bodies()[-1]["grammar"]
        # GBNF for the game's object: both fields, the coins limited to 0..10
        assert "root ::=" in grammar and '"\\"coins\\""' in grammar and '"10"' in grammar and '"11"' not in grammar
        assert not any(t.defaulted for t in turns_of(records, {"alice", "bob"}))
        (note,) = mode_notes(store)
        assert "output mode grammar" in note["text"] and "json_schema (400" in note["text"] and "json_object (400" in note["text"]
    finally:
        store.close()


async def test_a_server_refusing_every_constraint_gets_plain_text_with_the_schema_in_the_prompt(tmp_path, openai_mock):
    openai_mock.set_script(lambda count, body: "400" if kind(body) != "text" else "ok")
    result, records, store = await play(tmp_path / "run", scenario({"alice": model(openai_mock), "bob": model(openai_mock)}))
    try:
        assert records[0].status == "finished"
        kinds = [kind(b) for b in openai_mock.bodies()]
        probed = kinds[: kinds.index("text")]
        assert probed in (["json_schema", "json_object", "grammar"], ["json_schema", "json_object"])  # grammar if buildable
        assert kinds[len(probed):] == ["text"] * 4
        schema = json.dumps(contribution_schema(10), ensure_ascii=False, separators=(",", ":"))
        for body in openai_mock.bodies()[len(probed):]:
            prompt = last_user_text(body)
            assert prompt.startswith("Round ") and prompt.endswith("follows this JSON schema: " + schema)
            assert "response_format" not in body and "grammar" not in body
        assert not any(t.defaulted for t in turns_of(records, {"alice", "bob"}))
        (note,) = mode_notes(store)
        assert "output mode text" in note["text"] and "schema is described in the prompt" in note["text"]
    finally:
        store.close()


async def test_a_server_refusing_every_request_is_not_taken_for_one_refusing_a_mode(tmp_path, openai_mock):
    openai_mock.set_script(lambda count, body: "400")
    raw = scenario({"alice": model(openai_mock), "x": {"backend": "scripted", "strategy": "free_rider"}}, rounds=1)
    result, records, store = await play(tmp_path / "run", raw)
    try:
        (record,) = records
        # a request refused in every form is refused for good: the match fails with the reason, it is not scored
        assert record.status == "failed" and "400" in record.error, record.error
        assert not any(isinstance(e, TurnFailed) for e in record.events)
        assert mode_notes(store) == []  # nothing was found, so nothing is said or kept
        kinds = [kind(b) for b in openai_mock.bodies()]
        assert kinds[0] == "json_schema" and kinds[-1] == "text", kinds  # every mode was tried before giving up
    finally:
        store.close()


async def test_a_passing_server_error_is_not_taken_for_a_refusal(tmp_path, openai_mock):
    openai_mock.set_script(["500"])  # one bare 500, then every request answered
    raw = scenario({"alice": model(openai_mock), "x": {"backend": "scripted", "strategy": "free_rider"}}, rounds=2)
    result, records, store = await play(tmp_path / "run", raw)
    try:
        assert records[0].status == "finished"
        # the try after it asks without the schema and is answered, and so is the schema asked once more: the
        # 500 was the server's passing failure, and json_schema stays
        assert [kind(b) for b in openai_mock.bodies()] == ["json_schema", "text", "json_schema", "json_schema"]
        calls = list(store.read.calls())
        assert [c.retries for c in calls] == [1, 0] and all(c.error is None for c in calls)
        answered = openai_mock.answered()
        # the first call paid for two answers, and counts both
        assert calls[0].completion_tokens == sum(_tokens(r.reply) for r in answered[:2])
        (note,) = mode_notes(store)
        assert "output mode json_schema" in note["text"] and "refused" not in note["text"]
    finally:
        store.close()


class Bare500Mock(OpenAIMock):
    """A server that fails every request carrying a schema with a bare 500 that names nothing (as
    llama.cpp's server does when a schema is more than it can take), and answers the rest."""

    def answer(self, route, body, handler, garbage=False):
        if "response_format" in (body or {}) or "grammar" in (body or {}):
            return 500, {}, {"error": {"message": "Internal Server Error", "type": "internal_server_error",
                                       "param": None, "code": None}}, None
        return super().answer(route, body, handler, garbage)


async def test_a_bare_500_to_the_schema_alone_is_a_refused_mode_plain_text_for_the_run_said_once(tmp_path):
    with Bare500Mock() as server:
        raw = scenario({"alice": model(server), "bob": model(server)}, rounds=2)
        result, records, store = await play(tmp_path / "run", raw)
        try:
            (record,) = records
            assert record.status == "finished"
            kinds = [kind(b) for b in server.bodies()]
            # json_schema failed; the next try carries no schema and is answered; json_schema asked once more to
            # be sure fails again: plain text, the schema in the prompt, for every call after
            assert kinds == ["json_schema", "text", "json_schema"] + ["text"] * 3, kinds
            for body in server.bodies()[3:]:
                assert "response_format" not in body and "grammar" not in body
                assert last_user_text(body).endswith(
                    "follows this JSON schema: " + json.dumps(contribution_schema(10), ensure_ascii=False,
                                                              separators=(",", ":")))
            assert not any(t.defaulted for t in turns_of(records, {"alice", "bob"}))
            calls = list(store.read.calls())
            assert len(calls) == 4 and all(c.error is None for c in calls)
            assert sorted(c.retries for c in calls) == [0, 0, 0, 1]  # the bare 500 was tried again, as any failure is
            (note,) = mode_notes(store)
            assert "output mode text" in note["text"] and "nothing is enforced" in note["text"]
            assert "refused: json_schema (500: " in note["text"]
            assert "Internal Server Error; answered without the schema)" in note["text"]
        finally:
            store.close()
        # a rerun of the same scenario (a new run) finds the same, and plays
        server.reset()
        result, records, store = await play(tmp_path / "again", raw)
        try:
            assert records[0].status == "finished"
            assert [kind(b) for b in server.bodies()] == ["json_schema", "text", "json_schema"] + ["text"] * 3
        finally:
            store.close()


def test_arena_run_on_a_server_refusing_the_schema_with_bare_500s_exits_0_and_so_does_a_rerun(tmp_path, run_cli):
    with Bare500Mock() as server:
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(scenario({"alice": model(server), "bob": model(server)}, rounds=2, repeats=2)))
        for run_dir in ("run", "run", "fresh"):  # the run, the same command again, and a new run of the scenario
            done = run_cli("run", path, "--plain", "--run-dir", tmp_path / run_dir, cwd=tmp_path)
            assert done.returncode == 0, done.stdout + done.stderr
        said = " ".join((done.stdout + done.stderr).split())
        assert said.count(f"note: mock-model at {server.base_url}: output mode text") == 1, said  # said once as it played
        assert "json_schema (500: " in said


async def test_a_server_failing_with_and_without_the_schema_is_down_not_refusing(tmp_path):
    """A bare 500 to everything: no mode is concluded, every try is one request (with the schema and
    without, in turn), and the backend is unavailable: the match interrupted, not scored."""
    with OpenAIMock(lambda count, body: "500") as server:
        raw = scenario({"alice": model(server, retries=3), "x": {"backend": "scripted", "strategy": "free_rider"}},
                       rounds=1, match={"max_retries": 1, "outage_wait": 0.2})
        result, records, store = await play(tmp_path / "run", raw)
        try:
            assert {r.status for r in records} == {"interrupted"}
            assert all(r.payoffs == {} and "500" in r.error for r in records)
            calls = list(store.read.calls())
            assert calls and all(c.error for c in calls)
            kinds = [kind(b) for b in server.bodies()]
            assert kinds[:4] == ["json_schema", "text", "json_schema", "text"], kinds
            assert kinds == ["json_schema", "text"] * (len(kinds) // 2) + ["json_schema"] * (len(kinds) % 2)
            assert len(kinds) <= sum(c.retries + 1 for c in calls)  # one request per try
            assert mode_notes(store) == []
        finally:
            store.close()


async def test_a_forced_json_schema_refused_by_a_bare_500_stops_the_agent(tmp_path):
    with Bare500Mock() as server:
        raw = scenario({"alice": model(server, response_format="json_schema"),
                        "x": {"backend": "scripted", "strategy": "free_rider"}}, rounds=2)
        result, records, store = await play(tmp_path / "run", raw)
        try:
            (record,) = records
            assert record.status != "finished" and record.payoffs == {}
            assert "refuses the output mode json_schema" in record.error
            assert [kind(b) for b in server.bodies()] == ["json_schema", "text", "json_schema"]
        finally:
            store.close()


async def test_a_forced_mode_is_used_as_set(tmp_path):
    with LlamaCppLikeMock() as server:
        raw = scenario({"alice": model(server, response_format="json_object"),
                        "x": {"backend": "scripted", "strategy": "free_rider"}}, rounds=2)
        result, records, store = await play(tmp_path / "run", raw)
        try:
            assert records[0].status == "finished"
            assert [kind(b) for b in server.bodies()] == ["json_object"] * 2
            (note,) = mode_notes(store)
            assert "output mode json_object" in note["text"] and "(set in the scenario)" in note["text"]
        finally:
            store.close()


async def test_a_forced_mode_the_server_refuses_stops_the_agent_with_a_clear_message(tmp_path):
    with LlamaCppLikeMock() as server:
        raw = scenario({"alice": model(server, response_format="json_schema"),
                        "x": {"backend": "scripted", "strategy": "free_rider"}}, rounds=2)
        result, records, store = await play(tmp_path / "run", raw)
        try:
            (record,) = records
            assert record.status != "finished" and record.payoffs == {}  # not scored as a move
            assert "agent 'alice'" in record.error and "refuses the output mode json_schema" in record.error
            assert "response_format" in record.error
            # asked once as set, once in plain text to be sure it is the mode the server refuses; then stopped
            assert [kind(b) for b in server.bodies()] == ["json_schema", "text"]
            (note,) = mode_notes(store)
            assert "refuses the output mode json_schema" in note["text"]
        finally:
            store.close()


# -- Anthropic ----------------------------------------------------------------------------------
async def test_anthropic_uses_a_forced_tool_and_says_so(tmp_path):
    with AnthropicMock() as server:
        raw = scenario({"ann": model(server, "anthropic"), "ben": model(server, "anthropic")})
        result, records, store = await play(tmp_path / "run", raw)
        try:
            assert records[0].status == "finished"
            for body in server.bodies():
                assert body["tool_choice"] == {"type": "tool", "name": "act"}
                assert body["tools"][0]["input_schema"] == contribution_schema(10)
            (note,) = mode_notes(store)
            assert "output mode tool" in note["text"]
        finally:
            store.close()


async def test_anthropic_look_alike_refusing_tools_gets_plain_text_with_the_schema(tmp_path):
    with NoToolsMock() as server:
        raw = scenario({"ann": model(server, "anthropic"), "ben": model(server, "anthropic")})
        result, records, store = await play(tmp_path / "run", raw)
        try:
            assert records[0].status == "finished"
            bodies = server.bodies()
            assert ["tools" in b for b in bodies] == [True] + [False] * 4
            for body in bodies[1:]:
                assert "follows this JSON schema" in last_user_text(body)
                roles = [m["role"] for m in body["messages"]]
                assert all(a != b for a, b in zip(roles, roles[1:]))  # still alternating
            assert not any(t.defaulted for t in turns_of(records, {"ann", "ben"}))
            (note,) = mode_notes(store)
            assert "output mode text" in note["text"] and "refused: tool (400: " in note["text"]
        finally:
            store.close()


async def test_an_anthropic_400_not_about_tools_fails_the_match_and_keeps_the_tool(tmp_path):
    with AnthropicMock(["400"]) as server:
        raw = scenario({"ann": model(server, "anthropic"), "x": {"backend": "scripted", "strategy": "free_rider"}})
        result, records, store = await play(tmp_path / "run", raw)
        try:
            (record,) = records
            # refused for good: the match fails with the reason, and the tool is not given up for it
            assert record.status == "failed" and "400" in record.error, record.error
            assert len(server.bodies()) == 1 and "tools" in server.bodies()[0]
            assert mode_notes(store) == []
        finally:
            store.close()


async def test_arena_rank_json_shows_the_mode(tmp_path, openai_mock, run_cli):
    openai_mock.set_script(lambda count, body: "400" if kind(body) == "json_schema" else "ok")
    result, records, store = await play(tmp_path / "run", scenario({"alice": model(openai_mock), "bob": model(openai_mock)}))
    store.close()
    shown = run_cli("rank", tmp_path / "run", "--json", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    (note,) = [n for n in json.loads(shown.stdout)["notes"] if n["topic"] == "output mode"]
    assert note["endpoint"] == openai_mock.base_url and "output mode json_object" in note["text"]
    table = run_cli("rank", tmp_path / "run", cwd=tmp_path, env={**os.environ, "COLUMNS": "250"})
    assert table.returncode == 0, table.stderr
    assert f"note (alice): mock-model at {openai_mock.base_url}: output mode json_object" in " ".join(table.stdout.split()) \
        or f"note (bob): mock-model at {openai_mock.base_url}: output mode json_object" in " ".join(table.stdout.split())
