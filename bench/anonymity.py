"""What a message costs with the anonymity filter on, as a match's history grows.

One match of two seats that hear each other, as long as asked: every round both are asked
(a prompt each, posted to their conversations) and both answer with a sentence that names
both agents and their vendor, so the filter finds something in every reply. The agents are
scripted and instant, so the time is Arena's own: the filter, the pool, the turns, the
events. The filter runs once per message, when it is posted; a turn reads a view of the
seat's inbox, so the cost per message should not grow with the history.

    python bench/anonymity.py            # 100, 2,000 and 20,000 messages, best of 3
    python bench/anonymity.py --quick    # best of 1

Goal (issue 12): at most 50 µs per message on an idle machine, and flat: the figure at
20,000 messages at most 1.3 times the figure at 100.
"""

from __future__ import annotations

import argparse
import time

import trio

from arena.agents.scripted import ScriptedAgent, ScriptedConfig
from arena.contract import Game, Notice, plugins
from arena.contract.records import MatchSettings, MatchSpec
from arena.engine.match import play_match

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

    def parse(self, seat, reply, round):
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions) -> list[Notice]:
        return []

    def is_over(self, round):
        return round >= type(self).rounds

    def payoffs(self):
        return {seat: 0.0 for seat in self.seats}


def agents() -> dict:
    line = "I think alice-gpt (gpt-4o by OpenAI) and bob-claude (claude-3 by Anthropic) agree on this."
    return {name: ScriptedAgent(name, ScriptedConfig(strategy="fixed", params={"replies": [line]}))
            for name in ("alice-gpt", "bob-claude")}


def measure(messages: int, repeats: int) -> tuple[float, int]:
    """Best µs per message over ``repeats`` matches of about ``messages`` messages."""
    Chatter.rounds = max(1, messages // MESSAGES_PER_ROUND)
    spec = MatchSpec(key="bench", game="chatter", agents=("alice-gpt", "bob-claude"), seed=1,
                     scrub=("alice-gpt", "bob-claude", "gpt", "claude", "openai", "anthropic"),
                     settings=MatchSettings(max_rounds=Chatter.rounds))
    best, count = float("inf"), 0
    for _ in range(repeats):
        players = agents()
        started = time.perf_counter()
        record = trio.run(play_match, spec, players)
        elapsed = time.perf_counter() - started
        assert record.status == "finished", record.error
        assert any(e.type == "scrubbed" for e in record.events), "the filter found nothing: the bench measures nothing"
        count = len(record.messages)
        best = min(best, elapsed / count * 1e6)
    return best, count


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    plugins.register("game", "chatter", Chatter)
    repeats = 1 if args.quick else 3
    figures = {}
    measure(100, 1)  # warm up: imports and first-time set-up are not a message's cost
    print(f"{'history':>10} {'messages':>9} {'µs/message':>11}")
    for size in SIZES:
        figures[size], count = measure(size, repeats)
        print(f"{size:>10,} {count:>9,} {figures[size]:>11.1f}")
    ratio = figures[SIZES[-1]] / figures[SIZES[0]]
    worst = max(figures.values())
    print(f"\n{SIZES[-1]:,} / {SIZES[0]} messages: ×{ratio:.2f} (goal ≤ 1.3); worst {worst:.1f} µs/message (goal ≤ 50)")


if __name__ == "__main__":
    main()
