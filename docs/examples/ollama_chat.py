"""An agent backend for Ollama's own chat API (POST /api/chat), written against arena.contract
only. It sends a seat's conversation, holds the model to the game's JSON schema when the game has
one, retries a failing server within the turn's time and then says the backend is down, and logs
every call. The standard library's HTTP client runs in a thread, so it needs nothing installed."""

from __future__ import annotations

import json
import os
import urllib.error
import urllib.request

import trio
from pydantic import Field

from arena.contract import (Agent, AgentConfig, ArenaError, BackendUnavailable, CallRecord, CallStarted,
                            FatalAgentError, Turn)

BACKEND = "ollama_chat"


class OllamaConfig(AgentConfig):
    backend: str = BACKEND  # a scenario's agent entry names its backend: the field must exist
    model: str = Field(description="The model as Ollama names it, e.g. llama3.2:1b.")
    base_url: str = Field("http://127.0.0.1:11434", description="Where Ollama listens.")
    api_key_env: str | None = Field(None, description="Environment variable holding a key for a proxy in front.")
    temperature: float | None = Field(None, ge=0)
    max_tokens: int = Field(512, ge=1, description="Most tokens in one reply; `arena run --dry-run` prices it.")
    structured: bool = Field(True, description="Send the game's JSON schema as Ollama's `format`.")
    retries: int = Field(3, ge=0, description="Extra tries after a server error, within the turn's time.")
    backoff: float = Field(0.5, gt=0, description="First wait between tries, in seconds, doubled each time.")


class Transient(Exception):
    """Worth another try: the server is down, overloaded or broke off."""


class OllamaChat(Agent):
    Config = OllamaConfig
    makes_calls = True  # `arena run --dry-run` and the cost table count this agent's calls
    key: str | None = None

    async def prepare(self) -> None:
        variable = self.config.api_key_env
        self.key = os.environ.get(variable) if variable else None
        if variable and not self.key:  # the key comes from the environment only, never from a file
            raise FatalAgentError(f"agent {self.name!r}: set the environment variable {variable}")

    def endpoint(self) -> str:
        return self.config.base_url  # matches that share it wait out its outages together

    def body(self, turn: Turn) -> dict:
        options = {"seed": turn.seed % 2**31, "num_predict": self.config.max_tokens}  # the seed comes from the match
        if self.config.temperature is not None:
            options["temperature"] = self.config.temperature
        body = {"model": self.config.model, "messages": turn.as_chat(), "stream": False, "options": options}
        if self.config.structured and turn.action_schema:
            body["format"] = turn.action_schema
        return body

    async def reply(self, turn: Turn) -> str:
        body, deadline = self.body(turn), trio.current_effective_deadline()  # the turn's time limit
        call = dict(match=turn.match, seat=turn.seat, round=turn.round, attempt=turn.attempt, agent=self.name,
                    backend=BACKEND, model=self.config.model)
        call["token"] = ":".join(str(value) for value in call.values())  # pairs CallStarted with its CallRecord
        started, tries = trio.current_time(), 0
        while True:
            tries += 1
            async with self.services.slot(BACKEND, self.endpoint(), tokens=1000):  # the run's rate limits
                self.services.call_started(CallStarted(**call))
                try:
                    timeout = min(deadline - trio.current_time(), 600.0)
                    answer = await trio.to_thread.run_sync(self.post, body, timeout, abandon_on_cancel=True)
                except Transient as exc:
                    last = self.redact(str(exc))
                except Exception as exc:  # refused or fatal: logged, and the match decides
                    self.log(call, started, tries, error=self.redact(f"{type(exc).__name__}: {exc}"))
                    raise
                except BaseException:  # cancelled: the turn's time ran out, or the run is stopping
                    self.log(call, started, tries, error="cancelled")
                    raise
                else:
                    self.log(call, started, tries, answer.get("prompt_eval_count"), answer.get("eval_count"))
                    return answer["message"]["content"]
            wait = self.config.backoff * 2 ** (tries - 1)
            if tries > self.config.retries or trio.current_time() + wait >= deadline:
                self.log(call, started, tries, error=last)
                raise BackendUnavailable(self.name, BACKEND, self.endpoint(), f"{last} (after {tries} tries)")
            await trio.sleep(wait)

    async def probe(self) -> None:
        """After an outage, the run asks this until the server answers: the smallest chat request."""
        body = {"model": self.config.model, "messages": [{"role": "user", "content": "Reply with the word: ready"}],
                "stream": False, "options": {"num_predict": 4}}
        try:
            await trio.to_thread.run_sync(self.post, body, 10.0, abandon_on_cancel=True)
        except Transient as exc:
            raise BackendUnavailable(self.name, BACKEND, self.endpoint(), self.redact(str(exc))) from None

    def post(self, body: dict, timeout: float) -> dict:
        """One try, in a worker thread; the socket gives up when the turn's time is out."""
        headers = {"Content-Type": "application/json"}
        if self.key:
            headers["Authorization"] = f"Bearer {self.key}"
        request = urllib.request.Request(f"{self.config.base_url}/api/chat", json.dumps(body).encode(), headers)
        try:
            with urllib.request.urlopen(request, timeout=max(timeout, 0.1)) as response:
                answer = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            said = exc.read().decode(errors="replace")[:500]
            if exc.code in (401, 403, 404):  # a refused key or an unknown model: this agent cannot play
                raise FatalAgentError(f"agent {self.name!r}: HTTP {exc.code}: {self.redact(said)}") from None
            if exc.code == 429 or exc.code >= 500:
                raise Transient(f"HTTP {exc.code}: {said}") from None
            raise ArenaError(f"the server refused the request: HTTP {exc.code}: {self.redact(said)}") from None
        except (OSError, ValueError) as exc:  # refused or dropped connection, timeout, a body that is not JSON
            raise Transient(f"{type(exc).__name__}: {exc}") from None
        if not isinstance((answer.get("message") or {}).get("content"), str):
            raise Transient("the answer held no message")
        return answer

    def log(self, call: dict, started: float, tries: int, prompt_tokens=None, completion_tokens=None, error=None):
        self.services.record_call(CallRecord(**call, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                                             cost=0.0, latency=trio.current_time() - started, retries=tries - 1,
                                             error=error))

    def redact(self, text: str) -> str:
        return text.replace(self.key, "***") if self.key else text  # errors are shown and stored
