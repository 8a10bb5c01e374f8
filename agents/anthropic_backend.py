"""Anthropic's Messages API."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field, ValidationInfo, field_validator

from arena.contract import Turn

from .llm import CallRefused, ChatRequest, Completion, HostedAgent, HostedConfig, TransientError, token_counts
from .structured import complete_structured, described

# What an empty reply of the agent's own shows as in its history: the Messages API refuses an assistant
# turn without text (400), and dropping the turn would show the model a history where it never answered.
EMPTY_REPLY = "(empty reply)"


class AnthropicConfig(HostedConfig):
    backend: str = "anthropic"
    api_key_env: str = Field("ANTHROPIC_API_KEY", description="Environment variable holding the key (never the key itself).")
    temperature: float | None = Field(None, description="Not taken: Anthropic's API (version 2026-10-21) refuses it.")
    top_p: float | None = Field(None, description="Not taken: Anthropic's API (version 2026-10-21) refuses it.")

    @field_validator("temperature", "top_p")
    @classmethod
    def _no_sampling_settings(cls, value: float | None, info: ValidationInfo) -> float | None:
        # The anthropic SDK 2 speaks API version 2026-10-21, which refuses these with a 400 at every
        # request, even at their defaults: better said once, before a run starts, than per call.
        if value is not None:
            raise ValueError(f"Anthropic's Messages API (version 2026-10-21, the one the anthropic SDK 2 speaks) takes "
                             f"no {info.field_name}; remove it from this agent")
        return value


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

    def chat_request(self, turn: Turn) -> ChatRequest:
        request = super().chat_request(turn)
        if not any(m["role"] == "assistant" and not m["content"].strip() for m in request.messages):
            return request
        messages = [{**m, "content": EMPTY_REPLY} if m["role"] == "assistant" and not m["content"].strip() else m
                    for m in request.messages]
        return request.model_copy(update={"messages": messages})  # in the request, so the cache key is what is sent

    async def complete(self, request: ChatRequest) -> Completion:
        return await complete_structured(self, request, ("tool", "text"), self._attempt, _refuses_tools)

    async def _attempt(self, request: ChatRequest, mode: str | None) -> Completion:
        if mode == "text":
            request = described(request)
        body: dict[str, Any] = {"model": self.config.model, "max_tokens": request.max_tokens, "messages": request.messages}
        if request.system:
            body["system"] = request.system
        if request.stop:
            body["stop_sequences"] = request.stop
        if mode == "tool":
            body["tools"] = [{"name": "act", "description": "Your move in the game.", "input_schema": request.schema_}]
            body["tool_choice"] = {"type": "tool", "name": "act"}
        answer = await self.send(self.post, path="/v1/messages", body=body)
        blocks = answer.get("content") if isinstance(answer, dict) else None
        if not isinstance(blocks, list):
            raise TransientError("the response held no content")
        parts = []
        for block in blocks:
            kind = block.get("type") if isinstance(block, dict) else None
            if kind == "text" and isinstance(block.get("text"), str):
                parts.append(block["text"])
            elif kind == "tool_use":
                parts.append(json.dumps(block.get("input"), ensure_ascii=False))
        prompt_tokens, completion_tokens = token_counts(answer, "input_tokens", "output_tokens")
        return Completion(text="\n".join(parts), prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)


def _refuses_tools(exc: Exception) -> bool:
    """Anthropic's API takes forced tools, so only a bad request that names them (a proxy or look-alike
    that lacks them) moves to plain text; any other 400 fails the call as it is."""
    return isinstance(exc, CallRefused) and "tool" in str(exc).lower()
