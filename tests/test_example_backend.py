"""The worked example of docs/writing-an-agent-backend.md: an agent backend for Ollama's own chat API
(docs/examples/ollama_chat.py), installed as a package of its own through the guide's entry point,
plays public goods against a local server speaking that API (tests/mock_llm.py's OllamaMock). What
each request carried is checked against the match, turn by turn; what the run logged, call by call;
and a failing server, a refused request and a missing key end the way the contract says."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from arena.contract import BackendUnavailable, CallRecord, FatalAgentError, MatchSettings, MatchSpec, Services, plugins
from arena.engine.match import play_match
from arena.contract import open_run
from arena.store import RunStore

from conformance_kit import LOCAL, assert_conversation, local_only, seat_turns  # noqa: F401  (local_only: a fixture)
from helpers import mock_tokens
from mock_llm import OllamaMock

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "ollama_chat.py"
GUIDE = ROOT / "docs" / "writing-an-agent-backend.md"


def guide_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)


def make_site(root: Path) -> Path:
    """A folder that looks like site-packages after installing the guide's package: its module, and
    the entry points its pyproject.toml declares."""
    (project,) = [tomllib.loads(block)["project"] for block in guide_blocks("toml")]
    site = root / "site"
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir(parents=True)
    shutil.copy(EXAMPLE, site / EXAMPLE.name)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    groups = "".join(f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in eps.items())
                     for group, eps in project["entry-points"].items())
    (dist / "entry_points.txt").write_text(groups)
    return site


@pytest.fixture
def installed(tmp_path, monkeypatch):
    site = make_site(tmp_path)
    monkeypatch.syspath_prepend(str(site))
    plugins.refresh()
    yield site
    monkeypatch.undo()
    sys.modules.pop("ollama_chat", None)
    plugins.refresh()


class Logged(Services):
    """The run's services as a backend sees them, keeping the calls it logs."""

    def __init__(self):
        self.calls: list[CallRecord] = []
        self.started: list[str] = []

    def call_started(self, call) -> None:
        self.started.append(call.token)

    def record_call(self, call: CallRecord) -> None:
        self.calls.append(call)


def backend(name: str, mock: OllamaMock, services: Services, **config):
    cls = plugins.load("agent backend", "ollama_chat")
    raw = {"backend": "ollama_chat", "model": "mock-model", "base_url": mock.base_url, "backoff": 0.01, **config}
    return cls(name, cls.Config.model_validate(raw), services)


def spec(agents, **settings) -> MatchSpec:
    return MatchSpec(key="pg#1", game="public_goods", params={"rounds": 2}, agents=tuple(agents), seed=5,
                     shuffle_seats=False, settings=MatchSettings(**{"turn_timeout": 60, **settings}))


def arena(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "160", "NO_PROXY": LOCAL, "no_proxy": LOCAL}
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=300)


# -- the guide shows the file it explains ---------------------------------------------------------------


def test_the_guide_shows_the_example_file_verbatim():
    assert guide_blocks("python")[0] == EXAMPLE.read_text(encoding="utf-8")


def test_every_other_snippet_of_the_guide_is_a_piece_of_this_file():
    here = Path(__file__).read_text(encoding="utf-8")
    for block in guide_blocks("python")[1:]:
        assert any(textwrap.indent(block, "    " * depth) in here for depth in range(3)), block[:200]


# -- registered through its entry point, from the command line --------------------------------------------


def test_the_guides_scenario_runs_the_backend_from_its_entry_point(tmp_path):
    site = make_site(tmp_path)
    listed = arena(tmp_path, site, "agents", "--json")
    assert listed.returncode == 0, listed.stderr
    (entry,) = [a for a in json.loads(listed.stdout) if a["name"] == "ollama_chat"]
    assert entry["calls_models"] is True

    (text,) = [b for b in guide_blocks("yaml") if b.startswith("# ollama.yaml")]
    with OllamaMock() as mock:
        raw = yaml.safe_load(text)
        for agent in raw["agents"].values():
            agent["base_url"] = mock.base_url  # the guide's scenario, pointed at the local server
        (tmp_path / "ollama.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        checked = arena(tmp_path, site, "validate", "ollama.yaml")
        assert checked.returncode == 0, checked.stdout + checked.stderr
        estimated = arena(tmp_path, site, "run", "ollama.yaml", "--dry-run", "--json")
        assert estimated.returncode == 0, estimated.stdout + estimated.stderr
        assert not mock.requests  # a dry run asks no model
        estimate = json.loads(estimated.stdout)  # three rounds: three calls each, every reply at most max_tokens
        assert {a["agent"]: (a["calls"], a["completion_tokens_max"]) for a in estimate["agents"]} == {
            "small": (3, 3 * 512), "tiny": (3, 3 * 512)}
        done = arena(tmp_path, site, "run", "ollama.yaml", "--quiet", "--run-dir", "run")
        assert done.returncode == 0, done.stdout + done.stderr
        requests = mock.answered()

    store = open_run(tmp_path / "run")
    try:
        (record,) = store.records()
        calls = list(store.calls())
    finally:
        store.close()
    rounds = raw["games"][0]["params"]["rounds"]
    assert record.status == "finished" and record.rounds == rounds

    # every request is one turn of one seat, holding that seat's whole conversation and nothing else,
    # with the game's schema as Ollama's `format` and a seed drawn from the match
    turns, outside = seat_turns(record, requests)
    assert not outside and len(turns) == 2 * rounds
    models = {agent["model"] for agent in raw["agents"].values()}
    for turn in turns:
        assert_conversation(record, turn)
        body = turn.request.body
        assert body["model"] in models and body["stream"] is False and body["options"]["temperature"] == 0.7
        assert isinstance(body["options"]["seed"], int) and body["options"]["num_predict"] == 512
        assert body["format"]["properties"]["coins"]["maximum"] == 10 and "reason" in body["format"]["properties"]
        assert not any(name in turn.text for name in raw["agents"])  # no agent's name reaches a model

    # the run logged one call per turn, with the tokens the server counted and no error
    assert len(calls) == len(requests)
    for call, request in zip(sorted(calls, key=lambda c: (c.round, c.seat)), sorted(
            requests, key=lambda r: next((t.round, t.seat) for t in turns if t.request is r))):
        assert (call.backend, call.model, call.error, call.retries, call.cost) == (
            "ollama_chat", request.body["model"], None, 0, 0.0)
        assert call.prompt_tokens == mock_tokens(request.messages) and call.completion_tokens == mock_tokens(request.reply)
        assert call.agent == record.agent_of(call.seat)


# -- in process: retries, outages, refusals, keys ---------------------------------------------------------


async def test_a_server_error_is_tried_again_within_the_turn(installed):
    services = Logged()
    with OllamaMock(["500", "429"]) as mock:
        agents = {n: backend(n, mock, services) for n in ("a", "b")}
        record = await play_match(spec(agents), agents)
        assert record.status == "finished", record.error
        assert [r.behaviour for r in mock.requests][:2] == ["500", "429"] and len(mock.requests) == 6
    # the two failures hit both seats' first turns, or one seat's twice
    assert sorted(c.retries for c in services.calls) in ([0, 0, 1, 1], [0, 0, 0, 2])
    assert all(c.error is None for c in services.calls) and len(services.started) == 6  # one per try


async def test_a_server_that_keeps_failing_interrupts_the_match_unscored(installed):
    services = Logged()
    with OllamaMock(lambda count, body: "500") as mock:
        agents = {n: backend(n, mock, services, retries=2) for n in ("a", "b")}
        record = await play_match(spec(agents), agents)
        assert len(mock.requests) == 6  # each of the two first turns tried three times
    assert record.status == "interrupted" and record.payoffs == {}
    assert "backend ollama_chat at http://127.0.0.1:" in record.error and "after 3 tries" in record.error
    assert sorted((c.seat, c.retries) for c in services.calls) == [("Player 1", 2), ("Player 2", 2)]
    assert all(c.error.startswith("HTTP 500: ") and "the model runner stopped" in c.error for c in services.calls)


async def test_a_refused_request_fails_the_match_and_is_never_taken_for_a_move(installed):
    services = Logged()
    with OllamaMock(lambda count, body: "400") as mock:
        agents = {n: backend(n, mock, services) for n in ("a", "b")}
        record = await play_match(spec(agents), agents)
    assert record.status == "failed" and "the server refused the request: HTTP 400" in record.error
    errors = {c.error.split(":")[0] for c in services.calls}  # the other seat's call, if still out, was cancelled
    assert "ArenaError" in errors and errors <= {"ArenaError", "cancelled"}
    assert not [e for e in record.events if e.type == "action"]


async def test_a_reply_the_game_refuses_is_asked_again_with_the_reason(installed):
    services = Logged()
    with OllamaMock(["garbage"]) as mock:
        agents = {n: backend(n, mock, services) for n in ("a", "b")}
        record = await play_match(spec(agents, max_retries=1), agents)
        first, again = [r for r in mock.requests if r.messages[0] == mock.requests[0].messages[0]][:2]
    assert record.status == "finished", record.error
    (failed,) = [e for e in record.events if e.type == "turn_failed"]
    assert again.messages[:-2] == first.messages  # the same conversation, then the refused reply and why
    assert again.messages[-2] == {"role": "assistant", "content": first.reply}
    assert again.messages[-1]["content"].startswith(failed.reason)


async def test_the_key_comes_from_the_environment_and_never_reaches_an_error(installed, monkeypatch):
    services = Logged()
    with OllamaMock(lambda count, body: "400", echo_key=True) as mock:
        agents = {n: backend(n, mock, services, api_key_env="OLLAMA_PROXY_KEY") for n in ("a", "b")}
        with pytest.raises(FatalAgentError, match="set the environment variable OLLAMA_PROXY_KEY"):
            await agents["a"].prepare()
        monkeypatch.setenv("OLLAMA_PROXY_KEY", "sk-secret-123")
        for agent in agents.values():
            await agent.prepare()
        record = await play_match(spec(agents), agents)
    # the first refusal fails the match, so the other seat's request may be cancelled before it is sent
    assert [r.api_key for r in mock.requests] in (["sk-secret-123"], ["sk-secret-123"] * 2)
    assert record.status == "failed" and "key presented: ***" in record.error and "sk-secret" not in record.error
    assert all("sk-secret" not in (c.error or "") for c in services.calls)


async def test_probe_says_whether_the_server_is_back(installed):
    with OllamaMock(["drop"]) as mock:
        agent = backend("a", mock, Services())
        with pytest.raises(BackendUnavailable, match="ollama_chat"):
            await agent.probe()
        await agent.probe()  # answered now
        assert len(mock.requests) == 2 and mock.requests[1].body["options"] == {"num_predict": 4}
