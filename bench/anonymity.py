"""What a message costs with the anonymity filter on, as a match's history grows.

One match of two seats that hear each other, as long as asked: every round both are asked
(a prompt each, posted to their conversations) and both answer with a sentence that names
both agents and their vendor, so the filter finds something in every reply. The agents are
scripted and instant, so the time is Arena's own: the filter, the pool, the turns, the
events. The filter runs once per message, when it is posted; a turn reads a view of the
seat's inbox, so the cost per message should not grow with the history.

Each size is measured twice: the match alone, and the match as a run plays it, with a
``RunStore`` in a temporary folder (``prepare``, every event written as it happens, ``finish``:
what ``arena run`` does for each match), timed together. Both are timed inside ``trio.run`` and
with the garbage collector set as ``arena run`` sets it (``arena.run.collector``), since a run
starts trio once and plays every match under those settings. Two figures per message, each the best
of N: the process's CPU time (what the goal is about: other people's work on a shared machine
does not count in it) and wall time (the same on an idle machine).

    python bench/anonymity.py            # 100, 2,000 and 20,000 messages, best of 5
    python bench/anonymity.py --quick    # best of 1
    python bench/anonymity.py --profile  # and where the time of the 20,000-message match goes

Goals: at most 50 µs per message on an idle machine, and flat (the figure at 20,000 messages at
most 1.3 times the figure at 100), for the match with the filter on (issue 12) and for the same
match including the store (issue 15). Each column gets its verdict.
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import sys
import tempfile
import time
import timeit
from pathlib import Path

import trio

from arena.agents.scripted import ScriptedAgent, ScriptedConfig
from arena.contract import Game, Notice, plugins
from arena.contract.records import MatchRecord, MatchSettings, MatchSpec
from arena.engine.anonymity import scrub
from arena.engine.match import play_match
from arena.run.collector import tuned_for_a_run
from arena.store import RunStore
from machine import load, machine_speed  # bench/machine.py: the load and a reference loop's speed

SIZES = (100, 2_000, 20_000)
MESSAGES_PER_ROUND = 4  # two prompts, two replies


class Chatter(Game):
    """Both seats speak every round and hear each other; ends after ``rounds`` rounds."""

    description = "bench: two seats talking"
    min_seats = max_seats = 2
    rounds = 1

    def rules(self, seat):
        return f"You are {seat}. Talk."

    def prompt(self, seat, round):
        return f"Round {round}: say something."

    def parse(self, seat, reply, round=0):  # a default: the bench also runs on engines that did not pass it
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions) -> list[Notice]:
        return []

    def is_over(self, round):
        return round >= type(self).rounds

    def payoffs(self):
        return {seat: 0.0 for seat in self.seats}


TERMS = ("alice-gpt", "bob-claude", "gpt", "claude", "openai", "anthropic")


def filter_texts() -> list[tuple[str, str]]:
    line = "I think alice-gpt (gpt-4o by OpenAI) and bob-claude (claude-3 by Anthropic) agree on this."
    plain = "I give 5 coins: the group gains when all give, and I keep doing what the others did. " * 16
    typographic = plain.replace(":", " \u2014").replace("I keep", "I\u2019ll keep")
    return [(f"the bench's reply, four names ({len(line)} characters)", line),
            (f"a reply without a name ({len(plain):,} characters, ASCII)", plain),
            (f"the same with typographic punctuation ({len(typographic):,} characters)", typographic)]


def agents() -> dict:
    line = "I think alice-gpt (gpt-4o by OpenAI) and bob-claude (claude-3 by Anthropic) agree on this."
    return {name: ScriptedAgent(name, ScriptedConfig(strategy="fixed", params={"replies": [line]}))
            for name in ("alice-gpt", "bob-claude")}


def spec_for(messages: int) -> MatchSpec:
    Chatter.rounds = max(1, messages // MESSAGES_PER_ROUND)
    return MatchSpec(key="bench", game="chatter", agents=("alice-gpt", "bob-claude"), seed=1,
                     scrub=("alice-gpt", "bob-claude", "gpt", "claude", "openai", "anthropic"),
                     settings=MatchSettings(max_rounds=Chatter.rounds))


def play_once(spec: MatchSpec, store: bool, profile: cProfile.Profile | None = None) -> tuple[float, float, int]:
    """CPU and wall seconds one match took (with the store's writes when ``store``), and its messages."""
    players = agents()
    with tempfile.TemporaryDirectory(prefix="arena-bench-") as tmp:
        run = RunStore.create_or_resume(Path(tmp) / "run", "bench", "name: bench\n", "bench") if store else None

        async def play() -> tuple[float, float, MatchRecord]:
            # timed inside trio.run, as a run plays its matches inside one: starting trio is not a match's cost
            if profile is not None:
                profile.enable()
            started, cpu = time.perf_counter(), time.process_time()
            if run is not None:
                run.prepare(spec, 0)
            record = await play_match(spec, players, (run.record_event,) if run is not None else ())
            if run is not None:
                run.finish(record)
            elapsed, cpu = time.perf_counter() - started, time.process_time() - cpu
            if profile is not None:
                profile.disable()
            return cpu, elapsed, record

        try:
            with tuned_for_a_run():  # the garbage collector's settings of `arena run`
                cpu, elapsed, record = trio.run(play)
            if run is not None:
                stored = run.db.execute("SELECT count(*) FROM messages WHERE match_key = 'bench'").fetchone()[0]
                assert stored == len(record.messages), "the store kept fewer messages than the match posted"
        finally:
            if run is not None:
                run.close()
    assert record.status == "finished", record.error
    assert any(e.type == "scrubbed" for e in record.events), "the filter found nothing: the bench measures nothing"
    return cpu, elapsed, len(record.messages)


def measure(messages: int, repeats: int, store: bool) -> tuple[float, float, int]:
    """Best CPU and wall µs per message over ``repeats`` matches of about ``messages`` messages."""
    spec = spec_for(messages)
    best_cpu = best_wall = float("inf")
    count = 0
    for _ in range(repeats):
        cpu, wall, count = play_once(spec, store)
        best_cpu, best_wall = min(best_cpu, cpu / count * 1e6), min(best_wall, wall / count * 1e6)
    return best_cpu, best_wall, count


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="best of 1")
    parser.add_argument("--repeats", type=int, default=5, help="matches per size and mode; the best counts (default 5)")
    parser.add_argument("--profile", action="store_true", help="profile one 20,000-message match with the store")
    args = parser.parse_args()
    plugins.register("game", "chatter", Chatter)
    repeats = 1 if args.quick else max(1, args.repeats)
    print(f"Python {sys.version.split()[0]}; {load()}; reference loop {machine_speed():.0f} ms of CPU "
          "(2,000,000 additions; lower is a faster machine)")
    measure(100, 1, True)  # warm up: imports and first-time set-up are not a message's cost
    figures: dict[bool, dict[int, float]] = {False: {}, True: {}}
    walls: dict[bool, dict[int, float]] = {False: {}, True: {}}
    print(f"\n{'':>20} {'µs per message: CPU (wall)':^36}")
    print(f"{'history':>10} {'messages':>9} {'match alone':>17} {'with the store':>18}")
    for size in SIZES:
        for store in (False, True):
            figures[store][size], walls[store][size], count = measure(size, repeats, store)
        print(f"{size:>10,} {count:>9,} {figures[False][size]:>8.1f} ({walls[False][size]:>6.1f}) "
              f"{figures[True][size]:>9.1f} ({walls[True][size]:>6.1f})")
    print(f"(best of {repeats}; CPU time)")
    ok = True
    for store, label, goal in ((False, "match alone", "issue 12, the filter on"),
                               (True, "with the store", "issue 15, the store included")):
        ratio = figures[store][SIZES[-1]] / figures[store][SIZES[0]]
        worst = max(figures[store].values())
        met = ratio <= 1.3 and worst <= 50
        ok = ok and met
        print(f"{label:<15} {SIZES[-1]:,} / {SIZES[0]} messages: ×{ratio:.2f} (goal ≤ 1.3); "
              f"worst {worst:.1f} µs/message (goal ≤ 50): {'PASS' if met else 'FAIL'} ({goal})")
    print("\nthe filter alone, µs per text (a model's reply is often long, and rarely names anyone):")
    for label, text in filter_texts():
        per = min(timeit.repeat(lambda: scrub(text, TERMS, "[name withheld]"), number=2000, repeat=repeats)) / 2000
        print(f"    {label:<58} {per * 1e6:6.1f}")
    if args.profile:
        profile = cProfile.Profile()
        cpu, _, count = play_once(spec_for(SIZES[-1]), True, profile)
        print(f"\nwhere the time of one {count:,}-message match with the store goes (cProfile, own time; "
              f"profiled: {cpu / count * 1e6:.0f} µs/message of CPU):")
        pstats.Stats(profile).sort_stats("tottime").print_stats(20)
    print(load())
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
