"""True costs on reruns: a reply the response cache gives back keeps the tokens, cost and latency
of its first asking; every usage report (``arena rank --json``, the tables of ``arena run`` and
``arena rank``, the report's cost section) shows what was spent beside what the cache saved; the
budget counts only what was spent.

Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

import pytest
import yaml

from arena.contract.calls import CachedReply, CallRecord
from arena.results.usage import usage_by_agent
from arena.services.cache import ResponseCache

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import arena_offline
from mock_llm import OpenAIMock

SPENT = "model calls per agent: spent"
SAVED = "saved by the response cache"



def table_rows(output: str, title: str) -> dict[str, list[str]]:
    """The rows of the table whose title starts with ``title``, by their first cell."""
    lines = output.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = {}
    for line in lines[start + 1:]:
        if line.startswith("└"):
            break
        if line.startswith("│"):
            cells = [c.strip() for c in line.strip("│").split("│")]
            rows[cells[0]] = cells
    return rows


def scenario(mock: OpenAIMock, **top) -> dict:
    agent = {"backend": "openai", "base_url": mock.base_url, "model": "gpt-4o-mini", "backoff": 0.01, "timeout": 20}
    return {"name": "costs", "seed": 7, "agents": {"alice": agent, "bob": dict(agent),
                                                    "carol": {"backend": "scripted", "strategy": "tit_for_tat"}},
            "games": [{"game": "public_goods", "params": {"rounds": 2}}], "tournament": {"repeats": 2}, **top}


def write(path: Path, raw: dict) -> Path:
    path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
    return path


def usage(run_dir: Path, cwd: Path) -> dict[str, dict]:
    shown = arena_offline("rank", run_dir, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    return {u["agent"]: u for u in json.loads(shown.stdout)["usage"]}


def test_usage_splits_what_was_spent_from_what_the_cache_saved():
    def call(agent, cached=False, cost=0.01, latency=1.0, error=None, tokens=(100, 10)):
        # a failure the server answered with a status spent nothing, as the backend records it
        return CallRecord(match="m#1", seat="Player 1", round=1, attempt=0, agent=agent, backend="openai", model="x",
                          prompt_tokens=0 if error else tokens[0], completion_tokens=0 if error else tokens[1],
                          cost=0.0 if error else cost, latency=latency, cached=cached, error=error)

    rows = {u.agent: u for u in usage_by_agent([
        call("ada"), call("ada", latency=3.0, tokens=(200, 20)), call("ada", error="500: down", latency=0.5),
        call("ada", cached=True, cost=0.02, latency=2.5, tokens=(300, 30)),
        call("bo", cached=True, cost=None, latency=4.0),  # cached from a run that did not know the price
    ])}
    ada, bo = rows["ada"], rows["bo"]
    assert (ada.calls, ada.cached, ada.failed) == (4, 1, 1)
    assert (ada.prompt_tokens, ada.completion_tokens, ada.cost, ada.seconds) == (300, 30, pytest.approx(0.02), 4.5)
    assert ada.latency == pytest.approx(1.5)  # mean over the three calls that reached the model
    assert (ada.saved_prompt_tokens, ada.saved_completion_tokens, ada.saved_cost, ada.saved_seconds) == (300, 30, 0.02, 2.5)
    assert (bo.prompt_tokens, bo.cost, bo.seconds, bo.latency) == (0, 0.0, 0.0, 0.0)  # nothing spent
    assert (bo.saved_prompt_tokens, bo.saved_cost, bo.saved_seconds) == (100, None, 4.0)  # price unknown: cost unknown


def test_an_old_cache_file_opens_and_gains_cost_and_latency(tmp_path):
    path = tmp_path / "responses.sqlite"
    db = sqlite3.connect(path)  # the table as the first release of the cache wrote it
    db.execute("CREATE TABLE responses (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER, "
               "completion_tokens INTEGER, at REAL)")
    db.execute("INSERT INTO responses VALUES ('old', 'an old reply', 12, 3, 0)")
    db.commit()
    db.close()

    cache = ResponseCache(path)
    assert cache.get("old") == CachedReply("an old reply", 12, 3, None, None)  # kept; its cost and time unknown
    cache.put("new", CachedReply("a new reply", 40, 5, 0.00123, 0.75))
    cache.close()
    cache = ResponseCache(path)  # and opened again, the columns already there
    assert cache.get("new") == ("a new reply", 40, 5, 0.00123, 0.75) and cache.get("old").text == "an old reply"
    assert cache.get("missing") is None
    cache.close()


def test_a_cached_rerun_spends_nothing_and_saves_what_the_first_run_spent(tmp_path):
    with OpenAIMock() as mock:
        path = write(tmp_path / "s.yaml", scenario(mock))
        run_dir = tmp_path / "run"
        first = arena_offline("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        asked = mock.count
        assert asked == 2 * 2 * 2  # 2 matches x 2 rounds x 2 model seats
        paid = usage(run_dir, tmp_path)
        for u in paid.values():
            assert u["calls"] == 4 and u["cached"] == 0 and u["prompt_tokens"] > 0 and u["completion_tokens"] > 0
            assert u["cost"] > 0 and u["seconds"] > 0
            assert (u["saved_prompt_tokens"], u["saved_completion_tokens"], u["saved_cost"], u["saved_seconds"]) == (0, 0, 0, 0)
        spent_first = table_rows(first.stdout, SPENT)
        assert SAVED not in first.stdout  # nothing came from the cache

        again = arena_offline("run", path, "--quiet", "--run-dir", run_dir, "--force-new", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert mock.count == asked  # every reply from the cache

    rerun = usage(run_dir, tmp_path)
    assert set(rerun) == set(paid) == {"alice", "bob"}
    for agent, u in rerun.items():
        before = paid[agent]
        assert (u["calls"], u["cached"]) == (4, 4)
        assert (u["prompt_tokens"], u["completion_tokens"], u["cost"], u["seconds"], u["latency"]) == (0, 0, 0, 0, 0)
        assert (u["saved_prompt_tokens"], u["saved_completion_tokens"]) == (before["prompt_tokens"], before["completion_tokens"])
        assert u["saved_cost"] == pytest.approx(before["cost"]) and u["saved_seconds"] == pytest.approx(before["seconds"])

    ranked = arena_offline("rank", run_dir, cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    for output in (again.stdout, ranked.stdout):  # the table at the end of the run, and arena rank's
        spent, saved = table_rows(output, SPENT), table_rows(output, SAVED)
        for agent in ("alice", "bob"):
            _, calls, cached, _, _, prompt, reply, cost, _ = spent[agent]
            assert (calls, cached, prompt, reply, cost) == ("4", "4", "0", "0", "$0.0000")
            _, replies, prompt, reply, cost, seconds = saved[agent]
            first_row = spent_first[agent]
            assert (replies, prompt, reply, cost) == ("4", *first_row[5:8])
            assert float(seconds.removesuffix(" s")) == pytest.approx(paid[agent]["seconds"], abs=0.01)

    report = arena_offline("report", run_dir, "-o", tmp_path / "report.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="cost">'):]
    section = section[:section.index("</section>")]
    spent_html, saved_html = section.split('<table class="saved">')
    total = sum(u["saved_prompt_tokens"] for u in rerun.values())
    assert f'<td class="num">{total}</td>' in saved_html  # the saved total: the first run's prompt tokens
    assert f"${sum(u['saved_cost'] for u in rerun.values()):.4f}" in saved_html
    assert f"${sum(u['cost'] for u in paid.values()):.4f}" not in spent_html  # nothing of it spent again


def test_the_budget_counts_only_what_was_spent(tmp_path):
    """A rerun answered from the cache spends nothing, so the smallest budget does not stop it;
    the first run, which paid, is stopped by that budget after its first match."""
    with OpenAIMock() as mock:
        run_dir = tmp_path / "run"
        paid = write(tmp_path / "paid.yaml", scenario(mock, concurrency=1))
        first = arena_offline("run", paid, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        asked = mock.count

        tight = write(tmp_path / "tight.yaml", scenario(mock, concurrency=1, budget={"tokens": 1}))
        cached = arena_offline("run", tight, "--quiet", "--run-dir", run_dir, "--force-new", cwd=tmp_path)
        assert cached.returncode == 0, cached.stdout + cached.stderr
        assert "Stopped" not in cached.stdout and "2 of 2 matches finished" in " ".join(cached.stdout.split())
        assert mock.count == asked

        fresh = arena_offline("run", tight, "--quiet", "--run-dir", tmp_path / "fresh", "--no-cache", cwd=tmp_path)
        assert fresh.returncode == 3, fresh.stdout + fresh.stderr
        assert re.search(r"Stopped: the budget of 1 tokens is used \(\d+\); 1 matches were not started",
                         " ".join(fresh.stdout.split()))


def test_replies_cached_before_costs_were_kept_are_priced_from_their_tokens(tmp_path):
    """A cache file written before it kept cost and latency still answers a rerun; the saved cost
    is worked out from the stored tokens and the model's price, the saved time is unknown (0)."""
    with OpenAIMock() as mock:
        path = write(tmp_path / "s.yaml", scenario(mock))
        run_dir = tmp_path / "run"
        first = arena_offline("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
        assert first.returncode == 0, first.stdout + first.stderr
        paid = usage(run_dir, tmp_path)

        db = sqlite3.connect(run_dir / "responses.sqlite")  # back to the old table: no cost, no latency
        db.executescript("""
            CREATE TABLE old (key TEXT PRIMARY KEY, text TEXT NOT NULL, prompt_tokens INTEGER, completion_tokens INTEGER, at REAL);
            INSERT INTO old SELECT key, text, prompt_tokens, completion_tokens, at FROM responses;
            DROP TABLE responses;
            ALTER TABLE old RENAME TO responses;
        """)
        db.close()

        again = arena_offline("run", path, "--quiet", "--run-dir", run_dir, "--force-new", cwd=tmp_path)
        assert again.returncode == 0, again.stdout + again.stderr
        assert mock.count == 8

    for agent, u in usage(run_dir, tmp_path).items():
        assert u["cached"] == 4 and u["cost"] == 0
        assert u["saved_prompt_tokens"] == paid[agent]["prompt_tokens"]
        assert u["saved_cost"] == pytest.approx(paid[agent]["cost"]) and u["saved_seconds"] == 0
    db = sqlite3.connect(run_dir / "responses.sqlite")
    assert {"cost", "latency"} <= {row[1] for row in db.execute("PRAGMA table_info(responses)")}
    db.close()


async def test_a_request_already_being_asked_is_waited_for_not_sent_twice(tmp_path):
    """Two matches that ask a model the very same thing at the same moment pay for it once: the
    second waits for the first one's reply, which the cache then gives it. Without that, whether a
    run pays once or twice (and what its calls table says) would depend on which match got there
    first."""
    import threading

    import trio.testing

    from arena.contract import Turn
    from arena.run.runner import build_agents
    from arena.run.scenario import parse_scenario
    from arena.services.calls import RunServices

    arrived, release = threading.Event(), threading.Event()

    def held(body):
        arrived.set()
        release.wait(60)  # until both have asked
        return {"reason": "same for both", "coins": 3}

    with OpenAIMock(responder=held) as mock:
        records: list[CallRecord] = []
        services = RunServices(cache=ResponseCache(tmp_path / "responses.sqlite"), record_call=records.append)
        agents = build_agents(parse_scenario(scenario(mock)), services)
        alice, bob = agents["alice"], agents["bob"]
        bob.config = alice.config  # two agents of one model and settings: the same request
        turn = Turn(match="m", seat="Player 1", role="Player", round=1, history=(), prompt="Your move.", seed=5)
        replies = {}

        async def ask(agent):
            replies[agent.name] = await agent.reply(turn)

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, alice)
                await trio.to_thread.run_sync(arrived.wait)  # alice's request is at the server
                nursery.start_soon(ask, bob)
                await trio.testing.wait_all_tasks_blocked()  # bob has asked too, and is waiting
                assert mock.count == 1
                release.set()
        finally:
            release.set()
            for agent in agents.values():
                await agent.aclose()
            services.close()
        assert mock.count == 1
    assert replies["alice"] == replies["bob"]
    assert [(r.agent, r.cached, r.prompt_tokens) for r in records] == [
        ("alice", False, records[0].prompt_tokens), ("bob", True, records[0].prompt_tokens)]


class NoUsageMock(OpenAIMock):
    """A server whose answers carry no ``usage``, as some local servers and proxies send them."""

    def answer(self, route, body, handler, garbage=False):
        status, headers, payload, text = super().answer(route, body, handler, garbage)
        payload.pop("usage")
        return status, headers, payload, text


def test_tokens_nobody_counted_are_unknown_in_every_table_not_zero(tmp_path):
    """Answers without usage: the run's and rank's tables, ``rank --json`` and the report say the
    tokens and the cost are unknown; none of them shows 0 tokens or $0.0000 for them."""
    with NoUsageMock() as mock:
        path = write(tmp_path / "s.yaml", scenario(mock))
        run_dir = tmp_path / "run"
        ran = arena_offline("run", path, "--quiet", "--run-dir", run_dir, cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert mock.count == 8
    for agent, u in usage(run_dir, tmp_path).items():
        assert (u["calls"], u["unknown"]) == (4, 4), agent
        assert (u["prompt_tokens"], u["completion_tokens"], u["cost"]) == (None, None, None)
    ranked = arena_offline("rank", run_dir, cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    for output in (ran.stdout, ranked.stdout):
        spent = table_rows(output, SPENT)
        for agent in ("alice", "bob"):
            assert spent[agent][5:8] == ["unknown", "unknown", "unknown"], spent[agent]
    report = arena_offline("report", run_dir, "-o", tmp_path / "report.html", cwd=tmp_path)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="cost">'):]
    section = section[:section.index("</section>")]
    assert "$0.0000" not in section and section.count("unknown") >= 3 * 3  # two agents and the total, three cells each


def test_a_call_cut_off_is_unknown_and_a_refused_one_spent_nothing():
    """What the backend records: a call the server refused with a status spent nothing (0 tokens,
    $0); one the turn's deadline cut off, or whose connection dropped, may have been billed: unknown.
    A total over them is unknown, never the known part alone."""
    def call(agent, tokens, cost, error=None):
        return CallRecord(match="m#1", seat="Player 1", round=1, attempt=0, agent=agent, backend="openai",
                          model="gpt-4o-mini", prompt_tokens=tokens[0], completion_tokens=tokens[1], cost=cost,
                          latency=1.0, error=error)

    rows = {u.agent: u for u in usage_by_agent([
        call("ada", (100, 10), 0.01), call("ada", (0, 0), 0.0, error="429: slow down (after 5 tries)"),
        call("bo", (100, 10), 0.01), call("bo", (None, None), None, error="cut off by the turn's deadline after 60.0 s"),
    ])}
    assert (rows["ada"].prompt_tokens, rows["ada"].completion_tokens, rows["ada"].unknown) == (100, 10, 0)
    assert rows["ada"].cost == pytest.approx(0.01)
    assert (rows["bo"].prompt_tokens, rows["bo"].completion_tokens, rows["bo"].cost, rows["bo"].unknown) == (None, None, None, 1)


# -- one way to say spend: a model in this process costs $0, an unpriced server's cost is unknown ----
def in_process_backend():
    from arena.agents.openai_backend import OpenAIAgent

    class InProcess(OpenAIAgent):
        """The openai backend declared free, as the embedded llamacpp backend is: a model run in this process
        costs no money, whatever its name, with no price given."""

        backend_name = "in_process"
        free = True

    return InProcess


class Recording:
    """Services that keep the calls an agent records."""

    use_cache = False
    prices: dict = {}

    def __init__(self):
        self.calls: list[CallRecord] = []

    def record_call(self, call: CallRecord) -> None:
        self.calls.append(call)


async def test_an_unanswered_probe_of_a_model_in_this_process_costs_nothing_a_servers_is_unknown():
    from arena.agents.openai_backend import OpenAIAgent
    from arena.contract.errors import BackendUnavailable

    with OpenAIMock(["500", "500"]) as mock:
        for backend, cost in ((in_process_backend(), 0.0), (OpenAIAgent, None)):
            services = Recording()
            agent = backend("m", backend.Config(base_url=mock.base_url, model="mock-model", api_key_env="NO_SUCH_KEY"),
                            services)
            try:
                with pytest.raises(BackendUnavailable):
                    await agent.probe()
            finally:
                await agent.aclose()
            assert [(c.prompt_tokens, c.cost) for c in services.calls] == [(None, cost)], backend


async def test_the_same_model_in_this_process_costs_0_and_behind_a_server_unknown_in_every_view(tmp_path, capsys):
    import io

    from rich.console import Console

    from arena.cli.commands import main
    from arena.cli.dashboard import Dashboard
    from arena.cli.live import CallTally
    from arena.contract import plugins
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    plugins.register("agent backend", "in_process", in_process_backend())
    try:
        with OpenAIMock() as mock:
            agent = {"base_url": mock.base_url, "model": "mock-model", "backoff": 0.01, "timeout": 20}
            raw = {"name": "spend", "seed": 3, "agents": {"embedded": {"backend": "in_process", **agent},
                                                          "served": {"backend": "openai", **agent}},
                   "games": [{"game": "public_goods", "params": {"rounds": 2}}], "tournament": {"format": "fixed"}}
            scenario = parse_scenario(raw)
            store = RunStore.create_or_resume(tmp_path / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
            view = Dashboard(Console(file=io.StringIO(), width=200), "spend")
            await run_tournament(scenario, store, view)
            calls = list(store.read.calls())
            store.close()
    finally:
        plugins.unregister("agent backend", "in_process")
    # the dashboard's model calls table: agent, calls, in flight, tokens in, tokens out, spend
    screen = io.StringIO()
    Console(file=screen, width=200).print(view.render())
    table = screen.getvalue().split("model calls", 1)[1].split("latest messages", 1)[0]
    rows = {line.split()[0]: line.split() for line in table.splitlines() if line.split()[:1] in (["embedded"], ["served"])}
    assert rows["embedded"][5] == "$0.0000" and rows["served"][5] == "unknown", screen.getvalue()
    # the line said when the match ends: the known part, and how many calls have no price
    tally = CallTally()
    for call in calls:
        tally.add(call)
    assert ", cost $0.0000 (+2 unpriced), " in tally.pop_line(calls[0].match)
    # arena rank's table and the report: Agent, Calls, Cached, Retries, Failed, Tokens in, Tokens out, Cost
    assert main(["rank", str(tmp_path / "run")]) == 0
    spent = table_rows(capsys.readouterr().out, SPENT)
    assert spent["embedded"][7] == "$0.0000" and spent["served"][7] == "unknown", spent
    assert main(["report", str(tmp_path / "run"), "-o", str(tmp_path / "r.html")]) == 0
    html = (tmp_path / "r.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="cost">'):]
    section = section[:section.index("</section>")]
    cost = {name: cells[6] for name, *cells in re.findall(r'<tr[^>]*><td class="name">(\w+)</td>' + '<td class="num">([^<]*)</td>' * 8,
                                                         section)}
    assert cost == {"embedded": "$0.0000", "served": "unknown", "total": "unknown"}, section
