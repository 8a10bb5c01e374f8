"""Synchronicity: nobody sees a message of the round it is answering, and only its audience sees it."""

from __future__ import annotations


import networkx as nx
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from arena.contract import plugins
from arena.contract.game import Game, Notice
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
from arena.engine.pool import MessagePool
from arena.contract.messages import SIMULTANEOUS, Turn

from helpers import Recording, scripted


def test_posts_are_staged_until_the_round_closes():
    pool = MessagePool(["A", "B", "C"])
    pool.close_round()
    pool.post("A", "hello", ["B"], "reply")
    assert pool.visible_to("B") == ()
    assert pool.visible_to("A") == ()
    released = pool.close_round()
    assert [m.content for m in released] == ["hello"]
    assert [m.content for m in pool.visible_to("B")] == ["hello"]
    assert [m.content for m in pool.visible_to("A")] == ["hello"]  # a sender sees its own words
    assert pool.visible_to("C") == ()
    assert pool.round == 2


def simultaneous_round(pool: MessagePool) -> None:
    """A round as the match loop posts it: every speaker's prompt, then the replies in seat order,
    then the referee's notice; A, B and C all speak and all hear each other."""
    for seat in pool.seats:
        pool.post("Referee", f"{seat}, your move.", [seat], "prompt")
    for seat in pool.seats:
        pool.post(seat, f"{seat} moves.", [s for s in pool.seats if s != seat], "reply")
    pool.post("Referee", "Round over.", pool.seats, "notice")
    pool.close_round()


def test_in_a_simultaneous_round_each_seat_gets_its_own_reply_before_the_others():
    pool = MessagePool(["A", "B", "C"])
    pool.close_round()
    simultaneous_round(pool)
    seen = {seat: [m.content for m in pool.visible_to(seat)] for seat in pool.seats}
    assert seen == {
        "A": ["A, your move.", "A moves.", "B moves.", "C moves.", "Round over."],
        "B": ["B, your move.", "B moves.", "A moves.", "C moves.", "Round over."],
        "C": ["C, your move.", "C moves.", "A moves.", "B moves.", "Round over."],
    }
    # the log keeps the order things were posted in: the record and the export do not change
    assert [m.content for m in pool.log][3:6] == ["A moves.", "B moves.", "C moves."]
    # a second round goes after the first, whole: earlier views are not disturbed
    before = pool.visible_to("C")
    simultaneous_round(pool)
    assert len(before) == 5 and [m.content for m in pool.visible_to("C")][5:] == [
        "C, your move.", "C moves.", "A moves.", "B moves.", "Round over."]


def test_a_sequential_round_and_a_listener_keep_the_posting_order():
    pool = MessagePool(["A", "B", "C"])
    pool.close_round()
    pool.post("Referee", "A, your move.", ["A"], "prompt")
    pool.post("A", "A moves.", ["B", "C"], "reply")
    pool.close_round()
    pool.post("Referee", "B, your move.", ["B"], "prompt")
    pool.post("B", "B answers A.", ["A", "C"], "reply")
    pool.close_round()
    assert [m.content for m in pool.visible_to("A")] == ["A, your move.", "A moves.", "B answers A."]
    assert [m.content for m in pool.visible_to("B")] == ["A moves.", "B, your move.", "B answers A."]
    assert [m.content for m in pool.visible_to("C")] == ["A moves.", "B answers A."]


def turn_of(pool: MessagePool, seat: str) -> Turn:
    return Turn(match="m", seat=seat, role="Player", round=pool.round, history=pool.visible_to(seat),
                prompt="Next move.", seed=0)


def test_the_model_is_told_which_replies_were_written_at_the_same_time_as_its_own():
    pool = MessagePool(["A", "B", "C"])
    pool.close_round()
    simultaneous_round(pool)
    pool.post("Referee", "A, your move.", ["A"], "prompt")  # then a round where only A speaks
    pool.post("A", "A alone.", ["B", "C"], "reply")
    pool.close_round()
    line = SIMULTANEOUS  # the referee's voice is the user role: no speaker tag before its text
    assert turn_of(pool, "B").as_chat() == [
        {"role": "user", "content": "B, your move."},
        {"role": "assistant", "content": "B moves."},
        {"role": "user", "content": line},
        {"role": "user", "content": "A said:\nA moves."},
        {"role": "user", "content": "C said:\nC moves."},
        {"role": "user", "content": "Round over."},
        {"role": "user", "content": "A said:\nA alone."},  # said after B's turn, in a round B was not asked in: no line
        {"role": "user", "content": "Next move."},
    ]
    assert [c["content"] for c in turn_of(pool, "A").as_chat()].count(line) == 1


def test_a_seat_that_only_listened_reads_no_line_about_simultaneous_replies():
    pool = MessagePool(["A", "B", "S"])
    pool.close_round()
    for seat in ("A", "B"):
        pool.post("Referee", f"{seat}, your move.", [seat], "prompt")
    for seat in ("A", "B"):
        pool.post(seat, f"{seat} moves.", ["S"], "reply")  # only the summarizer hears them
    pool.close_round()
    assert [m.content for m in pool.visible_to("S")] == ["A moves.", "B moves."]
    assert SIMULTANEOUS not in str(turn_of(pool, "S").as_chat())
    assert SIMULTANEOUS not in str(turn_of(pool, "B").as_chat())  # it heard nobody


def test_a_seat_whose_turn_gave_no_reply_still_reads_the_others_as_simultaneous():
    pool = MessagePool(["A", "B"])
    pool.close_round()
    for seat in ("A", "B"):
        pool.post("Referee", f"{seat}, your move.", [seat], "prompt")
    pool.post("A", "A moves.", ["B"], "reply")  # B's turn was defaulted: it said nothing
    pool.close_round()
    assert [c["content"] for c in turn_of(pool, "B").as_chat()] == [
        "B, your move.", SIMULTANEOUS, "A said:\nA moves.", "Next move."]


def test_posting_to_an_unknown_seat_is_refused():
    pool = MessagePool(["A", "B"])
    try:
        pool.post("A", "x", ["Z"], "reply")
    except ValueError as exc:
        assert "Z" in str(exc)
    else:
        raise AssertionError("expected a ValueError")


class Chatter(Game):
    """A test game whose speakers and visibility graph change at random every round."""


    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.graphs: dict[int, nx.DiGraph] = {}
        self.speaking: dict[int, list[str]] = {}
        self.notices: dict[int, tuple[str, ...]] = {}
        self.total_rounds = rng.randint(1, 5)

    def rules(self, seat):
        return f"You are {seat}. Say anything."

    def prompt(self, seat, round):
        return f"Round {round}: speak."

    def speakers(self, round):
        chosen = [s for s in self.seats if self.rng.random() < 0.7] or [self.seats[0]]
        self.speaking[round] = chosen
        return chosen

    def hears(self, round):
        graph = nx.DiGraph()
        graph.add_nodes_from(self.seats)
        for a in self.seats:
            for b in self.seats:
                if a != b and self.rng.random() < 0.5:
                    graph.add_edge(a, b)
        self.graphs[round] = graph
        return graph

    def parse(self, seat, reply, round):
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions):
        to = tuple(s for s in self.seats if self.rng.random() < 0.5)
        self.notices[round] = to
        return [Notice(to=to, text=f"round {round} done")] if to else []

    def is_over(self, round):
        return round >= self.total_rounds

    def payoffs(self):
        return {s: 0.0 for s in self.seats}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32), n=st.integers(2, 6))
def test_no_seat_ever_sees_the_current_round_or_a_message_it_may_not_hear(seed, n):
    plugins.register("game", "chatter", Chatter)
    try:
        names = [f"agent{i}" for i in range(n)]
        agents = {a: Recording(scripted(a, "fixed", params={"replies": [f"words of {a}"]})) for a in names}
        games: list[Chatter] = []
        original_init = Chatter.__init__

        def capture(self, *args):
            original_init(self, *args)
            games.append(self)

        Chatter.__init__ = capture
        try:
            spec = MatchSpec(key="p", game="chatter", agents=tuple(names), seed=seed)
            record = trio.run(play_match, spec, agents)
        finally:
            Chatter.__init__ = original_init
    finally:
        plugins.unregister("game", "chatter")
    assert record.status == "finished"
    game = games[0]
    turns = [t for a in agents.values() for t in a.turns]
    assert turns, "somebody must have been asked"
    for turn in turns:
        assert turn.seat in game.speaking[turn.round]
        for message in turn.history:
            assert message.round < turn.round, "a message of the current round leaked"
            if message.sender == turn.seat:
                continue
            if message.kind == "reply":
                assert game.graphs[message.round].has_edge(message.sender, turn.seat)
            elif message.kind == "notice":
                assert turn.seat in game.notices[message.round]
            elif message.kind == "prompt":  # what it was asked at an earlier turn, and only that
                assert message.recipients == (turn.seat,) and turn.seat in game.speaking[message.round]
            else:
                assert message.kind == "rules" and message.recipients == (turn.seat,)
        # and nothing it was allowed to hear from earlier rounds is missing; in each round, its own
        # words come before the other seats' words of that round, written at the same time
        mine = [m for m in record.messages if m.round < turn.round and (m.sender == turn.seat or turn.seat in m.recipients)]
        first_other = {}
        for m in mine:
            if m.sender in game.seats and m.sender != turn.seat:
                first_other.setdefault(m.round, m.index)
        lived = lambda m: (m.round, m.sender != turn.seat and m.index >= first_other.get(m.round, m.index + 1), m.index)
        assert list(turn.history) == sorted(mine, key=lived)
        # and the model is told, once per such round, that those came at the same time as its turn
        simultaneous = {m.round for m in turn.history if m.kind == "reply" and m.sender != turn.seat
                        and turn.seat in game.speaking[m.round]}
        assert sum(c["content"] == SIMULTANEOUS for c in turn.as_chat()) == len(simultaneous)


def test_a_message_the_pool_makes_without_validation_is_one_pydantic_would_have_made():
    from arena.contract.messages import Message

    pool = MessagePool(["A", "B"])
    made = pool.post("A", "I give 3.", ["B"], "reply", {"coins": 3}, shown="I give 3!")
    validated = Message(index=0, round=0, sender="A", recipients=("B",), content="I give 3.", kind="reply",
                        data={"coins": 3}, shown="I give 3!")
    assert made == validated and made.model_dump_json() == validated.model_dump_json()
    assert made.model_fields_set == validated.model_fields_set
    assert made.model_copy(update={"data": None}).data is None and made.data == {"coins": 3}  # copies stay separate
    assert made.as_shown().content == "I give 3!" and made.as_shown().shown is None


def test_what_a_game_posts_that_is_not_of_a_messages_types_is_checked_as_before():
    import pytest
    from collections import OrderedDict
    from pydantic import ValidationError

    pool = MessagePool(["A", "B"])
    with pytest.raises(ValidationError, match="content"):
        pool.post("A", 42, ["B"], "reply")  # a game's bug: said where it is, not stored
    with pytest.raises(ValidationError, match="kind"):
        pool.post("A", "hello", ["B"], "shout")
    converted = pool.post("A", "fine", ["B"], "notice", OrderedDict(x=1))  # pydantic's conversion, as before
    assert type(converted.data) is dict and converted.data == {"x": 1} and converted.index == 0
