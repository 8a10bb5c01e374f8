"""What a model's seat costs the run: matches with 100 ms agents played through the OpenAI (or the
Anthropic) backend against a local server, beside the same matches with scripted agents of the same latency.

``bench/concurrency.py`` times matches whose agents are scripted: their reply is a sleep, so the
CPU it measures is Arena's alone. A model's seat also builds its request, sends it through the
official SDK (httpx2, a connection per request in flight), reads and validates the answer, asks
the response cache and writes to it, and keeps its call's record. This bench plays the same
tournament both ways, in the same minutes: two seats of public goods, one round, every request
answered by the project's mock server of that API (``tests/mock_llm.py``) after the latency. The server
runs in a process of its own, so its work is not counted in the run's CPU (on a machine of two
cores it still takes the other core's time).

Printed per configuration, scripted and through the backend: wall/ideal, the run's CPU per match
(its process and its workers), and the difference per request, which is what a model's seat adds
to a match. Every request is checked to have been answered by the server and none by the cache.

    python bench/model_path.py                    # 200 x 16 and 1,000 x 128, median of 3
    python bench/model_path.py --quick            # 1 trial each
    python bench/model_path.py --processes 2      # the matches played by two worker processes
    python bench/model_path.py --backend anthropic

No goal is judged: the goals of issue 15 are those of ``bench/concurrency.py``. This bench says how
far a run of real models is from them, and why.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import sys
from pathlib import Path

from machine import load, machine_speed  # bench/machine.py

ROOT = Path(__file__).resolve().parent.parent
KEY_ENV = "ARENA_BENCH_MOCK_KEY"  # the bench's own variable: a user's real key is never read or sent


def _serve(conn, backend: str, latency: float) -> None:
    """The mock server, in a process of its own: every request answered after ``latency`` seconds."""
    import time

    sys.path.insert(0, str(ROOT / "tests"))
    from mock_llm import AnthropicMock, OpenAIMock

    def answer(body) -> dict:  # in the request's own thread: the requests in flight wait side by side
        time.sleep(latency)
        return {"reason": "half of what I hold", "coins": 5}

    mock = (OpenAIMock if backend == "openai" else AnthropicMock)(responder=answer)
    mock.start()
    conn.send(mock.base_url)
    while conn.recv() == "count":  # anything else: stop
        conn.send((len(mock.answered()), mock.count))
    mock.stop()


class Server:
    """The mock server's process, and a pipe to ask it how many requests it has had."""

    def __init__(self, backend: str, latency: float):
        context = multiprocessing.get_context("spawn")  # nothing of the run's state is copied into it
        self._conn, child = context.Pipe()
        self._process = context.Process(target=_serve, args=(child, backend, latency), daemon=True)
        self._process.start()
        self.url = self._conn.recv()

    def counts(self) -> tuple[int, int]:
        """(answered, received) so far."""
        self._conn.send("count")
        return self._conn.recv()

    def stop(self) -> None:
        self._conn.send("stop")
        self._process.join(timeout=10)


def scenario_dict(backend: str, matches: int, at_once: int, url: str, processes: int) -> dict:
    agent = {"backend": backend, "model": "mock-model", "base_url": url, "api_key_env": KEY_ENV,
             "max_tokens": 64, "retries": 0}
    return {
        "name": "bench-model-path",
        "seed": 11,
        "agents": {"left": dict(agent), "right": dict(agent)},
        "games": [{"game": "public_goods", "params": {"rounds": 1, "mode": 2}}],
        "tournament": {"format": "fixed", "seating": "rotate", "repeats": matches},
        "concurrency": {"matches": at_once},
        "execution": {"executor": "processes", "workers": processes} if processes > 1 else {"executor": "local"},
        "limits": {backend: {"calls": 2 * at_once}},  # the bench is about the run's CPU, not the limits
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 trial per configuration")
    parser.add_argument("--trials", type=int, default=3)
    parser.add_argument("--processes", type=int, default=1, help="worker processes of both runs (default 1)")
    parser.add_argument("--backend", choices=("openai", "anthropic"), default="openai",
                        help="the backend the seats use, against its mock (default openai)")
    parser.add_argument("--latency", type=float, default=0.1, help="the agents' latency, seconds (default 0.1)")
    args = parser.parse_args(argv)
    trials = 1 if args.quick else max(1, args.trials)
    os.environ[KEY_ENV] = "bench-mock-key"

    import concurrency  # bench/concurrency.py: the scripted run and the timing of a run
    from arena.run.scenario import parse_scenario

    server = Server(args.backend, args.latency)
    try:
        print(f"{load()}; reference loop {machine_speed():.0f} ms of CPU (lower is faster); {args.processes} "
              f"process(es); the {args.backend} backend; agents answer after {args.latency * 1000:g} ms; median of {trials}")
        for warm in (scenario_dict(args.backend, 4, 2, server.url, 1), concurrency.scenario_dict(4, 2, 0.0, 1)):
            concurrency.play(warm, parse_scenario(warm), 2, 1.0)  # imports, clients and caches, before any timing
        header = (f"{'matches x at once':>17} | {'scripted: wall/ideal':>20} {'CPU/match':>10} | "
                  f"{args.backend + ' backend: wall/ideal':>27} {'CPU/match':>10} | {'added per request':>17}")
        print("\n" + header + "\n" + "-" * len(header))
        for matches, at_once in ((200, 16), (1000, 128)):
            scripted_raw = concurrency.scenario_dict(matches, at_once, args.latency, 1, processes=args.processes)
            model_raw = scenario_dict(args.backend, matches, at_once, server.url, args.processes)
            scripted, model = [], []
            for _ in range(trials):  # in turn, so that both see the machine in the same state
                scripted.append(concurrency.play(scripted_raw, parse_scenario(scripted_raw), at_once, args.latency))
                before = server.counts()
                model.append(concurrency.play(model_raw, parse_scenario(model_raw), at_once, args.latency))
                answered, received = (a - b for a, b in zip(server.counts(), before))
                if answered != 2 * matches or received != 2 * matches:
                    raise SystemExit(f"the server answered {answered} of {received} requests; "
                                     f"{2 * matches} were expected (one per seat, none from the cache)")
            s_ratio, s_cpu = statistics.median(r.ratio for r in scripted), statistics.median(r.cpu_per_match_ms for r in scripted)
            m_ratio, m_cpu = statistics.median(r.ratio for r in model), statistics.median(r.cpu_per_match_ms for r in model)
            print(f"{f'{matches:,} x {at_once}':>17} | {s_ratio:>20.3f} {s_cpu:>7.2f} ms | {m_ratio:>27.3f} "
                  f"{m_cpu:>7.2f} ms | {(m_cpu - s_cpu) / 2:>14.2f} ms")
        print(f"\n{load()}; reference loop {machine_speed():.0f} ms")
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
