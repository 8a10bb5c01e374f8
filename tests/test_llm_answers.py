"""What the OpenAI and Anthropic backends make of the JSON a server answers, and what they send.

The backends post plain JSON through the SDK client's ``post`` and read the answer themselves (the
SDKs' typed layer cost more CPU per request than a match). These tests give the real SDK clients a
transport that answers from the test (``httpx2.MockTransport``, no socket), so each answer is
exactly the JSON a server could send: well formed, missing its parts, or of the wrong types.
"""

from __future__ import annotations

import json

import httpx2
import pytest

from arena.agents.anthropic_backend import AnthropicAgent, AnthropicConfig
from arena.agents.llm import ChatRequest, TransientError
from arena.agents.openai_backend import OpenAIAgent, OpenAIConfig
from helpers import arena_offline

REQUEST = ChatRequest(system="Be brief.", messages=[{"role": "user", "content": "Your move?"}], temperature=0.5,
                      max_tokens=32, top_p=None, seed=7, stop=None)
SCHEMA = {"type": "object", "properties": {"coins": {"type": "integer"}}, "required": ["coins"]}


def _agent(kind: str, answer, sent: list):
    """An agent of ``kind`` whose client's every request is recorded in ``sent`` and answered with ``answer``
    (a dict or list sent as JSON, bytes as they are)."""
    def handle(request: httpx2.Request) -> httpx2.Response:
        sent.append((request.url.path, json.loads(request.content), dict(request.headers)))
        body = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        return httpx2.Response(200, content=body, headers={"content-type": "application/json"})

    http = httpx2.AsyncClient(transport=httpx2.MockTransport(handle))
    if kind == "openai":
        agent = OpenAIAgent("olive", OpenAIConfig(backend="openai", model="m-1", base_url="http://127.0.0.1:9/v1"))
        agent._client = agent.sdk().AsyncOpenAI(api_key="sk-test-not-real", base_url="http://127.0.0.1:9/v1",
                                                max_retries=0, http_client=http)
    else:
        agent = AnthropicAgent("andy", AnthropicConfig(backend="anthropic", model="m-2", base_url="http://127.0.0.1:9"))
        agent._client = agent.sdk().AsyncAnthropic(api_key="sk-ant-test-not-real", base_url="http://127.0.0.1:9",
                                                   max_retries=0, http_client=http)
    return agent


def openai_answer(content, usage=None) -> dict:
    return {"id": "c-1", "object": "chat.completion", "created": 1, "model": "m-1",
            "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
            "usage": usage if usage is not None else {"prompt_tokens": 11, "completion_tokens": 3, "total_tokens": 14}}


async def test_openai_sends_the_request_as_the_api_takes_it_and_reads_the_text_and_the_tokens():
    sent: list = []
    agent = _agent("openai", openai_answer('{"coins": 4}'), sent)
    try:
        completion = await agent._attempt(REQUEST.model_copy(update={"schema_": SCHEMA}), "json_schema")
    finally:
        await agent.aclose()
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ('{"coins": 4}', 11, 3)
    ((path, body, headers),) = sent
    assert path == "/v1/chat/completions"
    assert body == {"model": "m-1", "max_tokens": 32, "seed": 7, "temperature": 0.5,
                    "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Your move?"}],
                    "response_format": {"type": "json_schema", "json_schema": {
                        "name": "action", "schema": {**SCHEMA, "additionalProperties": False}, "strict": True}}}
    assert headers["authorization"] == "Bearer sk-test-not-real" and headers["content-type"] == "application/json"
    assert all(value != "NOT_GIVEN" for value in headers.values()), headers


@pytest.mark.parametrize("answer, why", [
    ({"choices": []}, "no message"),
    ({"id": "c-1"}, "no message"),
    ([1, 2], "no message"),
    (openai_answer({"text": "4"}), "not text"),
])
async def test_an_openai_answer_without_a_message_is_worth_another_try(answer, why):
    agent = _agent("openai", answer, [])
    try:
        with pytest.raises(TransientError, match=why):
            await agent._attempt(REQUEST, "text")
    finally:
        await agent.aclose()


async def test_an_openai_message_of_null_is_an_empty_reply_and_odd_token_counts_are_unknown():
    agent = _agent("openai", openai_answer(None, usage={"prompt_tokens": "11", "completion_tokens": -1}), [])
    try:
        completion = await agent._attempt(REQUEST, "text")
    finally:
        await agent.aclose()
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("", None, None)


async def test_a_body_that_is_not_json_is_worth_another_try():
    for kind in ("openai", "anthropic"):
        agent = _agent(kind, b'{"id": "broken', [])
        try:
            with pytest.raises(TransientError, match="not valid JSON"):
                await agent.send(agent.post, path="/anything", body={})
        finally:
            await agent.aclose()


async def test_anthropic_sends_the_forced_tool_and_reads_text_and_tool_input_in_order():
    sent: list = []
    answer = {"id": "m", "type": "message", "role": "assistant", "model": "m-2", "stop_reason": "tool_use",
              "content": [{"type": "text", "text": "Here goes."}, {"type": "tool_use", "id": "t", "name": "act",
                                                                     "input": {"coins": 4, "note": "café"}}],
              "usage": {"input_tokens": 21, "output_tokens": 5}}
    agent = _agent("anthropic", answer, sent)
    try:
        completion = await agent._attempt(REQUEST.model_copy(update={"schema_": SCHEMA}), "tool")
    finally:
        await agent.aclose()
    assert completion.text == 'Here goes.\n{"coins": 4, "note": "café"}'
    assert (completion.prompt_tokens, completion.completion_tokens) == (21, 5)
    ((path, body, headers),) = sent
    assert path == "/v1/messages" and headers["authorization"] == "Bearer sk-ant-test-not-real"
    assert headers["anthropic-version"] and all(value != "NOT_GIVEN" for value in headers.values()), headers
    assert body == {"model": "m-2", "max_tokens": 32, "system": "Be brief.",  # no sampling settings: see below
                    "messages": [{"role": "user", "content": "Your move?"}],
                    "tools": [{"name": "act", "description": "Your move in the game.", "input_schema": SCHEMA}],
                    "tool_choice": {"type": "tool", "name": "act"}}


@pytest.mark.parametrize("answer", [{"id": "m"}, {"content": "Here goes."}, [1]])
async def test_an_anthropic_answer_without_content_blocks_is_worth_another_try(answer):
    agent = _agent("anthropic", answer, [])
    try:
        with pytest.raises(TransientError, match="no content"):
            await agent._attempt(REQUEST, "text")
    finally:
        await agent.aclose()


async def test_anthropic_blocks_of_other_kinds_or_shapes_add_nothing():
    answer = {"content": [{"type": "thinking", "thinking": "hmm"}, {"type": "text", "text": 5}, "stray",
                          {"type": "text", "text": "4 coins."}], "usage": {"input_tokens": 3}}
    agent = _agent("anthropic", answer, [])
    try:
        completion = await agent._attempt(REQUEST, "text")
    finally:
        await agent.aclose()
    assert (completion.text, completion.prompt_tokens, completion.completion_tokens) == ("4 coins.", 3, None)


def test_an_anthropic_agent_with_sampling_settings_is_refused_before_the_run(tmp_path):
    """The API version the anthropic SDK 2 speaks refuses temperature and top_p at every request."""
    for setting in ("temperature: 0.7", "top_p: 0.9"):
        path = tmp_path / "claude.yaml"
        path.write_text("name: claude\nagents:\n  claude: {backend: anthropic, model: claude-x, %s}\n"
                        "  bob: {backend: scripted, strategy: free_rider}\n"
                        "games:\n  - game: public_goods\n    params: {rounds: 1}\n" % setting)
        result = arena_offline("validate", path, cwd=tmp_path)
        name = setting.split(":")[0]
        assert result.returncode == 2, result.stdout + result.stderr
        assert f"claude.yaml: agents.claude.{name}: " in result.stderr and f"takes no {name}; remove it" in result.stderr


def test_arena_agents_says_the_anthropic_backend_takes_no_sampling_settings(tmp_path):
    result = arena_offline("agents", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (anthropic,) = [b for b in json.loads(result.stdout) if b["name"] == "anthropic"]
    described = {p["name"]: p.get("description") or "" for p in anthropic["params"]}
    assert described["temperature"].startswith("Not taken") and described["top_p"].startswith("Not taken")
