"""A stand-in for llama-cpp-python that loads no model: it writes a line to the file named by
FAKE_LLAMA_LOADS for every model it is asked to load (the process, the context size) and every
chat it is asked for (the process, "chat"), and answers every chat with a public goods move. Put its folder first on PYTHONPATH (the processes that
should use it, Ray's workers among them, inherit it) to count where and how often the llamacpp
backend loads its model, without a GGUF file or the real library."""

import json
import os

__version__ = "0.0-fake"


def llama_print_system_info() -> bytes:
    return b"CPU : FAKE = 1"


def llama_log_callback(function):
    return function


def llama_log_set(callback, user_data) -> None:
    pass


def _say(what: str) -> None:
    loads = os.environ.get("FAKE_LLAMA_LOADS")
    if loads:
        with open(loads, "a", encoding="utf-8") as out:  # one short line per write: appends never interleave
            out.write(f"{os.getpid()} {what}\n")


class LogitsProcessorList(list):
    pass


class Llama:
    def __init__(self, model_path, n_ctx=512, n_threads=None, chat_format=None, verbose=True):
        self.model_path, self.n_ctx, self.chat_format = model_path, n_ctx, chat_format
        self.metadata = {}
        _say(str(n_ctx))

    def create_completion(self, prompt, max_tokens=16):
        return {"choices": [{"text": "1"}]}

    def create_chat_completion(self, messages, stream=False, logits_processor=(), **options):
        _say("chat")
        reply = json.dumps({"reason": "fake", "coins": 4})
        for processor in logits_processor:  # the prompt's "tokens", then one more per piece sampled
            processor([0] * len(json.dumps(messages)), None)
        for piece in (reply[:10], reply[10:]):
            for processor in logits_processor:
                processor([0], None)
            yield {"choices": [{"delta": {"content": piece}}]}

    def close(self) -> None:
        pass
