"""What the embedded backend adds to a call: a seat's reply through ``llamacpp`` (the agent's whole path:
request, cache lookup, limits, a worker thread, streaming with the reply cap, the call's record) beside
``llama_cpp.Llama.create_chat_completion`` alone on the same model, the same messages and the same settings.

Both use one loaded model. The calls alternate (bare, backend, backend, bare, ...) so both see the
machine in the same state, and every call sends the very same prompt, so llama.cpp's reuse of the prompt
it evaluated last favours neither. Greedy decoding: both must write the same reply, token for token,
and the bench stops if they do not. The backend's overhead is the difference of the medians, as a share
of the bare call's median; the goal (issue 35) is at most 5 %.

Also printed: what resolving the packaged model costs the first time (its ``assemble()`` reads and
hashes the whole file, which the backend once did on every call) and every time after.

    python bench/embedded.py                  # 12 pairs of calls, 16 tokens each
    python bench/embedded.py --pairs 30 --tokens 32
"""

from __future__ import annotations

import argparse
import importlib
import statistics
import sys
import time

from machine import load, machine_speed  # bench/machine.py

PROMPT = "Count from one to twenty in words, separated by commas."
GOAL = 0.05


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=12, help="pairs of calls, bare and through the backend (default 12)")
    parser.add_argument("--tokens", type=int, default=16, help="max_tokens of every call (default 16)")
    parser.add_argument("--model", default="gemma3-270m", help="a packaged model or a GGUF file (default gemma3-270m)")
    args = parser.parse_args(argv)

    import trio

    from arena.agents.llamacpp_backend import PACKAGED, LlamaCppAgent, LlamaCppConfig, model_path
    from arena.contract.messages import Turn
    from arena.services.calls import RunServices

    print(f"{load()}; reference loop {machine_speed():.0f} ms of CPU (lower is faster)")
    started = time.perf_counter()
    path = model_path(args.model)
    first = time.perf_counter() - started
    started = time.perf_counter()
    model_path(args.model)
    again = time.perf_counter() - started
    print(f"resolving {args.model}: {first * 1e3:.0f} ms the first time in a process, {again * 1e6:.1f} µs after")
    if args.model in PACKAGED:  # what every call paid before the path was kept, in the event loop's thread
        package = importlib.import_module(PACKAGED[args.model][0])
        times = []
        for _ in range(3):
            started = time.perf_counter()
            package.assemble()
            times.append(time.perf_counter() - started)
        print(f"  (its assemble(), which the backend called on every call until issue 35: median "
              f"{statistics.median(times) * 1e3:.0f} ms of 3)")

    config = LlamaCppConfig(model=args.model, max_tokens=args.tokens, temperature=0.0, structured=False, seed=1,
                            retries=0)
    calls: list = []
    agent = LlamaCppAgent("bench", config, RunServices(cache=None, record_call=calls.append))
    turn = Turn(match="bench", seat="Player 1", role="player", round=1, history=(), prompt=PROMPT, seed=1)
    request = agent.chat_request(turn)
    assert request.system is None  # so the backend sends the messages as they are, and the bare call the same
    options = dict(max_tokens=request.max_tokens, temperature=request.temperature, seed=request.seed)

    async def run() -> tuple[list[float], list[float], str, str, int]:
        started = time.perf_counter()
        await agent.prepare()
        print(f"loading the model: {time.perf_counter() - started:.1f} s (once per process)")
        llama, _ = agent._model

        def bare() -> tuple[float, float, str, int]:
            began, cpu = time.perf_counter(), time.process_time()
            answer = llama.create_chat_completion(messages=request.messages, **options)
            return (time.perf_counter() - began, time.process_time() - cpu, answer["choices"][0]["message"]["content"],
                    answer["usage"]["completion_tokens"])

        async def backend() -> tuple[float, float, str]:
            began, cpu = time.perf_counter(), time.process_time()
            text = await agent.reply(turn)
            return time.perf_counter() - began, time.process_time() - cpu, text

        bare(), await backend()  # warm: the prompt evaluated once, the grammar-free path's imports done
        bares, backends = [], []  # (wall, CPU) of each call
        for i in range(args.pairs):
            for which in (("bare", "backend") if i % 2 == 0 else ("backend", "bare")):
                if which == "bare":
                    *spent, bare_text, tokens = bare()
                    bares.append(spent)
                else:
                    *spent, backend_text = await backend()
                    backends.append(spent)
        return bares, backends, bare_text, backend_text, tokens

    bares, backends, bare_text, backend_text, tokens = trio.run(run)
    if bare_text != backend_text:
        raise SystemExit(f"the two paths wrote different replies: {bare_text!r} and {backend_text!r}")
    if any(c.error for c in calls) or any(c.completion_tokens != tokens for c in calls):
        raise SystemExit("the backend's calls failed or counted other tokens than the bare calls': "
                         + repr([(c.error, c.completion_tokens) for c in calls]))
    print(f"\n{args.pairs} pairs, {tokens} tokens a reply, the same prompt every call: {PROMPT!r}")
    for kind, at in (("wall", 0), ("CPU", 1)):  # CPU: the process's, all its threads; steadier on a loaded machine
        bare_ms = statistics.median(b[at] for b in bares) * 1e3
        backend_ms = statistics.median(b[at] for b in backends) * 1e3
        overhead = (backend_ms - bare_ms) / bare_ms
        verdict = "met" if overhead <= GOAL else "missed"
        print(f"  {kind + ':':5} create_chat_completion alone {bare_ms:6.0f} ms, through the backend {backend_ms:6.0f} ms "
              f"(medians): overhead {backend_ms - bare_ms:+5.0f} ms, {overhead:+6.1%} per call "
              f"(goal <= {GOAL:.0%}: {verdict})")
    print(f"\n{load()}; reference loop {machine_speed():.0f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
