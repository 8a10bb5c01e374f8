"""The match loop: determinism, seat order, timeouts, invalid replies, failing agents."""

from __future__ import annotations

from arena.contract import BackendUnavailable
from arena.contract.agent import Agent, FatalAgentError
from arena.contract.game import InvalidReply
import pytest
import trio

from arena.engine.match import Match, play_match
from arena.contract.records import MatchSettings, MatchSpec

from helpers import Recording, coins, scripted

QUARTET = {"all": "always_all", "none": "free_rider", "tft": "tit_for_tat", "rand": "random_contributor"}


def quartet(**extra) -> dict[str, Agent]:
    agents = {n: scripted(n, s) for n, s in QUARTET.items()}
    agents.update(extra)
    return agents


def spec(seed: int, agents, **kw) -> MatchSpec:
    return MatchSpec(key=f"m{seed}", game="public_goods", agents=tuple(agents), seed=seed, **kw)


async def test_same_seed_gives_the_same_transcript_and_payoffs():
    a = await play_match(spec(5, quartet()), quartet())
    b = await play_match(spec(5, quartet()), quartet())
    assert a.messages == b.messages
    assert a.payoffs == b.payoffs
    assert a.seats == b.seats
    assert a.model_dump(exclude={"events"}) == b.model_dump(exclude={"events"})


async def test_seat_order_is_drawn_from_the_seed():
    orders = set()
    for seed in range(8):
        record = await play_match(spec(seed, quartet()), quartet())
        orders.add(tuple(s.agent for s in record.seats))
    assert len(orders) > 1, "different seeds must be able to seat agents differently"
    fixed = await play_match(spec(3, quartet(), shuffle_seats=False), quartet())
    assert [s.agent for s in fixed.seats] == list(QUARTET)
    assert [s.label for s in fixed.seats] == ["Player 1", "Player 2", "Player 3", "Player 4"]


async def test_a_hanging_agent_is_cut_at_the_timeout_and_the_match_completes(autojump_clock):
    agents = quartet(stuck=scripted("stuck", "hang"))
    settings = MatchSettings(turn_timeout=30, max_retries=1)
    started = trio.current_time()
    record = await play_match(spec(1, agents, params={"rounds": 3}, settings=settings), agents)
    assert record.status == "finished" and record.rounds == 3
    stuck = next(s.label for s in record.seats if s.agent == "stuck")
    timeouts = [e for e in record.events if e.type == "turn_failed" and e.seat == stuck]
    # a timeout is not asked again (re-asks are for invalid replies): one attempt per round, then the default
    assert [(e.failure, e.attempt) for e in timeouts] == [("timeout", 1)] * 3
    assert all("30 seconds" in e.reason for e in timeouts)
    actions = [e for e in record.events if e.type == "action" and e.seat == stuck]
    assert [(a.action, a.defaulted, a.reply, a.attempts) for a in actions] == [(0, True, None, 1)] * 3
    assert trio.current_time() - started == 3 * 30
    # the stuck player gave nothing, so it keeps its endowment plus its share
    assert record.payoffs[stuck] == max(record.payoffs.values())


async def test_garbage_is_reasked_with_the_reason_then_defaulted():
    garbage = Recording(scripted("noise", "garbage"))
    agents = quartet(noise=garbage)
    settings = MatchSettings(max_retries=2)
    record = await play_match(spec(2, agents, params={"rounds": 2}, settings=settings), agents)
    seat = next(s.label for s in record.seats if s.agent == "noise")
    failures = [e for e in record.events if e.type == "turn_failed" and e.seat == seat]
    assert len(failures) == 2 * 3 and {e.failure for e in failures} == {"invalid"}
    assert all(e.reply and "JSON" in e.reason for e in failures)
    defaults = [e for e in record.events if e.type == "action" and e.seat == seat]
    assert all(e.defaulted and e.action == 0 and e.attempts == 3 for e in defaults)
    # the agent was shown its own bad reply and the reason on each new attempt
    third_attempt = garbage.turns[2]
    assert third_attempt.attempt == 2
    assert [r.reply for r in third_attempt.retries] == [f.reply for f in failures[:2]]
    chat = third_attempt.as_chat()
    assert [m["content"] for m in chat[-4:]] == [failures[0].reply, f"{failures[0].reason} {third_attempt.prompt}",
                                                 failures[1].reply, f"{failures[1].reason} {third_attempt.prompt}"]
    assert "JSON" in chat[-1]["content"]


class Flaky(Agent):
    """Fails in a different way on each of its first attempts, then answers."""

    def __init__(self, name):
        super().__init__(name, None)

    async def reply(self, turn):
        if turn.attempt == 0:
            raise ConnectionError("connection reset")
        if turn.attempt == 1:
            return "five"
        return coins(5)


async def test_an_agent_error_is_not_a_move_it_fails_the_match_naming_the_cause():
    """An exception is not something the seat said: no attempt is spent on it, nothing is
    defaulted or scored, and the match fails with the error (a resume plays it again)."""
    agents = quartet(flaky=Flaky("flaky"))
    record = await play_match(spec(4, agents, params={"rounds": 1}), agents)
    assert record.status == "failed" and record.payoffs == {}
    assert record.error.startswith("ConnectionError: connection reset")
    assert not [e for e in record.events if e.type in ("turn_failed", "action")]
    assert record.events[-1].type == "match_failed"


class Unreachable(Agent):
    """Answers until round ``down_from``, then its server is gone."""

    def __init__(self, name, down_from=2):
        super().__init__(name, None)
        self.down_from = down_from

    async def reply(self, turn):
        if turn.round >= self.down_from:
            raise BackendUnavailable(self.name, "openai", "http://127.0.0.1:9/v1", "APIConnectionError: Connection error.")
        return coins(3)


async def test_an_unreachable_backend_interrupts_the_match_and_nothing_is_scored():
    agents = quartet(gone=Unreachable("gone"))
    played = await Match(spec(6, agents, params={"rounds": 3}), agents).play()
    record = played.record
    assert record.status == "interrupted" and record.payoffs == {} and record.metrics == {}
    assert record.rounds == 2  # stopped in the round its backend failed
    assert "backend openai at http://127.0.0.1:9/v1 (agent 'gone') is unavailable" in record.error
    assert played.outage is not None and played.outage.endpoint == "http://127.0.0.1:9/v1"
    assert record.events[-1].type == "match_interrupted"
    gone = next(s.label for s in record.seats if s.agent == "gone")
    assert not [e for e in record.events if e.type == "turn_failed"]
    # round 1 was played in full; round 2 was not applied for anyone: no move was made up for the seat
    assert [e.round for e in record.events if e.type == "action" and e.seat == gone] == [1]
    assert {e.round for e in record.events if e.type == "action"} == {1}


class NoKey(Agent):
    def __init__(self, name):
        super().__init__(name, None)

    async def reply(self, turn):
        raise FatalAgentError("agent 'nokey': OPENAI_API_KEY is not set")


async def test_a_fatal_agent_error_fails_the_match_with_its_message():
    agents = quartet(nokey=NoKey("nokey"))
    record = await play_match(spec(4, agents), agents)
    assert record.status == "failed"
    assert "OPENAI_API_KEY is not set" in record.error
    assert record.events[-1].type == "match_failed"


async def test_a_defaulted_turn_posts_nothing_to_the_pool():
    from arena.contract import plugins
    from helpers import Roundtable

    class Strict(Roundtable):
        def parse(self, seat, reply, round):
            if reply != "ok":
                raise InvalidReply("say ok")
            return reply

    plugins.register("game", "strict", Strict)
    try:
        agents = {"good": scripted("good", "fixed", params={"replies": ["ok"]}), "bad": scripted("bad", "garbage")}
        record = await play_match(MatchSpec(key="s", game="strict", agents=("good", "bad"), seed=1), agents)
    finally:
        plugins.unregister("game", "strict")
    bad = next(s.label for s in record.seats if s.agent == "bad")
    assert not [m for m in record.messages if m.sender == bad]
    assert len([e for e in record.events if e.type == "turn_failed" and e.seat == bad]) == 3 * 3


async def test_a_bug_in_a_game_fails_only_its_match_and_names_the_cause():
    from arena.contract import plugins
    from helpers import Roundtable

    class Buggy(Roundtable):
        def parse(self, seat, reply, round):
            return {}["missing"]

    plugins.register("game", "buggy", Buggy)
    try:
        agents = {"a": scripted("a", "fixed", params={"replies": ["x"]}), "b": scripted("b", "fixed", params={"replies": ["y"]})}
        record = await play_match(MatchSpec(key="b", game="buggy", agents=("a", "b"), seed=1), agents)
    finally:
        plugins.unregister("game", "buggy")
    assert record.status == "failed"
    assert record.error.startswith("KeyError: 'missing'")
    assert "parse" in record.error  # where it was raised


async def test_a_match_that_cannot_be_set_up_is_recorded_as_failed():
    agents = {"a": scripted("a", "free_rider")}
    record = await play_match(MatchSpec(key="one", game="public_goods", agents=("a",), seed=1), agents)
    assert record.status == "failed" and "public_goods needs at least 2 players; 1 agents given" in record.error
    record = await play_match(MatchSpec(key="x", game="no_such_game", agents=("a", "a"), seed=1), agents)
    assert record.status == "failed" and "unknown game 'no_such_game'" in record.error


async def test_a_judge_whose_backend_is_down_interrupts_the_match_rather_than_leave_its_score_out():
    from helpers import ROOT

    from arena.contract.referee import RefereeSpec

    problems = str(ROOT / "scenarios" / "data" / "sample-problems.jsonl")
    agents = {"p": scripted("p", "fixed", params={"replies": ["```python\ndef f():\n    return 1\n```"]}),
              "r": scripted("r", "fixed", params={"replies": ["over"]}), "judge": Unreachable("judge", down_from=0)}
    match = Match(MatchSpec(key="cr", game="code_review", agents=("p", "r"), seed=1, shuffle_seats=False,
                            params={"problems": problems, "case": "running-max"},
                            referees=(RefereeSpec(use="llm_judge", params={"agent": "judge"}),)), agents)
    played = await match.play()
    record = played.record
    assert record.status == "interrupted" and record.metrics == {} and record.payoffs == {}
    assert played.outage.agent == "judge" and "(agent 'judge') is unavailable" in record.error


async def test_a_match_is_built_whole_and_a_bad_spec_is_refused_when_built():
    """Everything a match plays with exists once it is built; a spec that cannot be played is
    refused there, with the one seat-count wording `arena validate` uses too."""
    import pytest

    from arena.contract import plugins
    from arena.contract.errors import MatchSetupError

    agents = quartet()
    match = Match(spec(7, agents, shuffle_seats=False), agents)
    assert [s.agent for s in match.seats] == list(QUARTET)
    assert set(match.agents) == set(match.game.seats) == {s.label for s in match.seats}
    assert match.pool.round == 0 and [type(r).__name__ for r in match.referees] == ["RuleReferee"]
    with pytest.raises(MatchSetupError, match="'ghost', which the scenario does not define"):
        Match(spec(7, {**agents, "ghost": None}), agents)
    with pytest.raises(MatchSetupError, match="public_goods needs at least 2 players; 1 agents given"):
        Match(spec(7, {"all": agents["all"]}), agents)
    assert plugins.load("game", "code_review").seat_count_problem(3) == "needs 2 players"
    assert plugins.load("game", "public_goods").seat_count_problem(12) is None


async def test_parse_is_told_the_round_it_answers_including_on_a_re_ask():
    from arena.contract import plugins
    from helpers import Roundtable

    parsed = []

    class Counting(Roundtable):
        def parse(self, seat, reply, round):
            parsed.append((seat, round, reply))
            if reply != "ok":
                raise InvalidReply("say ok")
            return reply

    plugins.register("game", "counting", Counting)
    try:
        agents = {"good": scripted("good", "fixed", params={"replies": ["ok"]}),
                  "bad": scripted("bad", "fixed", params={"replies": ["no", "ok"]})}
        record = await play_match(MatchSpec(key="c", game="counting", agents=("good", "bad"), seed=1,
                                            shuffle_seats=False, settings=MatchSettings(max_retries=1)), agents)
    finally:
        plugins.unregister("game", "counting")
    assert record.status == "finished"
    asked = sorted({(e.seat, e.round) for e in record.events if e.type == "action"})
    assert sorted({(seat, round) for seat, round, _ in parsed}) == asked
    # a re-ask parses for the same round as the first attempt
    failed = [(e.seat, e.round) for e in record.events if e.type == "turn_failed"]
    assert failed and all((seat, round, "no") in parsed for seat, round in failed)


class Sleeper(Agent):
    def __init__(self, name, seconds):
        super().__init__(name, None)
        self.seconds = seconds

    async def reply(self, turn):
        await trio.sleep(self.seconds)
        return coins(2)


async def test_an_agent_error_cuts_the_round_short_but_an_outage_lets_the_other_seats_finish(autojump_clock):
    """A crash ends the match at once; an unreachable backend waits for the round's other seats
    (their replies are paid for, and a replay gets them from the cache), then interrupts it."""
    settings = MatchSettings(turn_timeout=100)
    agents = {"slow": Sleeper("slow", 40), "flaky": Flaky("flaky")}
    started = trio.current_time()
    record = await play_match(spec(1, agents, params={"rounds": 1}, settings=settings), agents)
    assert record.status == "failed" and trio.current_time() - started == 0
    agents = {"slow": Sleeper("slow", 40), "gone": Unreachable("gone", down_from=1)}
    started = trio.current_time()
    played = await Match(spec(1, agents, params={"rounds": 1}, settings=settings), agents).play()
    assert played.record.status == "interrupted" and played.outage.agent == "gone"
    assert trio.current_time() - started == 40


def test_the_action_schema_is_built_once_per_game_and_params_and_shared_by_its_matches():
    from arena.games.public_goods import contribution_schema

    agents = quartet()
    first = Match(spec(1, agents, params={"rounds": 2}), agents)
    other = Match(spec(2, agents, params={"rounds": 5}), agents)
    poorer = Match(spec(3, agents, params={"rounds": 2, "endowment": 5}), agents)
    assert first.action_schema == contribution_schema(10) and first.action_schema["properties"]["coins"]["maximum"] == 10
    assert other.action_schema is first.action_schema  # same endowment: one schema, not one per match
    assert poorer.action_schema["properties"]["coins"]["maximum"] == 5


async def test_instant_and_awaiting_strategies_play_the_same_moves():
    """A plain-function strategy is taken in line, one that awaits (or hands back an awaitable) is
    asked through ``reply`` under the turn's timer: the moves, payoffs and transcript are the same,
    a round of instant agents still lets other tasks run, and the strategy is called once per turn,
    the first included (its awaitable, handed back in line, is the one awaited)."""
    from arena.contract import plugins
    from arena.games.public_goods.strategies import TitForTat

    calls = []

    class Later(TitForTat):
        def reply(self, turn, rng):
            calls.append((turn.round, turn.attempt))

            async def later():
                await trio.sleep(0)
                return TitForTat.reply(self, turn, rng)
            return later()

    plugins.register("strategy", "tft_later", Later)
    try:
        instant = quartet()
        waiting = {**quartet(), "tft": scripted("tft", "tft_later")}
        assert instant["tft"].reply_now is not None and waiting["tft"]._at_once  # it finds out when first asked
        others = []

        async def count_checkpoints():
            while True:
                others.append(1)
                await trio.sleep(0)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(count_checkpoints)
            a = await play_match(spec(5, instant), instant)
            ticks = len(others)
            b = await play_match(spec(5, waiting), waiting)
            nursery.cancel_scope.cancel()
    finally:
        plugins.unregister("strategy", "tft_later")
    assert not waiting["tft"]._at_once
    assert len(calls) == len(set(calls)) == b.rounds  # one call per turn, none repeated
    assert a.status == b.status == "finished"
    assert a.payoffs == b.payoffs and [m.content for m in a.messages] == [m.content for m in b.messages]
    assert ticks >= a.rounds - 1  # it yielded every round (the last round's turn may come after it ended)


def test_the_shared_hearing_graphs_are_built_once_per_seating_and_cannot_be_changed():
    """Games return these every round; shared between matches, a change by one game would reach
    every other match with that seating, so they are frozen."""
    import networkx as nx

    from arena.contract import everyone_hears_everyone, nobody_hears_anyone

    seats = ("Player 1", "Player 2", "Player 3")
    everyone = everyone_hears_everyone(seats)
    assert everyone is everyone_hears_everyone(tuple(seats))
    assert {s: set(everyone.successors(s)) for s in seats} == {s: set(seats) - {s} for s in seats}
    nobody = nobody_hears_anyone(seats)
    assert set(nobody.nodes) == set(seats) and nobody.number_of_edges() == 0
    for graph in (everyone, nobody):
        with pytest.raises(nx.NetworkXError):
            graph.add_edge("Player 1", "Player 2")


def test_a_turns_seed_is_derived_from_the_match_seed_seat_round_and_attempt():
    """The asker joins a seat's part of the text once; the seeds are those `seeding.derive` gives."""
    from arena.contract import seeding
    from arena.engine.turns import Asker

    asker = Asker("m", 2**40 + 3, MatchSettings(), lambda event: None)
    for seat in ("Player 1", "Player 2", "Player 1"):
        for round, attempt in ((1, 0), (12, 2), (7, 1)):
            assert asker._seed(seat, round, attempt) == seeding.derive(2**40 + 3, "turn", seat, round, attempt)
    assert seeding.derive(5, "turn", "A", 1, 0) == 2431377463824728014  # the seeds of runs already made stay the same


def test_a_games_generator_draws_what_one_seeded_from_the_match_seed_draws_however_it_is_used():
    """The generator a game gets (``seeding.rng``) is seeded only when first used; every way of
    using it, a copy or a pickle included, gives what ``random.Random(derive(...))`` gives."""
    import copy
    import pickle
    import random

    from arena.contract import seeding

    uses = {
        "random": lambda r: [r.random() for _ in range(3)],
        "shuffle": lambda r: (lambda xs: (r.shuffle(xs), xs)[1])(list(range(10))),
        "choice and sample": lambda r: (r.choice("abcdef"), r.sample(range(100), 5)),
        "gauss": lambda r: (r.gauss(0, 1), r.gauss(0, 1)),
        "bits and bytes": lambda r: (r.getrandbits(70), r.randbytes(5)),
        "a copy": lambda r: copy.deepcopy(r).random(),
        "a pickle": lambda r: pickle.loads(pickle.dumps(r)).random(),
        "its state": lambda r: r.getstate(),
        "a state set": lambda r: (r.setstate(random.Random(1).getstate()), r.random())[1],
        "a new seed": lambda r: (r.seed(9), r.random())[1],
    }
    for match_seed in (0, 12345, 2**63 + 1):
        for name, use in uses.items():
            lazy = seeding.rng(match_seed, "game")
            assert isinstance(lazy, random.Random)
            assert use(lazy) == use(random.Random(seeding.derive(match_seed, "game"))), name
