"""Anthropic's Messages API."""

from __future__ import annotations

import json
from typing import Any

from pydantic import Field

from arena.agent import FatalAgentError

from .llm import CallRefused, ChatRequest, Completion, LLMAgent, LLMConfig, TransientError, retry_after_seconds


class AnthropicConfig(LLMConfig):
    backend: str = "anthropic"
    base_url: str | None = Field(None, description="Another endpoint speaking the Messages API.")
    api_key_env: str = Field("ANTHROPIC_API_KEY", description="Environment variable holding the key (never the key itself).")


class AnthropicAgent(LLMAgent):
    Config = AnthropicConfig
    backend_name = "anthropic"
    merge_roles = True  # the Messages API wants user and assistant turns to alternate, user first

    def __init__(self, name: str, config: AnthropicConfig):
        super().__init__(name, config)
        self._client = None

    def endpoint(self) -> str:
        return self.config.base_url or "https://api.anthropic.com"

    def key_variable(self) -> str | None:
        return self.config.api_key_env

    def _get_client(self):
        if self._client is None:
            import anthropic

            key = self.api_key(required=self.config.base_url is None) or "no-key"
            self._client = anthropic.AsyncAnthropic(api_key=key, base_url=self.config.base_url, max_retries=0,
                                                    timeout=self.config.timeout)
        return self._client

    async def prepare(self) -> None:
        self._get_client()

    async def complete(self, request: ChatRequest) -> Completion:
        import anthropic

        client = self._get_client()
        options: dict[str, Any] = {}
        if request.system:
            options["system"] = request.system
        if request.temperature is not None:
            options["temperature"] = request.temperature
        if request.top_p is not None:
            options["top_p"] = request.top_p
        if request.stop:
            options["stop_sequences"] = request.stop
        if request.schema_ is not None:  # structured output through a single forced tool
            options["tools"] = [{"name": "act", "description": "Your move in the game.", "input_schema": request.schema_}]
            options["tool_choice"] = {"type": "tool", "name": "act"}
        try:
            response = await client.messages.create(model=self.config.model, max_tokens=request.max_tokens,
                                                    messages=request.messages, **options)
        except (anthropic.AuthenticationError, anthropic.PermissionDeniedError) as exc:
            raise FatalAgentError(
                f"agent {self.name!r}: the server refused the API key ({exc.status_code}); "
                f"check the environment variable {self.config.api_key_env}"
            ) from None
        except anthropic.NotFoundError as exc:
            raise FatalAgentError(f"agent {self.name!r}: model {self.config.model!r} or its endpoint was not found "
                                  f"({exc.status_code}): {self.redact(exc.message)}") from None
        except (anthropic.BadRequestError, anthropic.UnprocessableEntityError) as exc:
            raise CallRefused(f"{exc.status_code}: {self.redact(exc.message)}") from None
        except anthropic.APIStatusError as exc:  # 408, 409, 429, 5xx, 529 overloaded
            raise TransientError(f"{exc.status_code}: {self.redact(exc.message)}", retry_after_seconds(exc.response.headers)) from None
        except (anthropic.APIConnectionError, anthropic.APIResponseValidationError) as exc:
            raise TransientError(f"{type(exc).__name__}: {self.redact(str(exc))}") from None
        except json.JSONDecodeError:  # HTTP 200 with a body that is not JSON: a broken proxy or server
            raise TransientError("the response was not valid JSON") from None
        parts = []
        for block in getattr(response, "content", None) or []:
            if block.type == "text":
                parts.append(block.text)
            elif block.type == "tool_use":
                parts.append(json.dumps(block.input, ensure_ascii=False))
        usage = getattr(response, "usage", None)
        return Completion(text="\n".join(parts), prompt_tokens=getattr(usage, "input_tokens", None),
                          completion_tokens=getattr(usage, "output_tokens", None))

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None
