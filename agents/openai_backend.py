"""OpenAI Chat Completions, and every server that speaks it (vLLM, llama.cpp's server, Ollama)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from .llm import CallRefused, ChatRequest, Completion, HostedAgent, HostedConfig, TransientError


class OpenAIConfig(HostedConfig):
    backend: str = "openai"
    base_url: str | None = Field(None, description="An OpenAI-compatible server, e.g. http://127.0.0.1:8000/v1.")
    api_key_env: str = Field("OPENAI_API_KEY", description="Environment variable holding the key (never the key itself).")
    response_format: Literal["json_schema", "json_object"] = Field(
        "json_schema",
        description="How to ask for the game's JSON: json_schema (OpenAI, vLLM) or json_object with a schema (llama.cpp's server).",
    )


class OpenAIAgent(HostedAgent):
    Config = OpenAIConfig
    backend_name = "openai"
    default_endpoint = "https://api.openai.com/v1"

    def __init__(self, name: str, config: OpenAIConfig, services=None):
        super().__init__(name, config, services)
        self._schema_refused = False  # set when a server rejects structured output; then we parse text

    def sdk(self):
        import openai

        return openai

    def make_client(self, key: str):
        return self.sdk().AsyncOpenAI(api_key=key, base_url=self.config.base_url, max_retries=0, timeout=self.client_timeout())

    async def complete(self, request: ChatRequest) -> Completion:
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
            response = await self.send(self.client.chat.completions.create, model=self.config.model, messages=messages, **options)
        except (CallRefused, TransientError) as exc:
            # llama.cpp's server answers 500 to a format it lacks; others 400 or 422
            if "response_format" in options and (isinstance(exc, CallRefused) or "response_format" in str(exc)):
                self._schema_refused = True  # ask again, for plain text, from now on
                return await self.complete(request)
            raise
        try:
            text = response.choices[0].message.content or ""
        except (AttributeError, IndexError, TypeError):
            raise TransientError("the response held no message") from None
        usage = getattr(response, "usage", None)
        return Completion(text=text, prompt_tokens=getattr(usage, "prompt_tokens", None),
                          completion_tokens=getattr(usage, "completion_tokens", None))
