"""The live round log, as a person watching a terminal sees it."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from arena.cli.live import RoundLog
from arena.engine.match import play_match
from arena.contract.records import MatchSettings, MatchSpec
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario

from helpers import mock_tokens, scripted
from mock_llm import OpenAIMock


async def test_terminal_log_prints_a_table_per_round_with_names_and_flags():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160, color_system=None)
    log = RoundLog(console)
    assert not log.plain
    agents = {"giver": scripted("giver", "always_all"), "noise": scripted("noise", "garbage")}
    spec = MatchSpec(key="pg#1", game="public_goods", params={"rounds": 2, "mode": 2}, agents=("giver", "noise"),
                     seed=0, settings=MatchSettings(max_retries=1))
    await play_match(spec, agents, [log])
    screen = buffer.getvalue()
    assert screen.count("pg#1 · round") == 2
    assert "giver" in screen and "noise" in screen  # the watcher sees who sits where
    assert "invalid ×2 → default" in screen
    assert "the players put in [10, 0] coins" in screen
    assert "■ pg#1 ended after 2 rounds" in screen


async def test_plain_log_is_one_line_per_event_when_not_a_terminal():
    buffer = io.StringIO()
    log = RoundLog(Console(file=buffer, width=100))
    assert log.plain  # a file is not a terminal
    agents = {"giver": scripted("giver", "always_all"), "taker": scripted("taker", "free_rider")}
    await play_match(MatchSpec(key="m", game="public_goods", params={"rounds": 1}, agents=("giver", "taker"), seed=0), agents, [log])
    lines = buffer.getvalue().splitlines()
    assert lines[0].startswith("[m] start public_goods seed=0 seats: Player 1=")
    assert any(l.startswith("[m] r1 Player") and "(giver) -> 10 |" in l for l in lines)
    assert any("Referee -> Player" in l and "the pool paid you 7.5 coins" in l for l in lines)
    assert lines[-1].startswith("[m] end after 1 rounds:")


@pytest.mark.parametrize("plain", [True, False])
async def test_the_log_says_each_note_once_and_the_model_calls_of_each_match(noting_backend, plain):
    with OpenAIMock(["ok", "500"]) as mock:  # the second request fails once and is tried again
        url = mock.base_url
        scenario = parse_scenario({
            "name": "log",
            "agents": {"giver": {"backend": "scripted", "strategy": "always_all"},
                       "model": {"backend": noting_backend, "model": "mock-model", "base_url": url, "backoff": 0.01}},
            "games": [{"game": "public_goods", "params": {"rounds": 2}}],
            "tournament": {"format": "fixed", "repeats": 2},
            "concurrency": 1,
            "prices": {"mock-model": {"input": 1.0, "output": 2.0}},
        })
        buffer = io.StringIO()
        log = RoundLog(Console(file=buffer, width=300, force_terminal=not plain, color_system=None), plain=plain)
        await run_tournament(scenario, None, log)
        requests = mock.answered()
    lines = buffer.getvalue().splitlines()
    noted = sorted(l.strip() for l in lines if "note:" in l)
    assert noted[0] == f"note: agent model at {url}: answers in JSON" and len(noted) == 2  # each fact said once
    assert noted[1].startswith(f"note: mock-model at {url}: output mode json_schema")
    said = [re.search(r"calls: (\d+), tokens ([\d,]+) in / ([\d,]+) out, cost \$(\d+\.\d{4}), mean latency \d+\.\d\d s(, 1 retry)?$", l)
            for l in lines if "calls: " in l]
    assert len(said) == 2 and all(said), lines
    assert [int(m[1]) for m in said] == [2, 2]  # one call a round
    assert [bool(m[5]) for m in said] == [True, False]
    prompt = sum(int(m[2].replace(",", "")) for m in said)
    completion = sum(int(m[3].replace(",", "")) for m in said)
    assert prompt == sum(mock_tokens(r.messages) for r in requests)
    assert completion == sum(mock_tokens(r.reply) for r in requests)
    # each match's calls are said right after it ends
    for i, line in enumerate(lines):
        if "calls: " in line:
            assert ("] end after 2 rounds" if plain else "ended after 2 rounds") in lines[i - 1], lines[i - 1:i + 1]


def test_a_match_line_marks_token_counts_some_call_left_unknown():
    """A call cut off by the deadline has no token counts: the match's line gives the known part
    with `+?` and says how many calls went uncounted, never a plain total that reads as complete."""
    from arena.cli.live import CallTally
    from arena.contract.calls import CallRecord

    def call(tokens, error=None):
        return CallRecord(match="m#1", seat="Player 1", round=1, attempt=0, agent="a", backend="openai",
                          model="gpt-4o-mini", prompt_tokens=tokens[0], completion_tokens=tokens[1],
                          cost=None if None in tokens else 0.001, latency=1.0, error=error)

    tally = CallTally()
    tally.add(call((100, 10)))
    tally.add(call((None, None), error="cut off by the turn's deadline after 60.0 s"))
    line = tally.pop_line("m#1")
    assert "tokens 100+? in / 10+? out (1 uncounted), cost $0.0010 (+1 unpriced)," in line and "1 failed" in line
    tally.add(call((100, 10)))
    assert "tokens 100 in / 10 out," in tally.pop_line("m#1")


def test_plain_log_says_a_free_text_move_once(run_cli, tmp_path):
    """A translation is its own move: the line gives it once; a parsed move keeps the reply it was read from."""
    from helpers import ROOT

    done = run_cli("run", ROOT / "scenarios" / "translation.yaml", "--plain", "--limit", "1", "--run-dir", tmp_path / "run")
    assert done.returncode == 0, done.stderr
    moves = re.findall(r"^\[[^\]]+\] r\d+ .+? \((?:fluent|careful|hasty|judge)\) -> (.*)$", done.stdout, re.M)
    assert moves, done.stdout
    for move in moves:
        parts = move.split(" | ")
        assert len(parts) == 1 or parts[0].rstrip(" DEFAULT") != parts[1], move
    assert any(len(move) > 20 and " | " not in move for move in moves), moves  # a translation, said once
