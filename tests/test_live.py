"""The live round log, as a person watching a terminal sees it."""

from __future__ import annotations

import io

from rich.console import Console

from arena.cli.live import RoundLog
from arena.engine.match import play_match
from arena.contract.records import MatchSettings, MatchSpec

from helpers import scripted


async def test_terminal_log_prints_a_table_per_round_with_names_and_flags():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=160, color_system=None)
    log = RoundLog(console)
    assert not log.plain
    agents = {"giver": scripted("giver", "always_all"), "noise": scripted("noise", "garbage")}
    spec = MatchSpec(key="pg#1", game="public_goods", params={"rounds": 2, "mode": 2}, agents=("giver", "noise"),
                     seed=0, settings=MatchSettings(max_retries=1))
    await play_match(spec, agents, log)
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
    await play_match(MatchSpec(key="m", game="public_goods", params={"rounds": 1}, agents=("giver", "taker"), seed=0), agents, log)
    lines = buffer.getvalue().splitlines()
    assert lines[0].startswith("[m] start public_goods seed=0 seats: Player 1=")
    assert any(l.startswith("[m] r1 Player") and "(giver) -> 10 |" in l for l in lines)
    assert any("Referee -> Player" in l and "the pool paid you 7.5 coins" in l for l in lines)
    assert lines[-1].startswith("[m] end after 1 rounds:")
