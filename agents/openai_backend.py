"""OpenAI Chat Completions, and every server that speaks it (vLLM, llama.cpp's server, Ollama)."""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import Field

from arena.agent import FatalAgentError

from .llm import CallRefused, ChatRequest, Completion, LLMAgent, LLMConfig, TransientError, retry_after_seconds


class OpenAIConfig(LLMConfig):
    backend: str = "openai"
    base_url: str | None = Field(None, description="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key (never the key itself).")
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="How to ask for the game's JSON: json_schema (OpenAI, vLLM) or json_object with a schema (llama.cpp's server).",
    )


class OpenAIAgent(LLMAgent):
    Config = OpenAIConfig
    backend_name = "openai"

    def __init__(self, name: str, config: OpenAIConfig):
        super().__init__(name, config)
        self._client = None
        self._schema_refused = False  # set when a server rejects structured output; then we parse text

    def endpoint(self) -> str:
        return self.config.base_url or "https://api.openai.com/v1"

    def key_variable(self) -> str | None:
        return self.config.api_key_env

    def _get_client(self):
        if self._client is None:
            import openai

            # A local server needs no key; the official API does.
            key = self.api_key(required=self.config.base_url is None) or "no-key"
            self._client = openai.AsyncOpenAI(api_key=key, base_url=self.config.base_url, max_retries=0,
                                              timeout=self.config.timeout)
        return self._client

    async def prepare(self) -> None:
        self._get_client()

    async def complete(self, request: ChatRequest) -> Completion:
        import openai

        client = self._get_client()
        messages: list[dict[str, Any]] = ([{"role": "system", "content": request.system}] if request.system else [])
        messages += request.messages
        options: dict[str, Any] = {"max_tokens": request.max_tokens, "seed": request.seed}
        for name in ("temperature", "top_p", "stop"):
            if getattr(request, name) is not None:
                options[name] = getattr(request, name)
        if request.schema_ is not None and not self._schema_refused:
            if self.config.response_format == "json_schema":
                options["response_format"] = {"type": "json_schema", "json_schema": {"name": "action", "schema": request.schema_}}
            else:
                options["response_format"] = {"type": "json_object", "schema": request.schema_}
        try:
            response = await client.chat.completions.create(model=self.config.model, messages=messages, **options)
        except (openai.AuthenticationError, openai.PermissionDeniedError) as exc:
            raise FatalAgentError(
                f"agent {self.name!r}: the server refused the API key ({exc.status_code}); "
                f"check the environment variable {self.config.api_key_env}"
            ) from None
        except openai.NotFoundError as exc:
            raise FatalAgentError(f"agent {self.name!r}: model {self.config.model!r} or its endpoint was not found "
                                  f"({exc.status_code}): {self.redact(exc.message)}") from None
        except openai.APIStatusError as exc:
            if "response_format" in options and (exc.status_code in (400, 422) or "response_format" in str(exc.message)):
                self._schema_refused = True  # this server has no such structured output: ask again, for plain text
                return await self.complete(request)
            if exc.status_code in (400, 422):
                raise CallRefused(f"{exc.status_code}: {self.redact(exc.message)}") from None
            raise TransientError(f"{exc.status_code}: {self.redact(exc.message)}", retry_after_seconds(exc.response.headers)) from None
        except (openai.APIConnectionError, openai.APIResponseValidationError) as exc:
            raise TransientError(f"{type(exc).__name__}: {self.redact(str(exc))}") from None
        except json.JSONDecodeError:  # HTTP 200 with a body that is not JSON: a broken proxy or server
            raise TransientError("the response was not valid JSON") from None
        try:
            text = response.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise TransientError("the response held no message") from None
        usage = getattr(response, "usage", None)
        return Completion(text=text, prompt_tokens=getattr(usage, "prompt_tokens", None),
                          completion_tokens=getattr(usage, "completion_tokens", None))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
