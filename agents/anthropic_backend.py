"""Anthropic's Messages API."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from .llm import CallRefused, ChatRequest, Completion, HostedAgent, HostedConfig
from .structured import complete_structured, described


class AnthropicConfig(HostedConfig):
    backend: str = "anthropic"
    api_key_env: str = Field("ANTHROPIC_API_KEY", description="Environment variable holding the key (never the key itself).")


class AnthropicAgent(HostedAgent):
    Config = AnthropicConfig
    backend_name = "anthropic"
    default_endpoint = "https://api.anthropic.com"
    merge_roles = True  # the Messages API wants user and assistant turns to alternate, user first

    def sdk(self):
        import anthropic

        return anthropic

    def make_client(self, key: str):
        return self.sdk().AsyncAnthropic(api_key=key, base_url=self.config.base_url, max_retries=0, timeout=self.client_timeout())

    async def complete(self, request: ChatRequest) -> Completion:
        return await complete_structured(self, request, ("tool", "text"), self._attempt, _refuses_tools)

    async def _attempt(self, request: ChatRequest, mode: str | None) -> Completion:
        if mode == "text":
            request = described(request)
        options: dict[str, Any] = {}
        if request.system:
            options["system"] = request.system
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.top_p is not None:
            options["top_p"] = request.top_p
        if request.stop:
            options["stop_sequences"] = request.stop
        if mode == "tool":
            options["tools"] = [{"name": "act", "description": "Your move in the game.", "input_schema": request.schema_}]
            options["tool_choice"] = {"type": "tool", "name": "act"}
        response = await self.send(self.client.messages.create, model=self.config.model, max_tokens=request.max_tokens,
                                   messages=request.messages, **options)
        parts = []
        for block in getattr(response, "content", None) or []:
            if block.type == "text":
                parts.append(block.text)
            elif block.type == "tool_use":
                parts.append(json.dumps(block.input, ensure_ascii=False))
        usage = getattr(response, "usage", None)
        return Completion(text="\n".join(parts), prompt_tokens=getattr(usage, "input_tokens", None),
                          completion_tokens=getattr(usage, "output_tokens", None))


def _refuses_tools(exc: Exception) -> bool:
    """Anthropic's API takes forced tools, so only a bad request that names them (a proxy or look-alike
    that lacks them) moves to plain text; any other 400 fails the call as it is."""
    return isinstance(exc, CallRefused) and "tool" in str(exc).lower()
