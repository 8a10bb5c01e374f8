"""OpenAI Chat Completions, and every server that speaks it (vLLM, llama.cpp's server, Ollama)."""

from __future__ import annotations

import functools
import json
import re
from typing import Any, Literal

import trio
from pydantic import Field

from arena.contract import FatalAgentError, Turn

from .llamacpp_backend import system_in_first_turn
from .llm import CallRefused, ChatRequest, Completion, HostedAgent, HostedConfig, TransientError, token_counts
from .structured import WHAT, ModeUnavailable, complete_structured, described

STRICT = ("response_format json_schema with the game's schema and strict: true: OpenAI's API, and servers that build a "
          "grammar from the schema (vLLM, llama.cpp), hold every reply to it")

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
    strict: bool = Field(
        True,
        description="Send strict: true with response_format json_schema whenever the game's schema meets strict mode's "
        "rules (every field required; Arena adds additionalProperties: false), so that a server honouring strict "
        "(OpenAI's API) holds every reply to it. false: never send it.",
    )
    max_tokens_field: Literal["auto", "max_tokens", "max_completion_tokens"] = Field(
        "auto",
        description="The request field that carries max_tokens. auto: max_completion_tokens for OpenAI's reasoning "
        "models (o1, o3, o4, gpt-5 families), which refuse max_tokens, and for any model whose server refuses "
        "max_tokens naming max_completion_tokens; max_tokens otherwise, as other servers take it.",
    )
    system_in_first_user: bool = Field(
        False,
        description="Put the system text and persona at the top of the first user turn instead of a system message: "
        "for a server whose chat format drops system messages, as llama-cpp-python's server does with "
        "--chat_format gemma (the layout Gemma's own template uses).",
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

    def __init__(self, name: str, config: OpenAIConfig, services=None):
        super().__init__(name, config, services)
        # found on a refusal: this server wants max_completion_tokens for this model
        self._completion_field = config.max_tokens_field == "max_completion_tokens" or (
            config.max_tokens_field == "auto" and reasoning_model(config.model))

    def chat_request(self, turn: Turn) -> ChatRequest:
        request = super().chat_request(turn)
        if self.config.system_in_first_user and request.system:
            # here, not when the body is built: the cache key is the request, and it must be what is sent
            return request.model_copy(update={"system": None,
                                              "messages": system_in_first_turn(request.system, request.messages)})
        return request

    async def complete(self, request: ChatRequest) -> Completion:
        choice = self.config.response_format
        modes = PREFERENCE if choice == "auto" else (choice,)
        return await complete_structured(self, request, modes, self._attempt, _refuses_mode, forced=choice != "auto",
                                         describe=self._describe)

    def _strict(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        return strict_schema(schema) if self.config.strict else None

    def _describe(self, mode: str, request: ChatRequest) -> str:
        if mode != "json_schema":
            return WHAT[mode]
        if self._strict(request.schema_) is not None:
            return STRICT
        why = "strict is off for this agent" if not self.config.strict else strict_problem(request.schema_)
        return WHAT[mode] + f" (not strict: {why})"

    async def _attempt(self, request: ChatRequest, mode: str | None) -> Completion:
        if mode == "text":
            request = described(request)
        messages: list[dict[str, Any]] = ([{"role": "system", "content": request.system}] if request.system else [])
        messages += request.messages
        limit = "max_completion_tokens" if self._completion_field else "max_tokens"
        body: dict[str, Any] = {"model": self.config.model, "messages": messages, limit: request.max_tokens,
                                "seed": request.seed}
        for name in ("temperature", "top_p", "stop"):
            if getattr(request, name) is not None:
                body[name] = getattr(request, name)
        if mode == "json_schema":
            strict = self._strict(request.schema_)
            spec = {"name": "action", "schema": strict, "strict": True} if strict else {"name": "action", "schema": request.schema_}
            body["response_format"] = {"type": "json_schema", "json_schema": spec}
        elif mode == "json_object":  # llama.cpp's servers and others that take a schema beside the type
            body["response_format"] = {"type": "json_object", "schema": request.schema_}
        elif mode == "grammar":  # llama.cpp's servers: GBNF in a field of their own
            if await _grammar_builder() is None:
                if self.config.response_format == "grammar":
                    raise FatalAgentError(f"agent {self.name!r}: response_format grammar needs llama-cpp-python to build "
                                          "the grammar: pip install 'arena-eval[llama]'")
                raise ModeUnavailable("no grammar can be built here without llama-cpp-python")
            body["grammar"] = _gbnf(json.dumps(request.schema_, sort_keys=True))
        try:
            answer = await self.send(self.post, path="/chat/completions", body=body)
        except CallRefused as exc:
            if not (limit == "max_tokens" and self.config.max_tokens_field == "auto" and "max_completion_tokens" in str(exc)):
                raise
            # the server wants the other field (a reasoning model by another name): said once, kept for the agent
            self._completion_field = True
            self.services.note(self.name, self.endpoint(), "token limit",
                               f"{self.config.model} at {self.endpoint()} refused max_tokens ({exc}); max_completion_tokens "
                               "is sent instead")
            body["max_completion_tokens"] = body.pop("max_tokens")
            answer = await self.send(self.post, path="/chat/completions", body=body)
        try:
            text = answer["choices"][0]["message"]["content"] or ""
        except (KeyError, IndexError, TypeError):
            raise TransientError("the response held no message") from None
        if not isinstance(text, str):
            raise TransientError("the response's message was not text")
        prompt_tokens, completion_tokens = token_counts(answer, "prompt_tokens", "completion_tokens")
        return Completion(text=text, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


# OpenAI's reasoning models take max_completion_tokens and refuse max_tokens: o1, o3, o4-mini, gpt-5 and
# their dated or sized variants, also behind a provider's prefix ("openai/o3") or as a fine-tune ("ft:o4-mini:...")
_REASONING = re.compile(r"(o\d+|gpt-5)([-.:_]|$)")


def reasoning_model(model: str) -> bool:
    return bool(_REASONING.match(model.lower().rsplit("/", 1)[-1].removeprefix("ft:")))


# what OpenAI's strict mode does not take (its documented subset of JSON Schema)
_NOT_STRICT = ("allOf", "not", "if", "then", "else", "dependentRequired", "dependentSchemas", "patternProperties",
               "unevaluatedProperties", "propertyNames", "minProperties", "maxProperties", "unevaluatedItems",
               "contains", "minContains", "maxContains", "uniqueItems")


def strict_problem(schema: Any) -> str | None:
    """Why ``schema`` cannot be sent with strict: true, or None when it can (once ``strict_schema`` adds
    additionalProperties: false, which a game's parser, taking only the fields it declares, loses nothing by)."""
    if not isinstance(schema, dict) or schema.get("type") != "object":
        return "the schema's root is not an object"

    def walk(node: Any, path: str) -> str | None:
        if isinstance(node, list):
            return next((p for p in (walk(n, path) for n in node) if p), None)
        if not isinstance(node, dict):
            return None
        where = f"field {path}" if path else "the schema"
        for word in _NOT_STRICT:
            if word in node:
                return f"{where} uses {word}"
        if "properties" in node or node.get("type") == "object":
            optional = sorted(set(node.get("properties", {})) - set(node.get("required", [])))
            if optional:
                return f"{where} has optional fields ({', '.join(optional)})"
            if node.get("additionalProperties", False) is not False:
                return f"{where} allows extra fields"
        for key, value in node.items():
            if key in ("properties", "$defs", "definitions"):
                found = next((p for p in (walk(v, f"{path}.{k}".lstrip(".")) for k, v in value.items()) if p), None)
            elif key in ("items", "anyOf", "prefixItems"):
                found = walk(value, path)
            else:
                continue
            if found:
                return found
        return None

    return walk(schema, "")


def strict_schema(schema: Any) -> dict[str, Any] | None:
    """``schema`` as strict mode takes it (every object closed to extra fields), or None when it cannot be."""
    if strict_problem(schema) is not None:
        return None

    def close(node: Any) -> Any:
        if isinstance(node, list):
            return [close(n) for n in node]
        if not isinstance(node, dict):
            return node
        out = {k: (close(v) if k in ("items", "anyOf", "prefixItems") else
                   {n: close(s) for n, s in v.items()} if k in ("properties", "$defs", "definitions") else v)
               for k, v in node.items()}
        if "properties" in node or node.get("type") == "object":
            out["additionalProperties"] = False
        return out

    return close(schema)


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
