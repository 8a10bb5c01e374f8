"""until_stable: an interval width relative to the payoffs' range, and what stopped each entry."""

from __future__ import annotations

import json
import sqlite3

import pytest

from arena.contract import open_run, plugins
from arena.contract.errors import ConfigError
from arena.contract.game import Game
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.run.stability import payoff_range
from arena.store import RunStore

from helpers import arena_offline, play, score_rows


class Duel(Game):
    """A test game paying 0 or 1: the seat that says "strong" wins four times in five against one that says
    "weak", drawn from the match's seed, so the order of the two is clear long before their means are narrow."""

    min_seats = max_seats = 2

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.rng = rng
        self.said = {}

    def rules(self, seat):
        return "Say strong or weak."

    def prompt(self, seat, round):
        return "Your word:"

    def parse(self, seat, reply, round):
        return reply.strip()

    def default_action(self, seat, round):
        return "weak"

    def apply(self, round, actions):
        self.said = dict(actions)
        return []

    def is_over(self, round):
        return True

    def payoffs(self):
        first, second = self.seats
        if self.said[first] == self.said[second]:
            winner = first if self.rng.random() < 0.5 else second
        else:
            strong = first if self.said[first] == "strong" else second
            weak = second if strong == first else first
            winner = strong if self.rng.random() < 0.8 else weak
        return {s: float(s == winner) for s in self.seats}


@pytest.fixture
def duel():
    plugins.register("game", "duel", Duel)
    yield
    plugins.unregister("game", "duel")


def duel_scenario(rule):
    agents = {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": [n]}} for n in ("strong", "weak")}
    return parse_scenario({"name": "duel", "seed": 5, "agents": agents, "games": [{"game": "duel"}],
                           "tournament": {"repeats": rule}})


async def test_a_zero_one_payoff_stops_by_the_width_relative_to_its_range(duel):
    rule = {"block": 4, "min": 4, "max": 400}
    result, records = await play(duel_scenario(rule))
    checks = result.stability
    assert payoff_range("duel", score_rows(records)) == 1.0
    assert all(c.width_limit == pytest.approx(0.2) for c in checks)  # the default: a fifth of the range 0..1
    last = checks[-1]
    assert last.stopped == "stable" and last.max_width <= 0.2 and last.repeats < 400
    # the order settled early: from then on the width alone kept the run going
    ordered = next(i for i, c in enumerate(checks) if c.tau is not None and c.tau >= 0.9)
    assert all(c.tau >= 0.9 for c in checks[ordered:])
    assert len(checks) - ordered > 5 and all(c.max_width > 0.2 and c.stopped is None for c in checks[ordered:-1])
    # the old rule, a width of 1.0 in payoff units, cannot hold a 0/1 payoff back: it stops once tau is reached
    loose, _ = await play(duel_scenario({**rule, "width_abs": 1.0}))
    assert loose.stability[-1].repeats == checks[ordered].repeats < last.repeats
    assert (loose.stability[-1].stopped, loose.stability[-1].width_limit) == ("stable", 1.0)


async def test_public_goods_width_is_a_share_of_its_observed_payoff_range():
    agents = {"a": {"backend": "scripted", "strategy": "free_rider"}, "c": {"backend": "scripted", "strategy": "random_contributor"}}
    s = parse_scenario({"name": "pg", "seed": 3, "agents": agents, "games": [{"game": "public_goods"}],
                        "tournament": {"repeats": {"block": 2, "min": 4, "max": 6, "width": 0.5}}})
    result, records = await play(s)
    payoffs = [v for r in records for v in r.payoffs.values()]
    spread = max(payoffs) - min(payoffs)
    assert spread > 1  # payoffs in coins: the old absolute width of 1.0 would have asked far less of them
    last = result.stability[-1]
    assert last.width_limit == pytest.approx(0.5 * spread)
    assert last.stable == (last.tau >= 0.9 and last.max_width <= 0.5 * spread)


def test_the_width_is_a_share_and_the_absolute_one_is_payoff_units():
    def rule(repeats):
        agents = {n: {"backend": "scripted", "strategy": "free_rider"} for n in ("a", "b")}
        return parse_scenario({"name": "x", "agents": agents, "games": [{"game": "public_goods"}],
                               "tournament": {"repeats": repeats}})

    assert rule("until_stable").tournament.repeats.width == 0.2
    assert rule({"width_abs": 3.0}).tournament.repeats.width_abs == 3.0
    with pytest.raises(ConfigError, match="width is a share of the payoff range, at most 1; for a width in payoff "
                                          "units, use width_abs"):
        rule({"width": 1.5})  # more than the whole range: it could never bind (an old scenario's width in units)


SCENARIO = """
name: stops
seed: 3
agents:
  a: {backend: scripted, strategy: free_rider}
  d: {backend: scripted, strategy: always_all}
games:
  - game: public_goods
    params: {rounds: 2}
tournament: {repeats: {block: 2, min: 4, max: 20}}
"""


def test_the_stop_reason_is_stored_and_printed(tmp_path):
    scenario = tmp_path / "s.yaml"
    scenario.write_text(SCENARIO)
    run_dir = tmp_path / "run"
    ran = arena_offline("run", scenario, "--run-dir", run_dir, cwd=tmp_path)
    assert ran.returncode == 0, ran.stderr
    store = open_run(run_dir)
    try:
        (check,) = store.stability()
    finally:
        store.close()
    assert check["stopped"] == "stable" and check["repeats"] == 4 and check["width_limit"] is not None
    for command in ("show", "rank"):
        printed = " ".join(arena_offline(command, run_dir, cwd=tmp_path).stdout.split())
        assert "public_goods: stable (Kendall tau and interval width both reached) after 4 repeats" in printed
    for command in ("show", "rank"):
        document = json.loads(arena_offline(command, run_dir, "--json", cwd=tmp_path).stdout)
        assert document["stability"][-1]["stopped"] == "stable"


async def test_a_run_cut_short_says_so_on_the_entry_s_last_check(duel, tmp_path):
    s = duel_scenario({"block": 2, "min": 4, "max": 400})
    store = RunStore.create_or_resume(tmp_path / "run", s.name, "name: duel\n", s.fingerprint())
    try:
        await run_tournament(s, store, limit=5)  # the first block of 4, then one match of the next
    finally:
        store.close()
    reader = open_run(tmp_path / "run")
    try:
        checks = reader.stability()
    finally:
        reader.close()
    assert [(c["repeats"], c["stopped"]) for c in checks] == [(4, "limit")]


def test_checks_stored_before_the_stop_reason_read_it_from_stable_and_done(tmp_path):
    store = RunStore.create_or_resume(tmp_path / "run", "old", "name: old\n", "old")
    store.record_stability("duel", 4, 1.0, 0.5, True, True)
    store.record_stability("other", 6, 0.2, 0.5, False, True)
    store.close()
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")  # as format 6 stored them: no stop reason, no limit
    db.executescript("ALTER TABLE stability DROP COLUMN stopped; ALTER TABLE stability DROP COLUMN width_limit; "
                     "PRAGMA user_version = 6;")
    db.close()
    reader = open_run(tmp_path / "run")
    try:
        assert [(c["group"], c["stopped"], c["width_limit"]) for c in reader.stability()] == [
            ("duel", "stable", None), ("other", "max repeats", None)]
    finally:
        reader.close()


@pytest.mark.parametrize("why, said", [("budget", "not stable yet; the run stopped at its budget"),
                                       ("outage", "not stable yet; the run stopped at an outage"),
                                       ("limit", "not stable yet; the run stopped at --limit")])
def test_what_stopped_a_run_is_said_on_the_entry_s_last_check_only(tmp_path, why, said):
    from arena.cli.tables import stability_line

    store = RunStore.create_or_resume(tmp_path / "run", "cut", "name: cut\n", "cut")
    store.record_stability("pg", 4, None, 3.0, False, False, None, 2.0)
    store.record_stability("pg", 6, 0.8, 2.5, False, False, None, 2.0)
    store.record_stability("done", 4, 1.0, 0.0, True, True, "stable", 2.0)
    store.stop_stability("pg", why)  # as the runner does for each entry still adding blocks
    store.close()
    reader = open_run(tmp_path / "run")
    try:
        checks = reader.stability()
    finally:
        reader.close()
    assert [(c["group"], c["repeats"], c["stopped"]) for c in checks] == [
        ("done", 4, "stable"), ("pg", 4, None), ("pg", 6, why)]
    assert stability_line(checks[-1]) == (f"pg: {said} after 6 repeats (Kendall tau 0.80, widest interval 2.50, at most "
                                          "2.00 allowed)")
