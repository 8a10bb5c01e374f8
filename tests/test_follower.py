"""The store follower behind `arena watch`: each look reads only what was written since the last one,
sees a call in flight as soon as it starts, and a late watcher gets the same facts as an early one."""

from __future__ import annotations

from arena.contract.calls import CallRecord, CallStarted
from arena.contract.events import MatchEnded, MatchStarted, MessagePosted, RoundClosed, SeatInfo
from arena.contract.messages import Message
from arena.contract.records import MatchRecord, MatchSpec
from arena.contract import open_run
from arena.store import RunStore
from arena.store.follower import Follower, Note, Outcome

KEY = "pg#1:model+giver"
SEATS = (SeatInfo(label="Player 1", role="Player", agent="model"), SeatInfo(label="Player 2", role="Player", agent="giver"))


def message(index: int, kind: str, sender: str = "Referee", round: int = 1) -> MessagePosted:
    return MessagePosted(match=KEY, message=Message(index=index, round=round, sender=sender, recipients=("Player 1",),
                                                    content=f"{kind} {index}", kind=kind))


def flight(token: str) -> CallStarted:
    return CallStarted(token=token, match=KEY, seat="Player 1", round=1, attempt=1, agent="model", backend="openai",
                       model="m")


def record(token: str) -> CallRecord:
    return CallRecord(match=KEY, seat="Player 1", round=1, attempt=1, agent="model", backend="openai", model="m",
                      prompt_tokens=12, completion_tokens=3, cost=0.5, latency=1.25, retries=1, token=token)


def kinds(changes) -> list[str]:
    return [type(fact).__name__ for _, fact in changes.facts]


def test_each_poll_reads_what_is_new_in_the_order_it_happened(tmp_path):
    writer = RunStore.create_or_resume(tmp_path, "r", "name: r", "fp")
    writer.set_planned(2)
    follower = Follower(open_run(tmp_path), first_messages=8)
    first = follower.poll()
    assert (first.planned, first.facts, first.messages, first.running) == (2, [], [], set())

    writer.prepare(MatchSpec(key=KEY, group="pg", game="public_goods", params={"rounds": 1}, agents=("model", "giver"), seed=1), 0)
    writer.record_event(MatchStarted(match=KEY, game="public_goods", seed=1, seats=SEATS))
    writer.record_event(message(0, "rules", round=0))
    writer.record_event(message(1, "prompt"))
    writer.call_started(flight("t1"))  # committed at once: a watcher sees the match and its call meanwhile
    seen = follower.poll()
    assert kinds(seen) == ["MatchStarted", "CallStarted"]
    assert seen.facts[1][1] == flight("t1")
    assert seen.running == {KEY} and seen.gone == [] and seen.messages == []  # rules and prompts are left out
    assert follower.poll().facts == []  # nothing new, nothing read twice

    writer.call_started(flight("t1"))  # the same call tried again: still one call in flight, not a new one
    writer.record_call(record("t1"))
    writer.record_note("model", "http://x", "output mode", "agent model at http://x: output mode json_object")
    seen = follower.poll()
    assert kinds(seen) == ["CallRecord", "Note"]
    call = seen.facts[0][1]
    assert call == record("t1").model_copy(update={"token": None})  # the store keeps no token: the call ends by leaving
    assert seen.gone == ["t1"]
    assert seen.facts[1][1] == Note("model", "http://x", "output mode", "agent model at http://x: output mode json_object")

    writer.record_event(message(2, "reply", sender="Player 1"))
    writer.record_event(RoundClosed(match=KEY, round=1))
    writer.record_event(MatchEnded(match=KEY, rounds=1, payoffs={"Player 1": 10.0, "Player 2": 5.0}))
    writer.finish(MatchRecord(key=KEY, group="pg", game="public_goods", params={"rounds": 1}, seed=1, seats=SEATS,
                              status="finished", rounds=1, payoffs={"Player 1": 10.0, "Player 2": 5.0}, messages=(),
                              events=[]))
    seen = follower.poll()
    assert kinds(seen) == ["RoundClosed", "MatchEnded"]
    assert [(key, m.content) for key, m in seen.messages] == [(KEY, "reply 2")]
    assert seen.outcomes == {KEY: ("pg", [Outcome("Player 1", "model", "Player", 10.0),
                                          Outcome("Player 2", "giver", "Player", 5.0)])}
    assert seen.running == set()
    times = [at for at, _ in seen.facts]
    assert times == sorted(times)

    # a watcher that comes late reads the same facts from the start (only the last messages, though)
    late = Follower(open_run(tmp_path)).poll()
    assert kinds(late) == ["MatchStarted", "CallRecord", "Note", "RoundClosed", "MatchEnded"]
    assert late.messages == [] and late.gone == []  # no match is running: no messages to start the feed with
    assert writer.spec(KEY).params == {"rounds": 1} and writer.spec("nothing") is None
