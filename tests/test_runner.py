"""Tournaments: planning, seeds, seat rotation, role swap, concurrency, limits, stableness, failures."""

from __future__ import annotations

from collections import Counter

import pytest
import trio

from arena.contract import plugins
from arena.run.runner import Observer, run_tournament
from arena.run.scenario import parse_scenario
from arena.run.tournament import plan

from helpers import Roundtable, TwoRoles, play, score_rows

AGENTS = {
    "a": {"backend": "scripted", "strategy": "free_rider"},
    "b": {"backend": "scripted", "strategy": "tit_for_tat"},
    "c": {"backend": "scripted", "strategy": "random_contributor"},
    "d": {"backend": "scripted", "strategy": "always_all"},
}


def scenario(games, seed=3, concurrency=4, tournament=None, agents=AGENTS):
    raw = {"name": "t", "seed": seed, "agents": agents, "games": games, "concurrency": concurrency}
    if tournament is not None:
        raw["tournament"] = tournament
    return parse_scenario(raw)


def test_round_robin_plays_every_table_with_rotating_seats():
    s = scenario([{"game": "public_goods", "seats": 3}], tournament={"format": "round_robin", "repeats": 3})
    specs = plan(s)
    assert len(specs) == 4 * 3  # C(4,3) tables x 3 repeats
    tables = Counter(frozenset(m.agents) for m in specs)
    assert len(tables) == 4 and set(tables.values()) == {3}
    # across the 3 repeats of a table, each agent sits once in each position
    for table in tables:
        orders = [m.agents for m in specs if frozenset(m.agents) == table]
        for position in range(3):
            assert sorted(o[position] for o in orders) == sorted(table)
    assert not any(m.shuffle_seats for m in specs)
    assert len({m.key for m in specs}) == len(specs)


def test_keys_and_seeds_are_stable_and_depend_on_the_scenario_seed():
    games = [{"game": "public_goods"}]
    tournament = {"repeats": 3}
    first = plan(scenario(games, tournament=tournament))
    again = plan(scenario(games, tournament=tournament))
    other = plan(scenario(games, seed=4, tournament=tournament))
    assert [m.key for m in first] == ["public_goods#1:Player=0+1+2+3", "public_goods#2:Player=1+2+3+0",
                                      "public_goods#3:Player=2+3+0+1"]
    assert [m.seed for m in first] == [m.seed for m in again]
    assert [m.seed for m in first] != [m.seed for m in other]


def test_random_seating_leaves_the_order_to_the_match_seed():
    specs = plan(scenario([{"game": "public_goods"}], tournament={"seating": "random", "repeats": 2}))
    assert all(m.shuffle_seats and m.agents == ("a", "b", "c", "d") for m in specs)


@pytest.fixture
def two_roles():
    plugins.register("game", "two_roles", TwoRoles)
    yield
    plugins.unregister("game", "two_roles")


def test_all_pairs_of_a_two_role_game_play_both_role_assignments(two_roles):
    s = scenario([{"game": "two_roles", "agents": ["a", "b", "c"]}], tournament={"format": "all_pairs", "repeats": 2})
    specs = plan(s)
    assert len(specs) == 3 * 2 * 2  # pairs x role assignments x repeats
    assert Counter(m.agents for m in specs) == {pair: 2 for pair in
                                                 [("a", "b"), ("b", "a"), ("a", "c"), ("c", "a"), ("b", "c"), ("c", "b")]}


async def test_role_table_of_an_asymmetric_game(two_roles):
    agents = {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": [str(v)]}} for n, v in
              [("low", 1), ("mid", 5), ("high", 9)]}
    s = scenario([{"game": "two_roles"}], tournament={"format": "all_pairs", "repeats": 1}, agents=agents)
    _, records = await play(s)
    from arena.results.payoffs import role_tables, summarize

    (table,) = role_tables(score_rows(records))
    assert table.roles == ("Writer", "Editor")
    # TwoRoles: the writer scores its own number, the editor the writer's number minus its own
    assert table.cells["high"]["low"].scores == (9.0, 8.0)
    assert table.cells["low"]["high"].scores == (1.0, -8.0)
    assert table.row_means["mid"] == 5.0
    assert table.column_means["low"] == pytest.approx(((5 - 1) + (9 - 1)) / 2)
    rows = {(r.agent, r.role): r.mean for r in summarize(score_rows(records))}
    assert rows[("high", "Writer")] == 9.0 and rows[("low", "Editor")] == 6.0


async def test_concurrency_does_not_change_results():
    games = [{"game": "public_goods", "params": {"mode": 2}, "seats": 3}]
    tournament = {"format": "round_robin", "repeats": 3}
    _, serial = await play(scenario(games, concurrency=1, tournament=tournament))
    _, parallel = await play(scenario(games, concurrency=8, tournament=tournament))
    assert [r.key for r in serial] == [r.key for r in parallel]
    assert [r.payoffs for r in serial] == [r.payoffs for r in parallel]
    assert [r.messages for r in serial] == [r.messages for r in parallel]


class Timeline(Observer):
    """Notes when each match starts and ends on trio's clock, and how many run at once."""

    def __init__(self):
        self.running: Counter = Counter()
        self.peak_total = 0
        self.peak_agent: Counter = Counter()
        self.seats: dict[str, list[str]] = {}

    def event(self, event):
        if event.type == "match_started":
            agents = [s.agent for s in event.seats]
            self.seats[event.match] = agents
            self.running["*"] += 1
            for a in agents:
                self.running[a] += 1
                self.peak_agent[a] = max(self.peak_agent[a], self.running[a])
            self.peak_total = max(self.peak_total, self.running["*"])
        elif event.type in ("match_ended", "match_failed"):
            self.running["*"] -= 1
            for a in self.seats[event.match]:
                self.running[a] -= 1


def slow(strategy, delay):
    return {"backend": "scripted", "strategy": strategy, "delay": delay}


async def test_matches_overlap_up_to_the_limit(autojump_clock):
    agents = {f"p{i}": slow("free_rider", 1.0) for i in range(4)}
    s = scenario([{"game": "public_goods", "seats": 2, "params": {"rounds": 2}}], concurrency=3, agents=agents,
                 tournament={"format": "round_robin", "repeats": 2})
    timeline = Timeline()
    start = trio.current_time()
    result = await run_tournament(s, observer=timeline)
    elapsed = trio.current_time() - start
    assert len(result.statuses) == 12  # C(4,2) x 2
    # each match takes 2 s (two rounds of 1 s); 12 matches, 3 at a time: ideally 4 waves = 8 s
    assert elapsed == pytest.approx(8.0, abs=0.01)
    assert timeline.peak_total == 3


async def test_per_agent_limits_hold_and_a_slow_agent_does_not_stall_the_others(autojump_clock):
    agents = {"slow": slow("free_rider", 10.0), **{f"p{i}": slow("free_rider", 1.0) for i in range(4)}}
    s = parse_scenario({
        "name": "t", "agents": agents, "games": [{"game": "public_goods", "seats": 2, "params": {"rounds": 1}}],
        "tournament": {"format": "round_robin"},
        "concurrency": {"matches": 4, "per_agent": 2, "agents": {"slow": 1}},
    })
    timeline = Timeline()
    ends, seated = {}, {}

    class Clock(Observer):
        def event(self, event):
            timeline.event(event)
            if event.type == "match_started":  # a key names places, not agents: who played is in the seats
                seated[event.match] = {seat.agent for seat in event.seats}
            if event.type == "match_ended":
                ends[event.match] = trio.current_time()

    start = trio.current_time()
    result = await run_tournament(s, observer=Clock())
    assert len(result.statuses) == 10  # C(5,2)
    assert timeline.peak_agent["slow"] == 1
    assert all(timeline.peak_agent[f"p{i}"] <= 2 for i in range(4))
    assert timeline.peak_total <= 4
    slow_ends = sorted(t - start for k, t in ends.items() if "slow" in seated[k])
    fast_ends = sorted(t - start for k, t in ends.items() if "slow" not in seated[k])
    assert slow_ends == pytest.approx([10, 20, 30, 40])  # one at a time
    assert max(fast_ends) <= 10  # the six other pairs finish while the slow agent plays its first


async def test_until_stable_stops_early_on_a_clear_ranking():
    s = scenario([{"game": "public_goods", "agents": ["a", "d"]}],
                 tournament={"repeats": {"block": 2, "min": 4, "max": 40, "tau": 0.9, "width": 1.0}})
    result = await run_tournament(s)
    assert len(result.statuses) == 4  # free rider vs always-all: deterministic payoffs, stable at the minimum
    (check,) = result.stability
    assert check.done and check.stable and check.tau == 1.0 and check.max_width == 0.0


async def test_until_stable_runs_to_the_cap_on_a_coin_flip():
    coin = {"x": {"backend": "scripted", "strategy": "random_contributor"},
            "y": {"backend": "scripted", "strategy": "random_contributor"}}
    s = scenario([{"game": "public_goods"}], agents=coin,
                 tournament={"repeats": {"block": 4, "min": 8, "max": 24, "tau": 0.9, "width_abs": 0.5}})
    result = await run_tournament(s)
    assert len(result.statuses) == 24
    assert [c.repeats for c in result.stability] == [8, 12, 16, 20, 24]
    assert result.stability[-1].done and not result.stability[-1].stable


@pytest.fixture
def buggy_game():
    class Buggy(Roundtable):
        def apply(self, round, actions):
            raise RuntimeError("scoring exploded")

    plugins.register("game", "buggy", Buggy)
    yield
    plugins.unregister("game", "buggy")


async def test_a_failing_match_does_not_stop_the_others(buggy_game):
    # the buggy table seats agents that can talk at it: a public goods strategy asked to play another
    # game raises, and an agent's error now fails its match before the game's own bug would show
    talker = {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["hello"]}}
    games = [{"game": "buggy", "agents": ["a", "e"]}, {"game": "public_goods", "agents": ["a", "b", "c"]}]
    finished = []

    class Collect(Observer):
        def finished(self, record, resumed):
            finished.append(record)

    result, records = await play(scenario(games, tournament={"repeats": 2}, agents={**AGENTS, "e": talker}),
                                 observer=Collect())
    assert list(result.statuses.values()) == ["failed", "failed", "finished", "finished"]
    assert [r.status for r in records] == list(result.statuses.values())
    assert all("RuntimeError: scoring exploded" in r.error for r in records[:2])
    assert len(finished) == 4


async def test_a_run_plays_its_matches_with_what_existed_before_frozen_and_unfreezes_it_after():
    """While a run plays, what existed before it is left out of garbage collection
    (arena.run.collector); once it ends, nothing is frozen any more, and a cycle that became
    garbage during the run is collected again."""
    import gc
    import weakref

    from arena.contract import Strategy

    seen: list[int] = []

    class Watching(Strategy):
        def reply(self, turn, rng):
            seen.append(gc.get_freeze_count())
            return '{"reason": "r", "coins": 5}'

    class Cycle:
        pass

    old = Cycle()
    old.me = old  # a cycle alive before the run, dropped while it plays
    gone = weakref.ref(old)
    plugins.register("strategy", "test-watching", Watching)
    try:
        s = parse_scenario({"name": "gc", "agents": {"a": {"backend": "scripted", "strategy": "test-watching"},
                                                     "b": {"backend": "scripted", "strategy": "always_all"}},
                            "games": [{"game": "public_goods", "params": {"mode": 1, "rounds": 2}}]})
        del old
        result = await run_tournament(s)
    finally:
        plugins.unregister("strategy", "test-watching")
    assert result.count("finished") == 1
    assert seen and all(frozen > 0 for frozen in seen)
    assert gc.get_freeze_count() == 0
    gc.collect()
    assert gone() is None


async def test_matches_that_end_together_share_a_commit_and_each_is_stored_before_it_counts_as_played(
        autojump_clock, tmp_path):
    """16 matches whose agents answer at the same moment end together: one commit saves them all
    (arena.store.commits), and none is reported played before a reader of the store can see it."""
    from helpers import store_and_reader

    agents = {f"p{i}": slow("free_rider", 1.0) for i in range(2)}
    s = parse_scenario({"name": "commits", "agents": agents, "concurrency": {"matches": 16},
                        "games": [{"game": "public_goods", "seats": 2, "params": {"rounds": 1}}],
                        "tournament": {"repeats": 16}})
    statements: list[str] = []
    seen_by_reader = {}
    with store_and_reader(s, tmp_path / "run") as (store, reader):
        store.db.set_trace_callback(statements.append)

        class Reader(Observer):
            def finished(self, record, resumed):
                row = reader.execute("SELECT status, ended >= started FROM matches WHERE key = ?", (record.key,)).fetchone()
                outcomes = reader.execute("SELECT COUNT(*) FROM outcomes WHERE match_key = ?", (record.key,)).fetchone()
                seen_by_reader[record.key] = (*(row or (None, None)), outcomes[0])

        result = await run_tournament(s, store, Reader())
    assert result.count("finished") == 16
    assert seen_by_reader == {key: ("finished", 1, 2) for key in result.statuses}  # started, then ended
    commits = sum(1 for sql in statements if sql.strip().upper() == "COMMIT")
    assert commits <= 3, f"{commits} commits for 16 matches that ended together"


async def test_a_match_cancelled_while_it_waits_for_a_slot_gives_back_the_agent_slots_it_took(autojump_clock):
    from arena.contract.records import MatchSpec
    from arena.run.runner import Limits
    from arena.run.scenario import Concurrency

    limits = Limits(Concurrency(matches=1, agents={"a": 1}), ["a", "b"])
    first = MatchSpec(key="1", game="public_goods", agents=("b", "b"), seed=1)
    second = MatchSpec(key="2", game="public_goods", agents=("a", "b"), seed=1)
    done = trio.Event()

    async def hold(task_status=trio.TASK_STATUS_IGNORED):
        async with limits.slot(first):  # the one match slot
            task_status.started()
            await done.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(hold)
        with trio.move_on_after(1) as waiting:  # the second gets agent a's slot, then waits for a match slot
            async with limits.slot(second):
                raise AssertionError("two matches at once under a limit of one")
        assert waiting.cancelled_caught
        assert limits.per_agent["a"].borrowed_tokens == 0  # given back when the wait was cut short
        assert limits.matches.borrowed_tokens == 1
        done.set()
    assert limits.matches.borrowed_tokens == 0


async def test_a_scripted_agents_latency_varies_by_its_jitter_and_is_the_same_in_every_run(autojump_clock):
    from arena.contract.messages import Turn

    from helpers import scripted

    agent = scripted("a", "free_rider", delay=1.0, jitter=0.25)

    async def waits() -> list[float]:
        out = []
        for seed in range(40):
            start = trio.current_time()
            await agent.reply(Turn(match="m", seat="P", role="P", round=1, history=(), prompt="go", seed=seed))
            out.append(trio.current_time() - start)
        return out

    first, again = await waits(), await waits()
    assert first == pytest.approx(again, abs=1e-9)  # drawn from the turn's seed
    assert all(0.75 <= w <= 1.25 for w in first)
    assert max(first) - min(first) > 0.25  # it does vary, across most of its range
    steady = scripted("b", "free_rider", delay=1.0)
    start = trio.current_time()
    await steady.reply(Turn(match="m", seat="P", role="P", round=1, history=(), prompt="go", seed=3))
    assert trio.current_time() - start == pytest.approx(1.0)


async def test_whatever_a_run_commits_has_each_ended_matchs_outcome_with_its_end(autojump_clock, tmp_path, monkeypatch):
    """Matches end at different moments while others still play and commit (here at every round's
    close); a reader never sees a match's end without its outcome, though the commit it waits
    for comes later."""
    from arena.store import RunStore

    from helpers import store_and_reader

    monkeypatch.setattr(RunStore, "COMMIT_EVERY", 0)
    agents = {f"p{i}": {"backend": "scripted", "strategy": "free_rider", "delay": 1.0, "jitter": 0.9} for i in range(3)}
    s = parse_scenario({"name": "ends", "agents": agents, "concurrency": {"matches": 6},
                        "games": [{"game": "public_goods", "seats": 2, "params": {"rounds": 3}}],
                        "tournament": {"format": "round_robin", "repeats": 4}})
    looks = []
    with store_and_reader(s, tmp_path / "run") as (store, reader):

        class Reader(Observer):
            def event(self, event):
                ended = {k for (k,) in reader.execute("SELECT match_key FROM events WHERE type = 'match_ended'")}
                scored = {k for (k,) in reader.execute("SELECT DISTINCT match_key FROM outcomes")}
                looks.append((ended, scored))

        result = await run_tournament(s, store, Reader())
    assert result.count("finished") == 12
    assert all(ended <= scored for ended, scored in looks), [ended - scored for ended, scored in looks if ended - scored][0]
    assert sum(1 for ended, _ in looks if ended) > len(looks) // 4  # the reader looked while matches were ending
