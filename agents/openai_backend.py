"""OpenAI Chat Completions, and every server that speaks it (vLLM, llama.cpp's server, Ollama)."""

from __future__ import annotations

import functools
import json
from typing import Any, Literal

import trio
from pydantic import Field

from arena.contract import FatalAgentError

from .llm import CallRefused, ChatRequest, Completion, HostedAgent, HostedConfig, TransientError, token_counts
from .structured import ModeUnavailable, complete_structured, described

# best first; "grammar" is skipped where no grammar can be built (without llama-cpp-python)
PREFERENCE = ("json_schema", "json_object", "grammar", "text")


class OpenAIConfig(HostedConfig):
    backend: str = "openai"
    base_url: str | None = Field(None, description="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key (never the key itself).")
    response_format: Literal["auto", "json_schema", "json_object", "grammar", "text"] = Field(
        "auto",
        description="How to ask for the game's JSON. auto: find what the server takes on the first call (json_schema, "
        "then json_object with the schema, then a GBNF grammar, then plain text with the schema in the prompt) and "
        "keep it for the run; any other value forces that mode, and a server refusing it stops the agent.",
    )


class OpenAIAgent(HostedAgent):
    Config = OpenAIConfig
    backend_name = "openai"
    default_endpoint = "https://api.openai.com/v1"

    def sdk(self):
        import openai

        return openai

    def make_client(self, key: str):
        return self.sdk().AsyncOpenAI(api_key=key, base_url=self.config.base_url, max_retries=0, timeout=self.client_timeout())

    async def complete(self, request: ChatRequest) -> Completion:
        choice = self.config.response_format
        modes = PREFERENCE if choice == "auto" else (choice,)
        return await complete_structured(self, request, modes, self._attempt, _refuses_mode, forced=choice != "auto")

    async def _attempt(self, request: ChatRequest, mode: str | None) -> Completion:
        if mode == "text":
            request = described(request)
        messages: list[dict[str, Any]] = ([{"role": "system", "content": request.system}] if request.system else [])
        messages += request.messages
        body: dict[str, Any] = {"model": self.config.model, "messages": messages, "max_tokens": request.max_tokens,
                                "seed": request.seed}
        for name in ("temperature", "top_p", "stop"):
            if getattr(request, name) is not None:
                body[name] = getattr(request, name)
        if mode == "json_schema":
            body["response_format"] = {"type": "json_schema", "json_schema": {"name": "action", "schema": request.schema_}}
        elif mode == "json_object":  # llama.cpp's servers and others that take a schema beside the type
            body["response_format"] = {"type": "json_object", "schema": request.schema_}
        elif mode == "grammar":  # llama.cpp's servers: GBNF in a field of their own
            if await _grammar_builder() is None:
                if self.config.response_format == "grammar":
                    raise FatalAgentError(f"agent {self.name!r}: response_format grammar needs llama-cpp-python to build "
                                          "the grammar: pip install 'arena-eval[llama]'")
                raise ModeUnavailable("no grammar can be built here without llama-cpp-python")
            body["grammar"] = _gbnf(json.dumps(request.schema_, sort_keys=True))
        answer = await self.send(self.post, path="/chat/completions", body=body)
        try:
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise TransientError("the response held no message") from None
        if not isinstance(text, str):
            raise TransientError("the response's message was not text")
        prompt_tokens, completion_tokens = token_counts(answer, "prompt_tokens", "completion_tokens")
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def _refuses_mode(exc: Exception) -> bool:
    """A server refusing the way the JSON was asked for: a bad request (400, 422), or llama.cpp's
    server, which answers 500 to a response_format it does not know and names the field."""
    if isinstance(exc, CallRefused):
        return True
    return isinstance(exc, TransientError) and any(word in str(exc) for word in ("response_format", "json_schema", "grammar"))


_builder: list = []  # [the converter or None], once looked for


async def _grammar_builder():
    """llama-cpp-python's JSON schema to GBNF converter, or None when it is not installed (imported
    once, in a thread: importing it loads the llama.cpp library)."""
    if not _builder:
        def find():
            try:
                from llama_cpp.llama_grammar import json_schema_to_gbnf
            except Exception:  # not installed, or its native library does not load: no grammar either way
                return None
            return json_schema_to_gbnf

        found = await trio.to_thread.run_sync(find)
        if not _builder:
            _builder.append(found)
    return _builder[0]


@functools.lru_cache(maxsize=64)
def _gbnf(schema: str) -> str:
    return _builder[0](schema)
