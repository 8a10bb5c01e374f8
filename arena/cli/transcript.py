"""A match's transcript for a person: round by round, who said what and who saw it."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.text import Text

from arena.contract.records import MatchRecord
from arena.contract.messages import REFEREE, Message


def print_transcript(console: Console, record: MatchRecord) -> None:
    agent = {s.label: s.agent for s in record.seats}
    seats = list(agent)
    console.print(Text(f"{record.key} — {record.game}, seed {record.seed}, {record.status}, {record.rounds} rounds", style="bold"))
    console.print("params: " + ", ".join(f"{k}={v}" for k, v in record.params.items()))
    for seat in record.seats:
        console.print(f"  {seat.label}: {seat.agent} ({seat.role})")
    # in the order things happened: a prompt, then the replies that failed, then the re-ask and the action
    failures = defaultdict(list)  # round -> the failures so far, for why a turn was defaulted
    headed: set[int] = set()
    for item in _in_order(record):
        rnd = item.round
        if rnd not in headed:
            headed.add(rnd)
            console.print(Text(f"\n── round {rnd} " + ("(rules) " if rnd == 0 else "") + "─" * 40, style="cyan"))
        if isinstance(item, Message):
            _print_message(console, item, agent, seats)
        elif item.type == "turn_failed":
            failures[rnd].append(item)
            console.print(Text(
                f"  ✗ {item.seat} ({item.agent or agent.get(item.seat)}) attempt {item.attempt}: {item.failure} — "
                f"{item.reason} reply: {item.reply!r}", style="yellow"))
        else:
            tag = f" (default) — {_default(item, failures.get(rnd, []))}" if item.defaulted else ""
            console.print(Text(f"  → {_asked(item, agent)} action: {item.action}{tag}", style="red" if item.defaulted else "green"))
    payoffs = ", ".join(f"{s} ({agent.get(s)}) {v:g}" for s, v in record.payoffs.items())
    if record.status == "finished":
        console.print(Text("\npayoffs: " + payoffs, style="bold"))
    elif record.status == "truncated":
        console.print(Text(f"\ntruncated: stopped at max_rounds after {record.rounds} rounds, before the game ended; "
                           f"scored where it stopped ({payoffs}), and left out of the results.", style="bold yellow"))
    elif record.error:
        style = "bold yellow" if record.status == "interrupted" else "bold red"
        console.print(Text(f"\n{record.status}: {record.error}", style=style))


def _in_order(record: MatchRecord) -> list:
    """The record's messages, failed turns and actions in the order the match made them. A record whose
    event log holds no messages (one built by hand) shows each round's messages first."""
    kept = [e.message if e.type == "message" else e for e in record.events if e.type in ("message", "turn_failed", "action")]
    if record.messages and not any(isinstance(item, Message) for item in kept):
        kept = sorted([*record.messages, *kept], key=lambda item: (item.round, not isinstance(item, Message)))
    return kept


def _print_message(console: Console, message: Message, agent: dict[str, str], seats: list[str]) -> None:
    who = REFEREE if message.sender == REFEREE else f"{message.sender} ({agent.get(message.sender)})"
    others = [s for s in message.recipients if s != message.sender]
    if message.sender != REFEREE:
        seen = f"seen by {', '.join(others)}" if others else "seen by no other seat"
    elif not others:
        seen = "for the record, to no seat"
    else:
        seen = "to everyone" if sorted(others) == sorted(seats) and len(seats) > 1 else f"to {', '.join(others)}"
    console.print(Text(f"  {who} [{message.kind}; {seen}]", style="bold"))
    console.print(Text("    " + message.content.replace("\n", "\n    ")))


def _asked(event, agent: dict[str, str]) -> str:
    """Who took a turn: a seat by its label (its agent is listed above), a judge a referee asked, who
    has no seat, by the label and the judge's name ("Referee's judge (judge_b)"), as several may be
    asked in one round."""
    if event.seat in agent or not event.agent:
        return event.seat
    return f"{event.seat} ({event.agent})"


def _default(action, failures) -> str:
    """Why a turn took the game's default: the last way it failed, and after how many attempts."""
    last = [f for f in failures if f.seat == action.seat and f.agent == action.agent][-1:]
    if last and last[0].failure == "timeout":
        return "no reply in time"
    attempts = "attempt" if action.attempts == 1 else "attempts"
    return f"no valid reply in {action.attempts} {attempts}"
