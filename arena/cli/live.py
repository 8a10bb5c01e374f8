"""The live round log: what a person watches while matches run.

The watcher may know which agent sits in which seat, so names are shown beside
seat labels here; they never reach a prompt.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass

from rich.console import Console
from rich.table import Table
from rich.text import Text

from arena.contract.calls import CallRecord
from arena.contract.events import (
    ActionTaken, Event, MatchEnded, MatchFailed, MatchInterrupted, MatchStarted, MessagePosted, RoundClosed, TurnFailed,
)
from arena.results.usage import dollars
from arena.run.runner import Observer


def _short(text: str | None, width: int = 80) -> str:
    if text is None:
        return "—"
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _same_text(a: str, b: str | None) -> bool:
    return b is not None and " ".join(a.split()) == " ".join(b.split())


def _action(action) -> str:
    return action if isinstance(action, str) else json.dumps(action, ensure_ascii=False)


@dataclass(slots=True)
class _MatchCalls:
    calls: int = 0
    cached: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float = 0.0
    unpriced: int = 0
    uncounted: int = 0  # calls whose tokens are unknown (cut off, or answered without usage)
    latency: float = 0.0
    answered: int = 0
    retries: int = 0
    errors: int = 0


class CallTally:
    """The model calls of each match in play, said in one line when the match ends."""

    def __init__(self):
        self._matches: dict[str, _MatchCalls] = {}

    def add(self, call: CallRecord) -> None:
        t = self._matches.setdefault(call.match, _MatchCalls())
        if call.cached:
            t.cached += 1
            return
        t.calls += 1
        t.prompt_tokens += call.prompt_tokens or 0
        t.completion_tokens += call.completion_tokens or 0
        t.uncounted += call.prompt_tokens is None or call.completion_tokens is None
        if call.cost is None:
            t.unpriced += 1
        else:
            t.cost += call.cost
        if call.error is None:
            t.latency += call.latency
            t.answered += 1
        else:
            t.errors += 1
        t.retries += call.retries

    def pop_line(self, match: str) -> str | None:
        """'calls: …' for a match that made or reused model calls (and forgets it); None otherwise."""
        t = self._matches.pop(match, None)
        if t is None:
            return None
        parts = [f"calls: {t.calls}" + (f" ({t.cached} from the cache)" if t.cached else "")]
        if t.calls:
            more = "+?" if t.uncounted else ""  # some call's tokens are unknown: these are the known part
            parts.append(f"tokens {t.prompt_tokens:,}{more} in / {t.completion_tokens:,}{more} out"
                         + (f" ({t.uncounted} uncounted)" if t.uncounted else ""))
            parts.append("cost " + dollars(None if t.calls == t.unpriced else t.cost, t.unpriced))
            if t.answered:
                parts.append(f"mean latency {t.latency / t.answered:.2f} s")
            if t.retries:
                parts.append(f"{t.retries} {'retry' if t.retries == 1 else 'retries'}")
            if t.errors:
                parts.append(f"{t.errors} failed")
        return ", ".join(parts)


class RoundLog(Observer):
    """Rich mode prints one table per closed round; plain mode one line per event. Both print the
    notes a run makes about its backends, and the model calls of each match when it ends.

    Also usable directly as a match's event sink."""

    def __init__(self, console: Console | None = None, plain: bool | None = None):
        self.console = console or Console()
        self.plain = (not self.console.is_terminal) if plain is None else plain
        self.seats: dict[str, dict[str, str]] = {}
        self._calls = CallTally()
        self._failures: dict[tuple[str, int], dict[str, list[TurnFailed]]] = defaultdict(lambda: defaultdict(list))
        self._actions: dict[tuple[str, int], list[ActionTaken]] = defaultdict(list)
        self._notices: dict[tuple[str, int], list[str]] = defaultdict(list)

    def __call__(self, event: Event) -> None:
        self.event(event)

    def note(self, text: str) -> None:
        self.console.print(f"note: {text}", markup=False, highlight=False, soft_wrap=True)

    def event(self, event: Event) -> None:
        if isinstance(event, MatchStarted):
            self.seats[event.match] = {s.label: s.agent for s in event.seats}
        (self._plain if self.plain else self._rich)(event)
        if isinstance(event, (MatchEnded, MatchFailed, MatchInterrupted)):
            line = self._calls.pop_line(event.match)
            if line is not None:
                self._say(f"[{event.match}] {line}" if self.plain else Text(f"  {line}", style="dim"))

    def call(self, call: CallRecord) -> None:
        self._calls.add(call)

    def note(self, text: str) -> None:
        self._say(f"note: {text}" if self.plain else Text(f"note: {text}", style="yellow"))

    def _say(self, line: str | Text) -> None:
        self.console.print(line, markup=False, highlight=False, soft_wrap=True)

    def _who(self, match: str, seat: str) -> str:
        agent = self.seats.get(match, {}).get(seat)
        return f"{seat} ({agent})" if agent else seat

    # -- one line per event ----------------------------------------------------
    def _plain(self, event: Event) -> None:
        head = f"[{event.match}]"
        if isinstance(event, MatchStarted):
            seats = ", ".join(f"{s.label}={s.agent}" for s in event.seats)
            line = f"{head} start {event.game} seed={event.seed} seats: {seats}"
        elif isinstance(event, TurnFailed):
            line = f"{head} r{event.round} {self._who(event.match, event.seat)} {event.failure.upper()} attempt {event.attempt}: {event.reason} reply={_short(event.reply, 60)!r}"
        elif isinstance(event, ActionTaken):
            tag = " DEFAULT" if event.defaulted else ""
            action = _action(event.action)
            # a free-text move is its reply: said once; a parsed move beside the reply it was read from
            said = f"{_short(action, 200)}{tag}" if _same_text(action, event.reply) else f"{action}{tag} | {_short(event.reply, 200)}"
            line = f"{head} r{event.round} {self._who(event.match, event.seat)} -> {said}"
        elif isinstance(event, MessagePosted) and event.message.kind == "notice":
            to = ",".join(event.message.recipients)
            line = f"{head} r{event.message.round} Referee -> {to}: {' '.join(event.message.content.split())}"
        elif isinstance(event, MessagePosted) and event.message.kind == "verdict":
            line = f"{head} verdict: {' '.join(event.message.content.split())}"
        elif isinstance(event, RoundClosed):
            line = f"{head} round {event.round} closed"
        elif isinstance(event, MatchEnded):
            how = (" TRUNCATED: stopped at max_rounds before the game ended, left out of the results"
                   if event.status == "truncated" else "")
            line = f"{head} end after {event.rounds} rounds{how}: " + ", ".join(
                f"{self._who(event.match, s)}={v:g}" for s, v in event.payoffs.items()
            )
        elif isinstance(event, MatchFailed):
            line = f"{head} FAILED: {event.error.splitlines()[0]}"
        elif isinstance(event, MatchInterrupted):
            line = f"{head} INTERRUPTED (not scored; played again later): {event.error.splitlines()[0]}"
        else:
            return
        self._say(line)

    # -- a table per round -------------------------------------------------------
    def _rich(self, event: Event) -> None:
        if isinstance(event, MatchStarted):
            seats = ", ".join(f"{s.label} [dim]({s.agent})[/]" for s in event.seats)
            self.console.print(f"[bold cyan]▶ {event.match}[/] {event.game}, seed {event.seed}: {seats}")
        elif isinstance(event, TurnFailed):
            self._failures[(event.match, event.round)][event.seat].append(event)
        elif isinstance(event, ActionTaken):
            self._actions[(event.match, event.round)].append(event)
        elif isinstance(event, MessagePosted) and event.message.kind == "notice":
            self._notices[(event.match, event.message.round)].append(event.message.content)
        elif isinstance(event, RoundClosed):
            self._print_round(event.match, event.round)
        elif isinstance(event, MatchEnded):
            scores = Text(", ").join(Text.assemble(f"{s} ", (f"({self.seats.get(event.match, {}).get(s)})", "dim"), f" {v:g}")
                                     for s, v in event.payoffs.items())
            if event.status == "truncated":
                head = Text(f"■ {event.match} truncated", style="bold yellow")
                head.append(f" at max_rounds after {event.rounds} rounds (left out of the results): ", style="yellow")
            else:
                head = Text(f"■ {event.match}", style="bold green")
                head.append(f" ended after {event.rounds} rounds: ")
            self.console.print(head + scores)
        elif isinstance(event, MatchFailed):
            self.console.print(Text(f"✖ {event.match} failed: ", style="bold red") + Text(event.error.splitlines()[0]))
        elif isinstance(event, MatchInterrupted):
            self.console.print(Text(f"⏸ {event.match} interrupted (not scored; played again later): ", style="bold yellow")
                               + Text(event.error.splitlines()[0]))

    def _print_round(self, match: str, round: int) -> None:
        key = (match, round)
        table = Table(title=f"{match} · round {round}", title_justify="left", expand=False, show_lines=False)
        table.add_column("Seat")
        table.add_column("Agent", style="dim")
        table.add_column("Reply", overflow="fold", max_width=70)
        table.add_column("Action")
        table.add_column("Flags")
        failures = self._failures.pop(key, {})
        for action in self._actions.pop(key, []):
            counts = Counter(f.failure for f in failures.get(action.seat, []))
            flag_text = Text(", ".join(f"{kind} ×{n}" for kind, n in counts.items()), style="yellow")
            if action.defaulted:
                flag_text.append(" → default", style="bold red")
            agent = self.seats.get(match, {}).get(action.seat, "")
            table.add_row(action.seat, agent, Text(_short(action.reply, 140)), Text(_action(action.action)), flag_text)
        self.console.print(table)
        for notice in dict.fromkeys(self._notices.pop(key, [])):
            self.console.print(Text(f"  Referee: {notice}", style="italic"))

