"""The progress model behind the dashboard and `arena watch`: figures, rates and ETA from
synthetic sequences of matches and calls, with times chosen so every figure can be worked out by hand."""

from __future__ import annotations

import pytest

from arena.contract.calls import CallRecord, CallStarted
from arena.results.progress import RunProgress, rounds_needed

SEATS = {"Player 1": "model", "Player 2": "giver"}


def started(token: str, match: str, round: int = 1, seat: str = "Player 1", agent: str = "model", attempt: int = 1):
    return CallStarted(token=token, match=match, seat=seat, round=round, attempt=attempt, agent=agent,
                       backend="openai", model="m")


def ended(token: str | None, match: str, latency: float, round: int = 1, agent: str = "model", **figures):
    return CallRecord(match=match, seat="Player 1", round=round, attempt=1, agent=agent, backend="openai", model="m",
                      latency=latency, token=token, **figures)


def call(progress: RunProgress, token: str, match: str, start: float, end: float, **figures) -> None:
    progress.call_started(started(token, match), start)
    progress.call_ended(ended(token, match, end - start, **figures), end)


def test_rates_and_eta_from_calls_worked_out_by_hand():
    p = RunProgress()
    p.planned(4)
    p.match_started("A", SEATS, 3, at=100.0)
    call(p, "a1", "A", 100.0, 102.0, prompt_tokens=10, completion_tokens=5, cost=0.01)
    p.round_closed("A", 1, at=102.0)
    call(p, "a2", "A", 102.0, 104.0, prompt_tokens=20, completion_tokens=5, cost=0.02, retries=1)
    p.match_done("A", "finished", at=104.0)
    p.match_started("B", SEATS, 3, at=104.0)
    call(p, "b1", "B", 104.0, 106.0, prompt_tokens=30, completion_tokens=5, cost=None)
    p.round_closed("B", 1, at=106.0)
    p.call_started(started("b2", "B", round=2), 106.0)

    snap = p.snapshot(now=108.0)
    assert (snap.planned, snap.done, snap.failed, snap.calls, snap.in_flight) == (4, 1, 0, 3, 1)
    # three calls ended in the window, the earliest started at 100: 3 / (108 - 100)
    assert snap.call_rate == pytest.approx(3 / 8)
    # one match ended in the window, started at 100
    assert snap.match_rate == pytest.approx(1 / 8)
    assert snap.calls_per_match == 2
    # still to come: B's second call (2 per match, 1 made) and 2 matches not started, 2 calls each
    assert snap.eta_from == "calls"
    assert snap.eta == pytest.approx((1 + 2 * 2) / (3 / 8))
    [running] = snap.running
    assert (running.key, running.turn, running.calls) == ("B", "turn 2 of 3", 1)
    [flight] = snap.flights
    assert (flight.match, flight.seat, flight.round, flight.started) == ("B", "Player 1", 2, 106.0)
    model = snap.agents["model"]
    assert (model.calls, model.in_flight, model.prompt_tokens, model.completion_tokens) == (3, 1, 60, 15)
    assert model.spend == pytest.approx(0.03) and model.unpriced == 1
    assert model.mean_latency == pytest.approx(2.0)
    assert model.retries == 1
    assert snap.elapsed == 8.0


def test_rates_only_look_at_the_recent_window_and_fall_when_the_run_stalls():
    p = RunProgress(window=60.0)
    p.planned(10)
    p.match_started("A", SEATS, None, at=0.0)
    for i in range(10):
        call(p, f"t{i}", "A", float(i), i + 1.0)
    assert p.snapshot(now=10.0).call_rate == pytest.approx(10 / 10)
    assert p.snapshot(now=20.0).call_rate == pytest.approx(10 / 20)  # nothing new: the rate falls
    assert p.snapshot(now=65.0).call_rate == pytest.approx(5 / 60)  # the calls that ended by 5 s are out of the window
    snap = p.snapshot(now=200.0)
    assert snap.call_rate is None and snap.eta is None and snap.calls == 10


def test_a_run_without_model_calls_gets_its_eta_from_matches():
    p = RunProgress()
    p.planned(4)
    p.match_started("A", SEATS, 5, at=0.0)
    p.match_started("B", SEATS, 5, at=5.0)
    p.match_done("A", "finished", at=10.0)
    p.match_done("B", "failed", at=15.0)
    snap = p.snapshot(now=20.0)
    assert (snap.done, snap.failed, snap.calls) == (2, 1, 0)
    assert snap.match_rate == pytest.approx(2 / 20)
    assert snap.eta_from == "matches"
    assert snap.eta == pytest.approx(2 / (2 / 20))
    p.match_started("C", SEATS, 5, at=20.0)
    p.match_done("C", "finished", at=21.0)
    p.match_started("D", SEATS, 5, at=21.0)
    p.match_done("D", "finished", at=22.0)
    snap = p.snapshot(now=22.0)
    assert snap.eta == 0.0 and snap.finished


def test_before_any_match_ends_the_calls_per_match_are_guessed_from_the_rounds_played():
    p = RunProgress()
    p.planned(3)
    p.match_started("A", SEATS, 4, at=0.0)
    for i in range(4):  # two calls a round, two rounds closed
        call(p, f"t{i}", "A", float(i), i + 1.0)
    p.round_closed("A", 2, at=4.0)
    snap = p.snapshot(now=4.0)
    assert snap.calls_per_match == 8  # 4 calls in 2 of 4 rounds
    assert snap.eta == pytest.approx(((8 - 4) + 2 * 8) / (4 / 4))


def test_turn_k_of_n_turn_k_and_scoring():
    p = RunProgress()
    p.match_started("fixed", SEATS, 2, at=0.0)
    p.match_started("open", SEATS, None, at=0.0)
    p.round_closed("open", 1, at=1.0)
    turns = {m.key: m.turn for m in p.snapshot(now=1.0).running}
    assert turns == {"fixed": "turn 1 of 2", "open": "turn 2"}
    p.round_closed("fixed", 1, at=2.0)
    assert {m.key: m.turn for m in p.snapshot(now=2.0).running}["fixed"] == "turn 2 of 2"
    p.round_closed("fixed", 2, at=3.0)  # every round played: the referee scores it
    assert {m.key: m.turn for m in p.snapshot(now=3.0).running}["fixed"] == "scoring"


def test_calls_in_flight_end_with_their_record_a_timeout_or_their_match():
    p = RunProgress()
    p.match_started("A", SEATS, 3, at=0.0)
    p.match_started("B", SEATS, 3, at=0.0)
    p.call_started(started("a1", "A"), 1.0)
    p.call_started(started("a1", "A"), 3.0)  # a retry of the same call keeps its first start
    p.call_started(started("b1", "B", seat="Player 2", agent="giver"), 1.0)
    p.call_started(started("b2", "B"), 1.0)
    p.call_started(started("x1", "gone"), 1.0)  # not a running match: not counted
    snap = p.snapshot(now=4.0)
    assert [(f.token, f.started) for f in snap.flights] == [("a1", 1.0), ("b1", 1.0), ("b2", 1.0)]
    assert snap.agents["model"].in_flight == 2
    # the turn timed out: its request was cancelled and sends no record
    p.turn_failed("B", "Player 2", 1, 1, "timeout", at=5.0)
    assert [f.token for f in p.snapshot(now=5.0).flights] == ["a1", "b2"]
    assert p.snapshot(now=5.0).agents["giver"].timeouts == 1
    p.call_ended(ended("a1", "A", 4.0, error="TransientError: 500"), 5.0)
    p.match_done("B", "failed", at=6.0)
    snap = p.snapshot(now=6.0)
    assert snap.flights == [] and snap.agents["model"].in_flight == 0
    assert snap.agents["model"].errors == 1 and snap.agents["model"].answered == 0
    assert snap.agents["model"].mean_latency is None


def test_cache_hits_are_counted_apart_and_do_not_make_a_run_model_bound():
    p = RunProgress()
    p.planned(2)
    p.match_started("A", SEATS, 1, at=0.0)
    p.call_ended(ended(None, "A", 0.0, prompt_tokens=100, completion_tokens=10, cost=0.0, cached=True), 0.5)
    p.turn_failed("A", "Player 1", 1, 1, "invalid", at=0.6)
    p.match_done("A", "finished", at=1.0)
    snap = p.snapshot(now=2.0)
    model = snap.agents["model"]
    assert (snap.calls, snap.cached, model.calls, model.cached, model.cached_tokens, model.invalid) == (0, 1, 0, 1, 110, 1)
    assert snap.eta_from == "matches" and snap.eta == pytest.approx(1 / (1 / 2))


def test_matches_done_before_and_matches_played_again():
    p = RunProgress()
    p.planned(3)
    p.match_done("old", "finished", at=None)  # finished by an earlier run
    p.match_started("A", SEATS, 1, at=0.0)
    call(p, "a1", "A", 0.0, 1.0)
    p.match_done("A", "failed", at=1.0)
    p.match_done("A", "failed", at=1.5)  # said twice (the event, then the record): counted once
    snap = p.snapshot(now=2.0)
    assert (snap.done, snap.failed, snap.resumed, snap.calls_per_match) == (2, 1, 1, 1)
    p.match_started("A", SEATS, 1, at=2.0)  # a resume plays the failed match again
    snap = p.snapshot(now=2.0)
    assert (snap.done, snap.failed, [m.key for m in snap.running], snap.calls_per_match) == (1, 0, ["A"], None)
    p.match_done("A", "interrupted", at=3.0)  # cut short: neither done nor running
    snap = p.snapshot(now=3.0)
    assert (snap.done, snap.running) == (1, [])
    assert snap.calls == 1  # what was paid for stays counted


def test_notes_are_said_once_and_the_latest_are_kept():
    p = RunProgress()
    for i in range(7):
        p.note(f"note {i}", at=float(i))
    p.note("note 3", at=8.0)
    assert p.snapshot(now=9.0).notes == ["note 2", "note 4", "note 5", "note 6", "note 3"]


def test_rounds_needed_comes_from_the_game():
    assert rounds_needed("public_goods", {"rounds": 7}, 3) == 7
    assert rounds_needed("public_goods", {"rounds": 7}, 3, max_rounds=4) == 4
    assert rounds_needed("public_goods", {"rounds": "many"}, 3) is None
    assert rounds_needed("no_such_game", {}, 2) is None
