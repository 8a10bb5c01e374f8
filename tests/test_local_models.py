"""Real models in the box: the two packaged models (Gemma 3 270M, base; SmolLM2-135M-Instruct)
play scenarios/local-models.yaml, cut to two questions, in this process and behind llama.cpp's own
server, and the judging games hold the instruct model's verdicts to their schemas: at least 90 %
of its judging turns parse without a default, and `arena rank` prints a two-row peer-rank
leaderboard with intervals. The bodies a recording proxy in front of the server saw show the
schema offered. Slow (real generation on a loaded machine): the scenarios are as small as they
can be and still say something."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import yaml

from arena.agents.llamacpp_backend import PACKAGED, model_path
from arena.contract import FatalAgentError
from arena.contract import RunReader, open_run
from arena.store import RunStore

from helpers import ROOT, arena_offline

SCENARIO = ROOT / "scenarios" / "local-models.yaml"
DATA = ROOT / "scenarios" / "data"
INSTRUCT = "smollm"  # the scenario's agent running SmolLM2-135M-Instruct


# -- the second packaged model ------------------------------------------------------------------
def test_both_packaged_models_are_named_and_their_files_found(monkeypatch):
    assert set(PACKAGED) == {"gemma3-270m", "smollm2-135m"}
    path = model_path("smollm2-135m")
    assert path.name == "SmolLM2-135M-Instruct.Q4_1.gguf" and path.read_bytes()[:4] == b"GGUF"
    listed = arena_offline("agents", cwd=ROOT)
    assert listed.returncode == 0 and "gemma3-270m, smollm2-135m" in " ".join(listed.stdout.split())
    import importlib.util

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: None)  # the package is not installed
    model_path.cache_clear()  # a file is resolved once per process: forget the one found above
    with pytest.raises(FatalAgentError, match=r"SmolLM2-135M-Instruct.Q4_1.gguf is not installed: pip install"):
        model_path("smollm2-135m")


# -- a recording proxy in front of llama.cpp's server ---------------------------------------------
class Proxy(ThreadingHTTPServer):
    """Passes every request on to ``target`` and keeps the JSON bodies it was sent."""

    daemon_threads = True

    def __init__(self, target: str):
        self.target, self.bodies, self.lock = target, [], threading.Lock()
        super().__init__(("127.0.0.1", 0), _Forward)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _Forward(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):
        pass

    def _relay(self, method: str) -> None:
        data = self.rfile.read(int(self.headers.get("content-length") or 0)) if method == "POST" else None
        if data:
            with self.server.lock:
                self.server.bodies.append(json.loads(data))
        request = urllib.request.Request(self.server.target + self.path, data=data, method=method,
                                         headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(request, timeout=900) as answer:
                status, payload = answer.status, answer.read()
        except urllib.error.HTTPError as exc:
            status, payload = exc.code, exc.read()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(payload)))
        self.end_headers()
        self.wfile.write(payload)

    def do_GET(self):
        self._relay("GET")

    def do_POST(self):
        self._relay("POST")


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """One llama.cpp server per packaged model, each behind a recording proxy: model -> proxy."""
    procs, proxies, logs = [], {}, []
    try:
        for name, alias, layout in (("gemma3-270m", "gemma", ["--chat_format", "gemma"]), ("smollm2-135m", "smollm", [])):
            port = _free_port()
            log_path = tmp_path_factory.mktemp("server") / "server.log"
            log = open(log_path, "w")
            logs.append(log)
            procs.append(subprocess.Popen(
                [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path(name)), *layout, "--host", "127.0.0.1",
                 "--port", str(port), "--n_ctx", "4096", "--model_alias", alias], stdout=log, stderr=subprocess.STDOUT))
            deadline = time.monotonic() + 180
            while True:
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
                    break
                except OSError:
                    if procs[-1].poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError("the llama.cpp server did not start: " + log_path.read_text()[-2000:])
                    time.sleep(0.2)  # polling for the server to come up, not waiting for a result
            proxy = Proxy(f"http://127.0.0.1:{port}")
            threading.Thread(target=proxy.serve_forever, daemon=True).start()
            proxies[alias] = proxy
        yield proxies
    finally:
        for proxy in proxies.values():
            proxy.shutdown()
            proxy.server_close()
        for proc in procs:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        for log in logs:
            log.close()


# -- the scenario, cut to two questions -------------------------------------------------------
ALIAS = {"gemma3-270m": "gemma", "smollm2-135m": "smollm"}  # each packaged model's name at its server


def reduced(tmp_path: Path, served: dict | None = None, games: list | None = None, agents: dict | None = None) -> Path:
    """scenarios/local-models.yaml with its question file cut to two questions; ``served``: each
    agent's model behind a server (alias -> proxy) instead of in this process; ``games``, ``agents``:
    others instead of the scenario's."""
    folder = tmp_path / "scenario"
    (folder / "data").mkdir(parents=True)
    lines = (DATA / "local-questions.jsonl").read_text(encoding="utf-8").splitlines()[:2]
    (folder / "data" / "local-questions.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    for name in ("sample-pairs.jsonl", "labelled-pairs.jsonl"):
        shutil.copy(DATA / name, folder / "data" / name)
    raw = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))
    if agents is not None:
        raw["agents"] = agents
    if served:
        for name, agent in raw["agents"].items():
            keep = {k: v for k, v in agent.items() if k in ("temperature", "max_tokens")}
            alias = ALIAS[agent["model"]]
            raw["agents"][name] = {"backend": "openai", "base_url": served[alias].url, "model": alias, **keep}
    if games is not None:
        raw["games"] = games
    path = folder / "local-models.yaml"
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def run(tmp_path: Path, scenario: Path) -> tuple[RunReader, float]:
    started = time.monotonic()
    done = arena_offline("run", scenario, "--run-dir", tmp_path / "run", "--quiet", cwd=tmp_path, timeout=3000)
    took = time.monotonic() - started
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    print(f"{scenario.name}: {took:.0f} s")  # shown with -s: the figure the README quotes
    return open_run(tmp_path / "run"), took


def judged(store: RunReader, agent: str, first_round: int = 1) -> list:
    """The agent's turns from ``first_round`` on, in every finished match."""
    turns = []
    for record in store.records():
        assert record.status == "finished", record.error
        seats = {s.label for s in record.seats if s.agent == agent}
        turns += [e for e in record.events if e.type == "action" and e.seat in seats and e.round >= first_round]
    return turns


def share_parsed(turns) -> float:
    return sum(not t.defaulted for t in turns) / len(turns)


def check_leaderboard(tmp_path: Path) -> dict:
    ranked = arena_offline("rank", tmp_path / "run", "--json", cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    board = json.loads(ranked.stdout)["peer_rank"]
    assert sorted(board["contestants"]) == ["gemma", "smollm"]
    for method in board["methods"]:
        assert set(method["low"]) == set(method["high"]) == {"gemma", "smollm"}
        assert all(method["low"][n] <= method["scores"][n] <= method["high"][n] for n in ("gemma", "smollm"))
    shown = arena_offline("rank", tmp_path / "run", "--plain", cwd=tmp_path)
    assert shown.returncode == 0 and "gemma" in shown.stdout and "smollm" in shown.stdout
    return board


def test_the_local_models_scenario_in_this_process_gives_a_leaderboard(tmp_path):
    store, _ = run(tmp_path, reduced(tmp_path))
    verdicts = judged(store, INSTRUCT, first_round=2)  # round 1: the answers
    assert len(verdicts) == 4  # two questions, one pair, both orders
    assert share_parsed(verdicts) >= 0.9, [t.reply for t in verdicts]
    modes = [n for n in store.notes() if n["topic"] == "output mode"]
    assert {n["agent"] for n in modes} == {"gemma", "smollm"} and all("output mode grammar" in n["text"] for n in modes)
    check_leaderboard(tmp_path)


def test_the_local_models_scenario_behind_llama_cpps_server_offers_the_schema(tmp_path, servers, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    for proxy in servers.values():
        proxy.bodies.clear()
    store, _ = run(tmp_path, reduced(tmp_path, served=servers))
    verdicts = judged(store, INSTRUCT, first_round=2)
    assert len(verdicts) == 4 and share_parsed(verdicts) >= 0.9, [t.reply for t in verdicts]
    check_leaderboard(tmp_path)
    bodies = [b for b in servers["smollm"].bodies if "[Assistant 1]" in b["messages"][-1]["content"]]
    assert bodies
    for body in bodies:  # json_schema refused once (500), then json_object with the verdict's schema
        assert body["response_format"]["type"] in ("json_schema", "json_object")
        schema = body["response_format"].get("schema") or body["response_format"]["json_schema"]["schema"]
        assert list(schema["properties"]) == ["explanation", "choice"]
    assert any(b["response_format"]["type"] == "json_object" for b in bodies)
    # (gemma's answers may echo the answer prompt: a judging body can hold "Write your answer." too)
    answers = [b for b in servers["smollm"].bodies if b["messages"][-1]["content"].endswith("Write your answer.")]
    assert answers and not any("response_format" in b for b in answers)


DISCUSSION = [
    {"game": "peer_discussion", "params": {"pairs": "data/sample-pairs.jsonl", "max_turns": 2, "stop": "turns"}},
    {"game": "chateval_debate", "params": {"pairs": "data/labelled-pairs.jsonl", "turns": 1, "output": "choice",
                                           "position_calibration": False}},
]


def first_case(scenario: Path) -> None:
    for name in ("sample-pairs.jsonl", "labelled-pairs.jsonl"):
        path = scenario.parent / "data" / name
        path.write_text(path.read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")


@pytest.mark.parametrize("where", ["embedded", "server"])
def test_the_instruct_model_discusses_and_debates_with_valid_turns(tmp_path, where, request, monkeypatch):
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    served = request.getfixturevalue("servers") if where == "server" else None
    for proxy in (served or {}).values():
        proxy.bodies.clear()  # the servers are the module's: only this test's bodies count
    instruct = yaml.safe_load(SCENARIO.read_text(encoding="utf-8"))["agents"][INSTRUCT]
    scenario = reduced(tmp_path, served=served, games=DISCUSSION,
                       agents={INSTRUCT: instruct, INSTRUCT + "_2": {**instruct, "temperature": 0.7}})
    first_case(scenario)
    store, _ = run(tmp_path, scenario)
    turns = judged(store, INSTRUCT) + judged(store, INSTRUCT + "_2")
    assert len(turns) >= 6  # the discussion's 4 turns and the debate's 2
    assert share_parsed(turns) >= 0.9, [t.reply for t in turns]
    if served:
        bodies = served["smollm"].bodies
        plain = [b for b in bodies if "response_format" not in b]
        assert bodies and not plain, plain
        assert all(list((b["response_format"].get("schema") or b["response_format"]["json_schema"]["schema"])
                        ["properties"])[0] in ("message", "argument") for b in bodies)
