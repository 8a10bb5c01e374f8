"""What every model backend shares, written once: turning a turn into a chat,
the response cache, retries with backoff, rate limits, and the call log.

A backend subclasses ``LLMAgent`` and implements ``endpoint`` and ``complete``
(one attempt at one request); it maps its SDK's errors to ``TransientError``
(worth retrying), ``CallRefused`` (not worth retrying: this request will not
work) or ``FatalAgentError`` (this agent cannot play at all).
"""

from __future__ import annotations

import json
import os
import random
import time
from abc import abstractmethod
from typing import Any, ClassVar

import trio
from pydantic import BaseModel, Field

from arena.contract import Agent, AgentConfig, ArenaError, CachedReply, CallRecord, CallStarted, FatalAgentError, Turn

from .prices import PRICES, cost


class TransientError(ArenaError):
    """Worth another try: rate limits, overload, server errors, timeouts, dropped connections."""

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after


class CallRefused(ArenaError):
    """The server refused this request for good (a bad request); the turn fails, the match goes on."""


class ChatRequest(BaseModel):
    system: str | None
    messages: list[dict[str, str]]
    schema_: dict[str, Any] | None = Field(None, alias="schema")
    temperature: float | None
    max_tokens: int
    top_p: float | None
    seed: int | None
    stop: list[str] | None

    model_config = {"populate_by_name": True}


class Completion(BaseModel):
    text: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class LLMConfig(AgentConfig):
    backend: str
    model: str = Field(description="The model's name as the backend knows it.")
    system: str | None = Field(None, description="System prompt.")
    persona: str | None = Field(None, description="A persona, added to the system prompt.")
    temperature: float | None = Field(None, ge=0, description="Sampling temperature (backend default if unset).")
    max_tokens: int = Field(512, ge=1, description="Most tokens in one reply.")
    top_p: float | None = Field(None, gt=0, le=1)
    seed: int | None = Field(None, description="Sampling seed; default: one derived from the match, seat, round and attempt.")
    stop: list[str] | None = Field(None, description="Stop sequences.")
    timeout: float = Field(120.0, gt=0, description="Seconds one call may take.")
    retries: int = Field(6, ge=0, description="Extra tries after a transient failure.")
    backoff: float = Field(1.0, gt=0, description="First wait between tries, doubled each time, with jitter.")
    max_backoff: float = Field(60.0, gt=0, description="Longest wait between tries.")
    structured: bool = Field(True, description="Use the backend's structured output when the game declares its action.")


class LLMAgent(Agent):
    Config: ClassVar[type[LLMConfig]] = LLMConfig
    makes_calls = True
    backend_name: ClassVar[str]
    merge_roles: ClassVar[bool] = False  # whether the API needs user/assistant turns to alternate
    free: ClassVar[bool] = False  # a model run in this process costs no money

    @abstractmethod
    def endpoint(self) -> str:
        """Where calls go (a URL, a model file): part of the cache key and of the limits' identity."""

    @abstractmethod
    async def complete(self, request: ChatRequest) -> Completion:
        """One attempt at one request."""

    # -- building the request ------------------------------------------------------
    def chat_request(self, turn: Turn) -> ChatRequest:
        config: LLMConfig = self.config
        chat = turn.as_chat()
        if self.merge_roles:
            chat = merge_consecutive(chat)
        system = "\n\n".join(p for p in (config.system, config.persona) if p) or None
        return ChatRequest(
            system=system,
            messages=chat,
            schema=turn.action_schema if config.structured else None,
            temperature=config.temperature,
            max_tokens=config.max_tokens,
            top_p=config.top_p,
            seed=config.seed if config.seed is not None else turn.seed % 2**31,
            stop=config.stop,
        )

    # -- one reply, with cache, limits and retries ----------------------------------
    async def reply(self, turn: Turn) -> str:
        config: LLMConfig = self.config
        services = self.services
        request = self.chat_request(turn)
        key = dict(
            backend=self.backend_name, model=config.model, endpoint=self.endpoint(), request=request.model_dump(by_alias=True),
            sample=None if config.temperature == 0 else turn.seed,
        )
        base = dict(match=turn.match, seat=turn.seat, round=turn.round, attempt=turn.attempt, agent=self.name,
                    backend=self.backend_name, model=config.model)
        hit = services.cached(**key)
        if hit is not None:  # recorded at what it cost when first asked: reports count it as saved, the budget not at all
            cost = hit.cost if hit.cost is not None else self.cost_of(hit.prompt_tokens, hit.completion_tokens, services.prices)
            services.record_call(CallRecord(**base, prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens,
                                            cost=cost, latency=hit.latency or 0.0, cached=True))
            return hit.text
        try:
            await self.prepare()  # also here: the first call's timeout must not be spent importing an SDK
        except FatalAgentError as exc:
            services.record_call(CallRecord(**base, error=self.redact(str(exc))))
            raise
        estimate = sum(len(m["content"]) for m in request.messages) // 4 + config.max_tokens
        rng = random.Random(turn.seed)
        failures, started = 0, time.monotonic()
        token = f"{self.name}:{turn.match}:{turn.seat}:{turn.round}:{turn.attempt}:{started}"
        base["token"] = token
        while True:
            error: Exception | None = None
            async with services.slot(self.backend_name, self.endpoint(), estimate) as reservation:
                services.call_started(CallStarted(**base))
                try:
                    with trio.fail_after(config.timeout):
                        completion = await self.complete(request)
                except trio.TooSlowError:
                    error = TransientError(f"no answer within {config.timeout:g} s")
                except (TransientError, CallRefused) as exc:
                    error = exc
                except FatalAgentError as exc:
                    services.record_call(CallRecord(**base, latency=time.monotonic() - started, retries=failures,
                                                    error=self.redact(str(exc))))
                    raise
                else:
                    reservation.tokens = (completion.prompt_tokens or 0) + (completion.completion_tokens or 0) or estimate
            if error is None:
                break
            failures += 1
            message = self.redact(f"{type(error).__name__}: {error}")
            if isinstance(error, CallRefused) or failures > config.retries:
                services.record_call(CallRecord(**base, latency=time.monotonic() - started, retries=failures - 1, error=message))
                tries = "" if isinstance(error, CallRefused) else f" after {failures} tries"
                raise RuntimeError(f"the model call failed{tries}: {message}")
            await trio.sleep(self._wait(failures, error.retry_after, rng))
        spent = self.cost_of(completion.prompt_tokens, completion.completion_tokens, services.prices)
        latency = time.monotonic() - started
        services.record_call(CallRecord(**base, prompt_tokens=completion.prompt_tokens, completion_tokens=completion.completion_tokens,
                                        cost=spent, latency=latency, retries=failures))
        services.remember(CachedReply(completion.text, completion.prompt_tokens, completion.completion_tokens, spent, latency), **key)
        return completion.text

    def cost_of(self, prompt_tokens, completion_tokens, extra_prices) -> float | None:
        if self.free:
            return 0.0
        return cost(self.config.model, prompt_tokens, completion_tokens, {**PRICES, **extra_prices})

    def _wait(self, failures: int, retry_after: float | None, rng: random.Random) -> float:
        config: LLMConfig = self.config
        delay = min(config.max_backoff, config.backoff * 2 ** (failures - 1)) * (0.5 + 0.5 * rng.random())
        return max(delay, retry_after or 0.0)

    # -- keys ----------------------------------------------------------------------
    def key_variable(self) -> str | None:
        return None

    def api_key(self, required: bool) -> str | None:
        variable = self.key_variable()
        value = os.environ.get(variable) if variable else None
        if not value and required:
            raise FatalAgentError(f"agent {self.name!r}: set the environment variable {variable} to its API key")
        return value

    def redact(self, text: str) -> str:
        """Errors are shown and stored: make sure no key is among them."""
        variable = self.key_variable()
        key = os.environ.get(variable) if variable else None
        if key:
            text = text.replace(key, "***")
        return text


class HostedConfig(LLMConfig):
    base_url: str | None = Field(None, description="Another endpoint speaking the same API (a local server, a proxy).")
    api_key_env: str = Field(description="Environment variable holding the key (never the key itself).")


class HostedAgent(LLMAgent):
    """A model behind an HTTP API, reached through its vendor's SDK (openai, anthropic).

    Subclasses name the SDK module, the default endpoint, and how to build a client; the
    SDKs share their error classes' names, so their errors are translated here, once."""

    Config: ClassVar[type[HostedConfig]] = HostedConfig
    default_endpoint: ClassVar[str]

    def __init__(self, name: str, config: HostedConfig, services=None):
        super().__init__(name, config, services)
        self._client = None

    @abstractmethod
    def sdk(self) -> Any:
        """The SDK module (imported only when a call is made)."""

    @abstractmethod
    def make_client(self, key: str) -> Any:
        """An async client with the SDK's own retries off: ours apply instead."""

    def endpoint(self) -> str:
        return self.config.base_url or self.default_endpoint

    def key_variable(self) -> str | None:
        return self.config.api_key_env

    @property
    def client(self) -> Any:
        if self._client is None:
            # a local server needs no key; the vendor's API does
            self._client = self.make_client(self.api_key(required=self.config.base_url is None) or "no-key")
        return self._client

    async def prepare(self) -> None:
        self.client

    async def send(self, create, **kwargs) -> Any:
        """One request through the SDK, its errors translated into ours."""
        sdk = self.sdk()
        try:
            return await create(**kwargs)
        except (sdk.AuthenticationError, sdk.PermissionDeniedError) as exc:
            raise FatalAgentError(
                f"agent {self.name!r}: the server refused the API key ({exc.status_code}); "
                f"check the environment variable {self.config.api_key_env}"
            ) from None
        except sdk.NotFoundError as exc:
            raise FatalAgentError(f"agent {self.name!r}: model {self.config.model!r} or its endpoint was not found "
                                  f"({exc.status_code}): {self.redact(exc.message)}") from None
        except (sdk.BadRequestError, sdk.UnprocessableEntityError) as exc:
            raise CallRefused(f"{exc.status_code}: {self.redact(exc.message)}") from None
        except sdk.APIStatusError as exc:  # 408, 409, 429, 5xx, 529 overloaded
            raise TransientError(f"{exc.status_code}: {self.redact(exc.message)}", retry_after_seconds(exc.response.headers)) from None
        except (sdk.APIConnectionError, sdk.APIResponseValidationError) as exc:
            raise TransientError(f"{type(exc).__name__}: {self.redact(str(exc))}") from None
        except json.JSONDecodeError:  # HTTP 200 with a body that is not JSON: a broken proxy or server
            raise TransientError("the response was not valid JSON") from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def merge_consecutive(chat: list[dict[str, str]]) -> list[dict[str, str]]:
    """Alternating user/assistant turns, starting with the user, as some APIs require."""
    merged: list[dict[str, str]] = []
    for message in chat:
        if merged and merged[-1]["role"] == message["role"]:
            merged[-1] = {"role": message["role"], "content": merged[-1]["content"] + "\n\n" + message["content"]}
        else:
            merged.append(dict(message))
    if merged and merged[0]["role"] != "user":
        merged.insert(0, {"role": "user", "content": "(The game begins.)"})
    return merged


def retry_after_seconds(headers: Any) -> float | None:
    """Retry-After in seconds or as an HTTP date, or retry-after-ms."""
    if headers is None:
        return None
    try:
        if headers.get("retry-after-ms"):
            return float(headers["retry-after-ms"]) / 1000
        value = headers.get("retry-after")
    except (TypeError, ValueError):
        return None
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None
