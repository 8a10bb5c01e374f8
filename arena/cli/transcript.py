"""A match's transcript for a person: round by round, who said what and who saw it."""

from __future__ import annotations

from collections import defaultdict

from rich.console import Console
from rich.text import Text

from arena.contract.records import MatchRecord
from arena.contract.messages import REFEREE


def print_transcript(console: Console, record: MatchRecord) -> None:
    agent = {s.label: s.agent for s in record.seats}
    seats = list(agent)
    console.print(Text(f"{record.key} — {record.game}, seed {record.seed}, {record.status}, {record.rounds} rounds", style="bold"))
    console.print("params: " + ", ".join(f"{k}={v}" for k, v in record.params.items()))
    for seat in record.seats:
        console.print(f"  {seat.label}: {seat.agent} ({seat.role})")
    failures = defaultdict(list)
    actions = defaultdict(list)
    for event in record.events:
        if event.type == "turn_failed":
            failures[event.round].append(event)
        elif event.type == "action":
            actions[event.round].append(event)
    rounds = sorted({m.round for m in record.messages} | set(actions))
    for rnd in rounds:
        console.print(Text(f"\n── round {rnd} " + ("(rules) " if rnd == 0 else "") + "─" * 40, style="cyan"))
        for failure in failures.get(rnd, []):
            console.print(Text(
                f"  ✗ {failure.seat} ({failure.agent or agent.get(failure.seat)}) attempt {failure.attempt}: {failure.failure} — "
                f"{failure.reason} reply: {failure.reply!r}", style="yellow"))
        for message in (m for m in record.messages if m.round == rnd):
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
        for action in actions.get(rnd, []):
            tag = f" (default) — {_default(action, failures.get(rnd, []))}" if action.defaulted else ""
            console.print(Text(f"  → {_asked(action, agent)} action: {action.action}{tag}", style="red" if action.defaulted else "green"))
    payoffs = ", ".join(f"{s} ({agent.get(s)}) {v:g}" for s, v in record.payoffs.items())
    if record.status == "finished":
        console.print(Text("\npayoffs: " + payoffs, style="bold"))
    elif record.status == "truncated":
        console.print(Text(f"\ntruncated: stopped at max_rounds after {record.rounds} rounds, before the game ended; "
                           f"scored where it stopped ({payoffs}), and left out of the results.", style="bold yellow"))
    elif record.error:
        style = "bold yellow" if record.status == "interrupted" else "bold red"
        console.print(Text(f"\n{record.status}: {record.error}", style=style))


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
