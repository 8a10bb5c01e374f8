"""What every model backend shares, written once: turning a turn into a chat,
the response cache, retries with backoff, rate limits, and the call log.

A backend subclasses ``LLMAgent`` and implements ``endpoint`` and ``complete``
(one attempt at one request); it maps its SDK's errors to ``TransientError``
(worth retrying), ``CallRefused`` (not worth retrying: this request will not
work) or ``FatalAgentError`` (this agent cannot play at all).

One clock rules a call: the turn's deadline (trio's effective deadline, set by the
match). Transient failures are tried again, with backoff, only while the turn has
time left; when the tries run out, or the deadline comes while the server is still
failing, the backend is unavailable (``BackendUnavailable``): the match is
interrupted, never scored. A call the deadline cuts off without any failure is
either a slow model or a hung server, and a reply with no text either a model that
said nothing or a server that answers everyone so: the chat endpoint itself is asked
a probe (the smallest chat request, which a busy server queues behind its work and
answers in turn). A probe answered with text means the server works: the match
counts a timeout, or an invalid reply; no answer, or none with text, means the
backend is unavailable. A reply with no text is never cached.
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

from arena.contract import (Agent, AgentConfig, ArenaError, BackendUnavailable, CachedReply, CallRecord, CallStarted,
                            FatalAgentError, Turn)
from arena.contract import ReplyCut
from arena.contract.errors import shorten
from arena.contract.calls import PROBE_SEAT

from .prices import PRICES, cost


class TransientError(ArenaError):
    """Worth another try: rate limits, overload, server errors, timeouts, dropped connections."""

    def __init__(self, message: str, retry_after: float | None = None, status: int | None = None):
        super().__init__(message)
        self.retry_after = retry_after
        self.status = status  # the HTTP status the server answered with, if it answered at all


class CallRefused(ArenaError):
    """The server refused this request for good (a bad request, a prompt too long): the match fails
    with the reason, since asking again would be refused again and a default would score it."""

    status: int | None = None


def unbilled(exc: BaseException) -> bool:
    """Whether the server answered this failure with an error status: it generated nothing, so the
    call's tokens are known to be none. Any other failure (a timeout, a dropped connection, a body
    that was not a reply) may have been generated and billed: its tokens are unknown."""
    return getattr(exc, "status", None) is not None


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


def token_counts(answer: dict[str, Any], prompt: str, completion: str) -> tuple[int | None, int | None]:
    """The prompt's and the completion's token counts in an answer's ``usage``, under the names its
    API gives them; None for a count that is missing or is not a count."""
    usage = answer.get("usage")
    usage = usage if isinstance(usage, dict) else {}
    return tuple(value if type(value) is int and value >= 0 else None  # type: ignore[return-value]
                 for value in (usage.get(prompt), usage.get(completion)))


# A reply's size. English runs about 4 characters to a token and code or other languages fewer; tokens
# of 16 characters or more (long runs of spaces, long words) are rare, so a reply within max_tokens is
# never cut in practice, while a server that ignores max_tokens is stopped a few kilobytes on.
CHARS_PER_TOKEN = 16
# The most any reply may have, whatever the settings: the longest replies models give today (about
# 128k tokens) come to about half a million characters; a million holds them with room, and bounds
# what one call may hold in memory (the body limit below: 12 MB) and what one stored row may hold.
REPLY_CEILING = 1_000_000
# The body a reply of n characters can come in: JSON may spell one character in up to 12 bytes (a
# character outside the BMP as two \u escapes), plus the answer's envelope (ids, usage, tool wrapping).
JSON_BYTES_PER_CHAR = 12
ENVELOPE_BYTES = 64 * 1024
# What is shown and stored of an error: the SDKs put a server's whole error body in their message.
ERROR_CHARS = 2000


def body_limit(cap: int) -> int:
    """The most bytes read of an answer whose reply may have ``cap`` characters."""
    return JSON_BYTES_PER_CHAR * cap + ENVELOPE_BYTES


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
    timeout: float | None = Field(
        None, gt=0,
        description="Seconds one try may take before it is given up and tried again; never more than the time left "
        "in the turn (match.turn_timeout), which is also the default.",
    )
    retries: int = Field(
        4, ge=0,
        description="Extra tries after a transient failure (rate limit, overload, server error, dropped connection), "
        "all within the turn's time; when they run out the backend counts as down and the match is interrupted.",
    )
    backoff: float = Field(1.0, gt=0, description="First wait between tries, doubled each time, with jitter.")
    max_backoff: float = Field(10.0, gt=0, description="Longest wait between tries.")
    structured: bool = Field(True, description="Use the backend's structured output when the game declares its action.")
    max_reply_chars: int | None = Field(
        None, ge=1, le=REPLY_CEILING,
        description="Most characters one reply may have; reading (or generating) stops there and the reply counts as "
        "invalid: asked again with the reason, then the game's default. Default: 16 per token of max_tokens; "
        "at most 1,000,000.",
    )

    def reply_cap(self) -> int:
        """The most characters a reply may have: ``max_reply_chars``, else derived from ``max_tokens``."""
        return self.max_reply_chars or min(REPLY_CEILING, CHARS_PER_TOKEN * self.max_tokens)


# The probe: one user message and a reply of a few tokens, the cheapest request that proves the chat
# path works (a model listing does not: a server may list its models and hang every chat, and
# llama_cpp.server stops listing while it generates)
PROBE_PROMPT = "Reply with the single word: ready"
PROBE_TOKENS = 4  # a few rather than one: a first token may be only a space or a newline
# The least time a probe is given after a call the turn's deadline cut off, or that came back with
# no text; it is given as long as the turn had when that is longer, since a busy server answers it
# only once the work queued before it is done
PROBE_WAIT = 5.0
# How long the key check before a run waits for the model listing; past it, the first call decides
KEY_CHECK_WAIT = 10.0


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
        async with services.cached(**key) as hit:
            if hit is None or not hit.text.strip():  # an empty reply (kept by an older version) is asked again
                return await self._ask(turn, request, key, base)
        # recorded at what it cost when first asked: reports count it as saved, the budget not at all
        cost = hit.cost if hit.cost is not None else self.cost_of(hit.prompt_tokens, hit.completion_tokens, services.prices)
        # a cache filled under a larger max_reply_chars may hold a reply longer than this agent may send now
        cut = ReplyCut(config.reply_cap(), len(hit.text), how="in the cache") if len(hit.text) > config.reply_cap() else None
        services.record_call(CallRecord(**base, prompt_tokens=hit.prompt_tokens, completion_tokens=hit.completion_tokens,
                                        cost=cost, latency=hit.latency or 0.0, cached=True,
                                        error=f"ReplyCut: {cut}" if cut else None))
        if cut:
            raise cut
        return hit.text

    async def _ask(self, turn: Turn, request: ChatRequest, key: dict[str, Any], base: dict[str, Any]) -> str:
        """Send the request, with retries inside the turn's deadline; every way it ends is recorded."""
        config: LLMConfig = self.config
        services = self.services
        try:
            await self.prepare()  # also here: the first call's timeout must not be spent importing an SDK
        except FatalAgentError as exc:  # nothing was sent: nothing was spent
            services.record_call(CallRecord(**base, prompt_tokens=0, completion_tokens=0, cost=0.0,
                                            error=self.redact(str(exc))))
            raise
        estimate = sum(len(m["content"]) for m in request.messages) // 4 + config.max_tokens
        rng = random.Random(turn.seed)
        deadline = trio.current_effective_deadline()
        tries = failures = 0
        started, began = time.monotonic(), trio.current_time()  # the second on the turn's clock, which may be a test's
        last: TransientError | None = None
        spent_unknown = False  # whether a failed try may have been generated and billed
        token = f"{self.name}:{turn.match}:{turn.seat}:{turn.round}:{turn.attempt}:{started}"
        base["token"] = token

        def record(error: str | None = None, completion: Completion | None = None,
                   known: bool = False) -> tuple[float | None, float]:
            """The call's one record, whatever ended it (the store then drops its in-flight row). A
            failure's tokens are unknown (None) unless ``known``: the server refused every try."""
            if completion is not None:
                tokens = (completion.prompt_tokens, completion.completion_tokens)
            else:
                tokens = (0, 0) if known and not spent_unknown else (None, None)
            spent = self.cost_of(*tokens, services.prices)  # None where a count or the price is unknown
            latency = time.monotonic() - started
            services.record_call(CallRecord(**base, prompt_tokens=tokens[0], completion_tokens=tokens[1], cost=spent,
                                            latency=latency, retries=max(tries - 1, 0), error=error))
            return spent, latency

        try:
            while True:
                async with services.slot(self.backend_name, self.endpoint(), estimate) as reservation:
                    services.call_started(CallStarted(**base))
                    tries += 1
                    try:
                        completion = await self._try(request)
                    except TransientError as exc:
                        last = exc
                        spent_unknown = spent_unknown or not unbilled(exc)
                    else:
                        reservation.tokens = (completion.prompt_tokens or 0) + (completion.completion_tokens or 0) or estimate
                        break
                failures += 1
                wait = self._wait(failures, last.retry_after, rng)
                if failures > config.retries or trio.current_time() + wait >= deadline:
                    # out of tries, or the next one could not begin within the turn: the server is down for this turn
                    raise self.unavailable(last, failures)
                await trio.sleep(wait)
        except BackendUnavailable as exc:
            record(str(exc), known=True)
            raise
        except Exception as exc:  # refused, fatal, or a bug: recorded, and the match decides
            record(self.redact(f"{type(exc).__name__}: {exc}"), known=unbilled(exc))
            raise
        except BaseException as exc:  # cancelled (the SDK may wrap that in a group), or the process is stopping
            if not _cancellation(exc) or trio.current_time() < deadline:  # not the turn's deadline: not this call's doing
                record("cancelled: the match stopped")
                raise
            waited = trio.current_time() - began
            if last is None:  # nothing failed: a slow model, or a server that hangs. Only the server can say which
                if await self._answers_probe(waited, turn.match):  # it works, and the model is slow: a timeout
                    record(f"cut off by the turn's deadline after {waited:.1f} s")
                    raise
                last = TransientError(f"no answer within the turn's {waited:.1f} s, nor to a probe after it")
            outage = self.unavailable(last, failures, cut_off=True)
            record(str(outage))
            raise outage from None
        if not completion.text.strip():  # a model that said nothing, or a server that says nothing to anyone
            if not await self._answers_probe(trio.current_time() - began, turn.match):
                outage = self.unavailable(TransientError("the reply had no text, nor had the answer to a probe after it"),
                                          tries)
                record(str(outage), completion=completion)  # its tokens, as the server counted them
                raise outage
            record(completion=completion)
            return completion.text  # an invalid reply, asked again by the match; never cached, so never replayed
        spent, latency = record(completion=completion)
        services.remember(CachedReply(completion.text, completion.prompt_tokens, completion.completion_tokens, spent, latency),
                          **key)
        return completion.text

    async def _answers_probe(self, waited: float, match: str = "") -> bool:
        """Whether the chat endpoint answers a probe with text within as long as the call waited, and
        at least PROBE_WAIT seconds. Asked when the turn's deadline may have passed, so shielded from it."""
        with trio.CancelScope(shield=True):
            with trio.move_on_after(max(PROBE_WAIT, waited)):
                try:
                    await self.probe(match=match)
                except BackendUnavailable:
                    return False
                return True
        return False

    async def probe(self, match: str = "") -> None:
        """Whether the backend works (``Agent.probe``): a backend in this process always does."""

    def probe_request(self) -> ChatRequest:
        return ChatRequest(system=None, messages=[{"role": "user", "content": PROBE_PROMPT}], schema=None,
                           temperature=None, max_tokens=PROBE_TOKENS, top_p=None, seed=0, stop=None)

    async def _try(self, request: ChatRequest) -> Completion:
        """One try, under the per-try timeout when one is set (the turn's deadline bounds it anyway)."""
        timeout = self.config.timeout
        if timeout is None:
            return await self._within_cap(request)
        try:
            with trio.fail_after(timeout):
                return await self._within_cap(request)
        except trio.TooSlowError:
            raise TransientError(f"no answer within {timeout:g} s") from None

    async def _within_cap(self, request: ChatRequest) -> Completion:
        """``complete``, refusing a reply longer than ``max_reply_chars``: the backends stop reading
        or generating near the cap, and this holds it exactly, so nothing longer is stored or cached."""
        completion = await self.complete(request)
        cap = self.config.reply_cap()
        if len(completion.text) > cap:
            raise ReplyCut(cap, len(completion.text), how="came")
        return completion

    def unavailable(self, last: TransientError, tries: int, cut_off: bool = False) -> BackendUnavailable:
        when = "when the turn's time ran out" if cut_off else f"after {tries} {'try' if tries == 1 else 'tries'}"
        return BackendUnavailable(self.name, self.backend_name, self.endpoint(), self.redact(f"{last} ({when})"))

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
        """Errors are shown and stored: make sure no key is among them, and that a server's error
        quoting a body of any length is kept to its first ``ERROR_CHARS`` characters."""
        variable = self.key_variable()
        key = os.environ.get(variable) if variable else None
        if key:
            text = text.replace(key, "***")
        return shorten(text, ERROR_CHARS)


# Asks the SDK for the response before its body is read (the header its own ``with_streaming_response``
# sets), and the server for a body as it is: the limit counts the bytes that will be parsed.
STREAMED = {"X-Stainless-Raw-Response": "stream", "Accept-Encoding": "identity"}


class HostedConfig(LLMConfig):
    base_url: str | None = Field(None, description="Another endpoint speaking the same API (a local server, a proxy).")
    api_key_env: str = Field(description="Environment variable holding the key (never the key itself).")


class HostedAgent(LLMAgent):
    """A model behind an HTTP API, reached through its vendor's SDK (openai, anthropic).

    Subclasses name the SDK module, the default endpoint, and how to build a client; the
    SDKs share their error classes' names, so their errors are translated here, once."""

    # A server that does not even take the connection in this time is down, not thinking; the
    # reply itself may take as long as the turn allows.
    connect_timeout: ClassVar[float] = 10.0

    Config: ClassVar[type[HostedConfig]] = HostedConfig
    default_endpoint: ClassVar[str]

    def __init__(self, name: str, config: HostedConfig, services=None):
        super().__init__(name, config, services)
        self._client = None
        self._key_checked = False

    @abstractmethod
    def sdk(self) -> Any:
        """The SDK module (imported only when a call is made)."""

    @abstractmethod
    def make_client(self, key: str) -> Any:
        """An async client with the SDK's own retries off (ours apply instead), and ``client_timeout()``."""

    def client_timeout(self) -> Any:
        timeout = self.config.timeout
        return self.sdk().Timeout(timeout, connect=min(self.connect_timeout, timeout or self.connect_timeout))

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
        if not self._key_checked:  # once: `_ask` prepares too, before every call
            self._key_checked = True
            await self._check_key()

    async def _check_key(self) -> None:
        """A key the server refuses stops the run before anything is played: the models are listed
        once (free). Anything but a refusal is left to the first real call, which retries, waits
        out an outage, or fails as it should; a server without the listing is fine."""
        sdk = self.sdk()
        with trio.move_on_after(KEY_CHECK_WAIT):
            try:
                await self.client.models.list()
            except (sdk.AuthenticationError, sdk.PermissionDeniedError) as exc:
                raise FatalAgentError(self._refused(exc.status_code)) from None
            except Exception:
                pass

    def _refused(self, status: int) -> str:
        return (f"agent {self.name!r}: the server refused the API key ({status}); "
                f"check the environment variable {self.config.api_key_env}")

    async def probe(self, match: str = "") -> None:
        """The chat endpoint works: a probe (``probe_request``) is answered with text, or refused (the
        server answered, if only to refuse it). A failure worth retrying, an answer without text, or
        none at all (the caller's time runs out) raises ``BackendUnavailable`` or is cancelled. Never
        cached, never scored; logged as a call of the seat PROBE_SEAT (``match``: the match it was
        asked for, if any), so its tokens and cost count like any call's."""
        started = time.monotonic()
        completion: Completion | None = None
        error: str | None = "unanswered: the probe was given up"
        try:
            completion = await self.complete(self.probe_request())
            if not completion.text.strip():
                raise TransientError("a probe was answered with no text")
            error = None
        except TransientError as exc:
            error = self.redact(str(exc))
            raise BackendUnavailable(self.name, self.backend_name, self.endpoint(), error) from None
        except (CallRefused, FatalAgentError) as exc:
            error = self.redact(f"refused, so answered: {exc}")
        finally:
            tokens = (completion.prompt_tokens, completion.completion_tokens) if completion else (None, None)
            self.services.record_call(CallRecord(
                match=match, seat=PROBE_SEAT, round=0, attempt=0, agent=self.name, backend=self.backend_name,
                model=self.config.model, prompt_tokens=tokens[0], completion_tokens=tokens[1],
                cost=self.cost_of(*tokens, self.services.prices),  # unknown tokens: unknown cost, unless free
                latency=time.monotonic() - started, error=error))

    async def post(self, path: str, body: dict[str, Any]) -> Any:
        """The JSON the server answered to ``body`` at ``path``, through the client's documented
        ``post``: the client's headers, timeout and error classes, none of its typed layer. The
        SDKs' own methods walk the request against their type hints and build typed objects from
        the answer, for a body that is plain JSON already: about 2 ms of CPU per request with
        openai's SDK and 0.7 ms with anthropic's, as much as a whole scripted match costs
        (``bench/model_path.py``). An answer that is not JSON raises here, inside ``send``, as the
        SDK's parsing did."""
        import httpx2  # what both SDKs are built on; `post` hands back its raw response when asked

        client = self.client  # its timeout given again: without it the anthropic SDK sends a header saying NOT_GIVEN
        response = await client.post(path, body=body, cast_to=httpx2.Response,
                                     options={"timeout": client.timeout, "headers": STREAMED})
        return json.loads(await self._bounded_body(response))

    async def _bounded_body(self, response: Any) -> bytes:
        """The body of a response not yet read, read in chunks up to what a reply within
        ``max_reply_chars`` can take (``body_limit``), then closed. A longer body is cut there and
        never parsed: a JSON document cut short cannot be read, and whatever it held is too long.
        A body announced longer is not read at all."""
        import httpx2

        cap = self.config.reply_cap()
        limit = body_limit(cap)
        chunks: list[bytes] = []
        try:
            announced = response.headers.get("content-length", "")
            if announced.isdigit() and int(announced) > limit:
                raise ReplyCut(cap, int(announced), "bytes", "announced by the server, none read")
            size = 0
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ReplyCut(cap, size, "bytes", f"had come when reading stopped (the most read is {limit:,})")
                chunks.append(chunk)
        except httpx2.RequestError as exc:  # the connection dropped or stalled mid-body, as the SDK's own read would say
            raise TransientError(f"the response broke off: {type(exc).__name__}: {self.redact(str(exc))}") from None
        finally:
            await response.aclose()  # a body left unread closes its connection rather than going back to the pool
        return b"".join(chunks)

    async def send(self, create, **kwargs) -> Any:
        """One request through the SDK, its errors translated into ours."""
        sdk = self.sdk()
        try:
            return await create(**kwargs)
        except (sdk.AuthenticationError, sdk.PermissionDeniedError) as exc:
            raise _answered(FatalAgentError(self._refused(exc.status_code)), exc.status_code) from None
        except sdk.NotFoundError as exc:
            raise _answered(FatalAgentError(f"agent {self.name!r}: model {self.config.model!r} or its endpoint was not "
                                            f"found ({exc.status_code}): {self.redact(exc.message)}"), exc.status_code) from None
        except (sdk.BadRequestError, sdk.UnprocessableEntityError) as exc:
            raise _answered(CallRefused(f"{exc.status_code}: {self.redact(exc.message)}"), exc.status_code) from None
        except sdk.APIStatusError as exc:  # 408, 409, 429, 5xx, 529 overloaded
            raise TransientError(f"{exc.status_code}: {self.redact(exc.message)}", retry_after_seconds(exc.response.headers),
                                 status=exc.status_code) from None
        except (sdk.APIConnectionError, sdk.APIResponseValidationError) as exc:
            raise TransientError(f"{type(exc).__name__}: {self.redact(str(exc))}") from None
        except json.JSONDecodeError:  # HTTP 200 with a body that is not JSON: a broken proxy or server
            raise TransientError("the response was not valid JSON") from None

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.close()
            self._client = None


def _answered(exc: Exception, status: int) -> Exception:
    """``exc``, marked as the server's answer with ``status`` (see ``unbilled``)."""
    exc.status = status  # type: ignore[attr-defined]
    return exc


def _cancellation(exc: BaseException) -> bool:
    """trio's Cancelled, alone or in a group of nothing else (as a nursery inside an SDK raises it)."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return isinstance(exc, trio.Cancelled)


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
