"""The dashboard: progress, model calls, running matches, the latest messages and a running
leaderboard, on one screen.

`Dashboard` is an observer of a run played in this process; `watch_run` feeds the same
dashboard from the run store of a run that another process is playing. Both feed one
`RunProgress` with the same facts stamped with the same clock (see arena.results.progress), so
`arena run` and `arena watch` show the same figures, rate and ETA.

It must stay cheap on long runs: observer calls only update counters and a short ring of
messages (O(1) each, under a lock, since rich refreshes from its own thread); everything is laid
out only when the screen refreshes, four times a second. The leaderboard keeps running sums; the
bootstrap intervals are left to the final results table.

The watcher may know which agent sits in which seat, so names are shown beside seat labels
here; they never reach a prompt.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich import box
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Table
from rich.text import Text

from arena.cli.live import CallTally
from arena.contract import terminal
from arena.contract.calls import CallRecord, CallStarted
from arena.contract.events import (
    Event, MatchEnded, MatchFailed, MatchInterrupted, MatchStarted, MessagePosted, RoundClosed, TurnFailed,
)
from arena.contract.messages import REFEREE, Message
from arena.contract.records import MatchRecord, MatchSpec
from arena.results.progress import RunProgress, Snapshot, rounds_needed
from arena.results.usage import dollars
from arena.run.runner import Observer
from arena.contract.runs import MatchRow, RunReader, open_run
from arena.store.follower import Changes, Follower, Note
from arena.store.settle import settle

FEED_SIZE = 8
"""Messages shown at once."""

RUNNING_SHOWN = 6
"""Running matches listed at once; the others are counted."""

FEED_SKIPS = ("rules", "prompt")
"""Kinds of message left out of the feed: every match opens with the same rules, and a prompt
says again what the running matches table already shows (who is being asked)."""

Specs = Callable[[str], MatchSpec | None]
"""Finds a match's specification by its key (its game and params say how many rounds it can take)."""


def _one_line(text: str | None, width: int = 200) -> str:
    if not text:
        return ""
    flat = " ".join(text[: width * 4].split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def _clock(seconds: float | None) -> str:
    if seconds is None:
        return "-:--:--"
    seconds = int(round(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _rate(per_second: float | None) -> str:
    if not per_second:
        return "—/s"
    return f"{per_second:.1f}/s" if per_second >= 1 else f"{per_second * 60:.1f}/min"


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(_rate(task.fields.get("rate")), style="progress.data.speed")


class _ElapsedColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        return Text(_clock(task.fields.get("elapsed")), style="progress.elapsed")


class _EtaColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        if task.total is not None and task.completed >= task.total:
            return Text("done", style="progress.remaining")
        return Text(f"ETA {_clock(task.fields.get('eta'))}", style="progress.remaining")


@dataclass(slots=True)
class _Line:
    """One entry of the message feed, kept raw: it is laid out only if it is still shown at a refresh."""

    match: str
    round: int | None
    seats: dict[str, str]  # label -> agent of the match, as known when the line arrived
    sender: str | None = None
    recipients: tuple[str, ...] = ()
    content: str = ""
    style: str = ""


class Dashboard(Observer):
    """A `rich.live.Live` view of a run; use it as a context manager around the run.

    ``specs`` finds a match's specification by key, for "turn k of n" (without it: "turn k");
    ``clock`` stamps the facts the observer callbacks bring (the store's clock, ``time.time``)."""

    def __init__(self, console: Console, title: str, feed_size: int = FEED_SIZE, specs: Specs | None = None,
                 clock: Callable[[], float] = time.time, private: bool = False):
        self.console = console
        # A person plays in the run and reads this screen between turns: what the seats said, who sits
        # where and the running scores stay off it, as they are kept from a model; progress and calls show.
        self.private = private
        self.title = title
        self.specs = specs
        self.clock = clock
        self._lock = threading.Lock()
        self.progress = RunProgress()
        self._stopped: float | None = None
        self._seats: dict[str, dict[str, str]] = {}
        self._feed: deque[_Line] = deque(maxlen=feed_size)
        self._board: dict[str, dict[tuple[str, str], list[float]]] = {}  # group -> (agent, role) -> [n, sum]
        self._board_matches: dict[str, int] = {}
        self._bar = Progress(
            TextColumn("[bold]matches"),
            BarColumn(bar_width=None),
            MofNCompleteColumn(),
            _RateColumn(),
            _ElapsedColumn(),
            _EtaColumn(),
            TextColumn("{task.description}"),
            console=console,
            auto_refresh=False,
            expand=True,
        )
        self._task = self._bar.add_task("", total=None)
        self._live = self._new_live()

    # -- as a context manager ----------------------------------------------------
    def __enter__(self) -> "Dashboard":
        self._stopped = None
        self._live.start(refresh=True)
        self._lent = contextlib.ExitStack()  # while a person is asked at the terminal, the view steps aside
        self._lent.enter_context(terminal.hold_screen(self._step_aside, self._come_back))
        return self

    def __exit__(self, *exc) -> bool:
        self._lent.close()
        self._stopped = self.clock()
        self._live.stop()
        return False

    def _step_aside(self) -> None:
        """Clear the view off the screen and stop refreshing it, for a person to read and type."""
        self._live.transient = True
        self._live.stop()

    def _come_back(self) -> None:
        """Draw the view again below what the person read and typed. A new live view, as the old one
        would first move up over as many lines as it last drew, and overwrite them."""
        self._live = self._new_live()
        self._live.start(refresh=True)

    def _new_live(self) -> Live:
        return Live(console=self.console, get_renderable=self.render, refresh_per_second=4, transient=False)

    def refresh(self) -> None:
        """Redraw now (the live view also redraws by itself, four times a second)."""
        self._live.refresh()

    # -- the observer (a run in this process) ----------------------------------------
    def planned(self, total: int) -> None:
        with self._lock:
            self.progress.planned(total)

    def event(self, event: Event) -> None:
        self.take(event, self.clock())

    def finished(self, record: MatchRecord | MatchRow, resumed: bool) -> None:
        at = self.clock()
        outcomes = ([(s.agent, s.role, record.payoffs[s.label]) for s in record.seats if s.label in record.payoffs]
                    if record.status == "finished" else [])
        with self._lock:
            self.progress.match_done(record.key, record.status, None if resumed else at)
            self._seats.pop(record.key, None)
        self.tally(record.group, outcomes)

    def call_started(self, call: CallStarted) -> None:
        at = self.clock()
        with self._lock:
            self.progress.call_started(call, at)

    def call(self, call: CallRecord) -> None:
        at = self.clock()
        with self._lock:
            self.progress.call_ended(call, at)

    def note(self, text: str) -> None:
        at = self.clock()
        with self._lock:
            self.progress.note(text, at)

    # -- what both feeds bring ---------------------------------------------------------
    def take(self, event: Event, at: float) -> None:
        """One event of a match, that happened at ``at``."""
        line = None
        if isinstance(event, MessagePosted):
            self.message(event.match, event.message)
        elif isinstance(event, MatchStarted):
            seats = {s.label: s.agent for s in event.seats}
            rounds = self._rounds(event.match, len(seats))
            with self._lock:
                self._seats[event.match] = seats
                self.progress.match_started(event.match, seats, rounds, at)
        elif isinstance(event, RoundClosed):
            with self._lock:
                self.progress.round_closed(event.match, event.round, at)
        elif isinstance(event, TurnFailed):
            text = f"{event.failure.upper()} (attempt {event.attempt}): {event.reason}"
            line = _Line(event.match, event.round, self._seats.get(event.match, {}), event.seat, (), text, "yellow")
            with self._lock:
                self.progress.turn_failed(event.match, event.seat, event.round, event.attempt, event.failure, at)
        elif isinstance(event, MatchEnded):
            if event.status == "truncated":
                line = _Line(event.match, event.rounds, {}, None, (),
                             f"■ truncated: stopped at max_rounds after {event.rounds} rounds", "yellow")
            with self._lock:
                self.progress.match_done(event.match, event.status, at)
        elif isinstance(event, MatchFailed):
            line = _Line(event.match, None, {}, None, (), f"✖ failed: {_first_line(event.error)}", "bold red")
            with self._lock:
                self.progress.match_done(event.match, "failed", at)
        elif isinstance(event, MatchInterrupted):
            line = _Line(event.match, None, {}, None, (), f"⏸ interrupted: {_first_line(event.error)}", "yellow")
            with self._lock:
                self.progress.match_done(event.match, "interrupted", at)
        if line is not None:
            with self._lock:
                self._feed.append(line)

    def message(self, match: str, message: Message) -> None:
        if message.kind in FEED_SKIPS:
            return
        line = _Line(match, message.round, self._seats.get(match, {}), message.sender, message.recipients, message.content)
        with self._lock:
            self._feed.append(line)

    def tally(self, group: str, outcomes: list[tuple[str, str, float]]) -> None:
        """A scored match for the leaderboard: ``outcomes`` holds (agent, role, payoff) per seat."""
        if not outcomes:
            return
        with self._lock:
            board = self._board.setdefault(group, {})
            for agent, role, payoff in outcomes:
                cell = board.get((agent, role))
                if cell is None:
                    board[(agent, role)] = [1, payoff]
                else:
                    cell[0] += 1
                    cell[1] += payoff
            self._board_matches[group] = self._board_matches.get(group, 0) + 1

    def follow(self, changes: Changes, now: float) -> None:
        """What a poll of the run store found (`arena watch`)."""
        with self._lock:
            self.progress.planned(changes.planned)
        for at, fact in changes.facts:
            if isinstance(fact, CallRecord):
                with self._lock:
                    self.progress.call_ended(fact, at)
            elif isinstance(fact, CallStarted):
                with self._lock:
                    self.progress.call_started(fact, at)
            elif isinstance(fact, Note):
                with self._lock:
                    self.progress.note(fact.text, at)
            else:
                self.take(fact, at)
        for key, message in changes.messages[-(self._feed.maxlen or 0):]:
            self.message(key, message)
        for _, fact in changes.facts:  # their last messages are in the feed: their seats are no longer needed
            if isinstance(fact, (MatchEnded, MatchFailed, MatchInterrupted)):
                self._seats.pop(fact.match, None)
        with self._lock:
            for token in changes.gone:
                self.progress.call_gone(token)
            # a match the store no longer has running, with no end among the events (cut short, or wiped
            # by a resume to be played again), is not running any more
            for key in self.progress.running_keys() - changes.running:
                self.progress.match_done(key, "left", now)
        for group, outcomes in changes.outcomes.values():
            self.tally(group, [(o.agent, o.role, o.payoff) for o in outcomes])

    def session(self, started: float) -> None:
        """Show the session of the run that began at ``started``: its clock and notes, not an earlier one's."""
        with self._lock:
            self.progress.session(started)

    def catch_up(self, run_dir: str | Path) -> None:
        """Start from what earlier sessions of a resumed run left in its store (their calls, spend and
        finished matches), as `arena watch` would see it; nothing of theirs is running any more."""
        store = open_run(run_dir)
        try:
            now = time.time()
            sessions = store.sessions()  # this one's included: `arena run` records it before it plays
            self.session(sessions[-1]["started"] if sessions else now)
            changes = Follower(store, first_messages=0, skip_kinds=FEED_SKIPS).poll()
            changes.running = set()
            changes.outcomes = {}  # the runner hands over each earlier match for the leaderboard itself
            self.follow(changes, now)
        finally:
            store.close()

    def snapshot(self, now: float | None = None) -> Snapshot:
        with self._lock:
            return self.progress.snapshot((self._stopped or self.clock()) if now is None else now)

    def _rounds(self, key: str, n_seats: int) -> int | None:
        spec = self.specs(key) if self.specs else None
        if spec is None:
            return None
        return rounds_needed(spec.game, spec.params, n_seats, spec.settings.max_rounds)

    # -- laying it out, at refresh time only ----------------------------------------------
    def render(self) -> RenderableType:
        """The screen as it stands (what the live view draws at each refresh)."""
        snap = self.snapshot()
        with self._lock:
            feed = list(self._feed)
            board = {g: [(a, r, n, s / n) for (a, r), (n, s) in cells.items()] for g, cells in self._board.items()}
            board_matches = dict(self._board_matches)
        said = []
        if snap.failed:
            said.append(f"[red]{snap.failed} failed[/]")
        if snap.truncated:
            said.append(f"[yellow]{snap.truncated} truncated[/]")
        if snap.interrupted:
            said.append(f"[yellow]{snap.interrupted} interrupted[/]")
        if snap.resumed:
            said.append(f"{snap.resumed} done before")
        self._bar.update(self._task, total=snap.planned or None, completed=snap.done, rate=snap.match_rate,
                         eta=snap.eta, elapsed=snap.elapsed, description="".join(f"· {s} " for s in said))
        parts: list[RenderableType] = [Text(self.title, style="bold"), self._bar.get_renderable()]
        if snap.calls or snap.cached or snap.flights:
            parts.append(self._calls_line(snap))
        if self.private:
            return Group(*parts)
        if any(f.calls or f.cached or f.in_flight or f.invalid or f.timeouts for f in snap.agents.values()):
            parts.append(self._agents_table(snap))
        if snap.running:
            parts.append(self._running_table(snap))
        parts.append(self._feed_table(feed))
        if snap.notes:
            parts.append(Group(*(Text(f"note: {note}", style="yellow", no_wrap=True, overflow="ellipsis")
                                 for note in snap.notes)))
        if board:
            parts.append(Columns([self._board_table(g, board[g], board_matches.get(g, 0)) for g in sorted(board)],
                                 padding=(0, 4)))
        return Group(*parts)

    @staticmethod
    def _calls_line(snap: Snapshot) -> Text:
        text = f"calls {snap.calls} done · {snap.in_flight} in flight · {_rate(snap.call_rate)}"
        if snap.cached:
            text += f" · {snap.cached} from the cache"
        if snap.calls_per_match is not None:
            text += f" · {snap.calls_per_match:.1f} per match"
        if snap.eta_from == "calls" and snap.done < snap.planned:
            text += f" · ETA from calls {_clock(snap.eta)}"
        return Text(text, style="cyan")

    @staticmethod
    def _agents_table(snap: Snapshot) -> Table:
        table = Table(box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), pad_edge=False,
                      title="model calls", title_justify="left", title_style="dim")
        for name, justify in (("Agent", "left"), ("Calls", "right"), ("In flight", "right"), ("Tokens in", "right"),
                              ("Tokens out", "right"), ("Spend", "right"), ("Latency", "right"), ("Retries", "right"),
                              ("Invalid", "right"), ("Timeouts", "right"), ("Cached", "right")):
            table.add_column(name, justify=justify, no_wrap=True)
        for agent, f in snap.agents.items():
            if not (f.calls or f.cached or f.in_flight or f.invalid or f.timeouts):
                continue
            spend = dollars(None if f.calls == f.unpriced else f.spend, f.unpriced)
            latency = "—" if f.mean_latency is None else f"{f.mean_latency:.2f} s"
            errors = f" ({f.errors} failed)" if f.errors else ""
            more = "+?" if f.uncounted else ""  # the known part of a count some call left unknown
            table.add_row(Text(agent), f"{f.calls}{errors}", str(f.in_flight), f"{f.prompt_tokens:,}{more}",
                          f"{f.completion_tokens:,}{more}", spend, latency, str(f.retries), str(f.invalid), str(f.timeouts),
                          str(f.cached))
        return table

    def _running_table(self, snap: Snapshot) -> Table:
        width = self.console.width
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True,
                      title="running", title_justify="left", title_style="dim")
        key_width = _key_width(width)
        table.add_column("match", style="cyan", no_wrap=True, overflow="ellipsis", max_width=key_width)
        table.add_column("turn", no_wrap=True)
        table.add_column("waiting for", no_wrap=True, overflow="ellipsis", ratio=1)
        flights: dict[str, list] = {}
        for flight in snap.flights:
            flights.setdefault(flight.match, []).append(flight)
        for match in snap.running[:RUNNING_SHOWN]:
            waiting = ", ".join(
                f"{_who(match.seats, f.seat) if f.seat in match.seats else f'{f.seat} ({f.agent})'} "
                f"{max(0.0, snap.now - f.started):.0f} s" for f in flights.get(match.key, []))
            table.add_row(Text(_short_key(match.key, key_width)), match.turn, Text(waiting and f"model call: {waiting}"))
        if len(snap.running) > RUNNING_SHOWN:
            table.add_row(Text(f"… and {len(snap.running) - RUNNING_SHOWN} more", style="dim"), "", "")
        return table

    def _feed_table(self, feed: list[_Line]) -> Table:
        width = self.console.width
        wide = width >= 100  # narrower screens leave out the recipients to keep room for what was said
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True,
                      title="latest messages", title_justify="left", title_style="dim")
        key_width = _key_width(width)
        table.add_column("match", style="cyan", no_wrap=True, overflow="ellipsis", max_width=key_width)
        table.add_column("round", style="dim", no_wrap=True)
        table.add_column("from", no_wrap=True, overflow="ellipsis", max_width=max(12, width // 4))
        if wide:
            table.add_column("to", style="dim", no_wrap=True, overflow="ellipsis", max_width=max(10, width // 8))
        table.add_column("content", no_wrap=True, overflow="ellipsis", ratio=1)
        for line in feed:
            # Text, not markup: keys and agent names come from the scenario and may hold brackets
            cells = [Text(_short_key(line.match, key_width)), "" if line.round is None else f"r{line.round}",
                     Text(_who(line.seats, line.sender) if line.sender else "")]
            if wide:
                cells.append(Text(f"→ {_recipients(line.seats, line.sender, line.recipients)}" if line.sender else ""))
            table.add_row(*cells, Text(_one_line(line.content), style=line.style))
        for _ in range(len(feed), self._feed.maxlen or 0):
            table.add_row()  # a steady height: the screen does not jump as the feed fills
        return table

    @staticmethod
    def _board_table(group: str, rows: list[tuple[str, str, int, float]], matches: int) -> Table:
        by_role = len({r for _, r, _, _ in rows}) > 1
        title = f"{group} · {matches} matches"
        table = Table(title=Text(title, style="bold"), title_justify="left", min_width=len(title),
                      box=box.SIMPLE_HEAD, show_edge=False, padding=(0, 1), pad_edge=False)
        table.add_column("Agent")
        if by_role:
            table.add_column("Role")
        table.add_column("Matches", justify="right")
        table.add_column("Mean", justify="right")
        rows.sort(key=lambda r: (r[1], -r[3], r[0]) if by_role else (-r[3], r[0]))
        for agent, role, n, mean in rows:
            table.add_row(Text(agent), *([Text(role)] if by_role else []), str(n), f"{mean:.2f}")
        return table


def _key_width(width: int) -> int:
    """The match column's width on a screen ``width`` wide: a fifth of a narrow screen, and on a wide one
    everything beyond what the other columns need (96), so that long keys are shown whole where they fit."""
    return max(12, width // 5, width - 96)


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0] if (text or "").strip() else ""


def _short_key(key: str, width: int) -> str:
    """A match key cut to ``width``, keeping some of what follows the entry's name (repeat, players)."""
    if len(key) <= width:
        return key
    head, sep, tail = key.partition("#")
    if not sep:
        return key[: width - 1] + "…"
    tail = sep + tail
    room = max(width // 3, width - len(tail))
    head = head if len(head) <= room else head[: room - 1] + "…"
    tail = tail if len(head) + len(tail) <= width else tail[: width - len(head) - 1] + "…"
    return head + tail


def _who(seats: dict[str, str], seat: str) -> str:
    agent = seats.get(seat)
    return f"{seat} ({agent})" if agent else seat


def _recipients(seats: dict[str, str], sender: str | None, recipients: tuple[str, ...]) -> str:
    if not recipients:  # a reply no other seat hears: only the referee reads it
        return "referee only"
    others = [s for s in seats if s != sender]
    if others and sorted(recipients) == sorted(others):
        return "all"
    return ", ".join(recipients)


# -- following a run from its store ---------------------------------------------------------
_ACTIVE = "running"


def watch_run(run_dir: str | Path, console: Console, interval: float = 0.5, plain: bool = False) -> int:
    """Follow a run that another process is playing, from its store, until it stops; then print its results."""
    from arena.cli.tables import print_results

    run_dir = Path(run_dir)
    store = open_run(run_dir)
    follower = Follower(store, first_messages=FEED_SIZE, skip_kinds=FEED_SKIPS)
    try:
        info = follower.wait_for_run()
        if not info:
            console.print(f"{run_dir} holds no run yet.")
            return 0
        name = info.get("name") or run_dir.name
        status = store.status()
        if status == _ACTIVE:
            if plain:
                _follow_plain(follower, store, console, name, run_dir, interval)
            else:
                _follow_live(follower, store, console, name, interval)
            status = store.status()
        counts, planned = store.counts(), store.run_info().get("planned", 0)
        also = "".join(f", {counts[s]} {s}" for s in ("truncated", "interrupted") if counts.get(s))
        console.print(
            f"Run {name} in {run_dir}: {status} — {counts.get('finished', 0)} finished, "
            f"{counts.get('failed', 0)} failed{also}, of {planned} planned.", markup=False)
        if counts.get("finished"):
            print_results(console, store)
        else:
            console.print("No finished matches yet.")
    except KeyboardInterrupt:  # stopped watching: the run goes on in its own process
        return 130
    finally:
        store.close()
    # attached when the run ended, this watcher kept its writer from leaving WAL mode: it does it (see settle)
    settle(run_dir)
    return 0


def _follow_live(follower: Follower, store: RunReader, console: Console, name: str, interval: float) -> None:
    view = Dashboard(console, title=f"{name} (watching {store.run_dir})", specs=store.spec)
    sessions = store.sessions()
    if sessions:  # a resumed run: the clock and notes of the session being played, as its own dashboard shows
        view.session(sessions[-1]["started"])
    with view:
        while True:
            running = store.status() == _ACTIVE  # asked before the poll, so the last poll sees everything
            view.follow(follower.poll(), time.time())
            if not running:
                view.refresh()
                return
            time.sleep(interval)


def _follow_plain(follower: Follower, store: RunReader, console: Console, name: str, run_dir: Path, interval: float) -> None:
    """One line per new message, note, call in flight, failed turn and match end; the first look
    says how far the run is and what is in flight, not its history."""
    def say(line: str) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True)

    seats: dict[str, dict[str, str]] = {}
    tally = CallTally()
    first = True
    while True:
        running = store.status() == _ACTIVE
        changes = follower.poll()
        if first and running and not changes.planned and not changes.facts and not changes.messages:
            time.sleep(interval)  # the run is still making its plan: say how far it is once there is one
            continue
        if first:
            done = sum(n for status, n in store.counts().items() if status in ("finished", "truncated", "failed"))
            say(f"Watching {name} in {run_dir}: {done} of {changes.planned} matches done so far.")
        for _, fact in changes.facts:
            if isinstance(fact, MatchStarted):
                seats[fact.match] = {s.label: s.agent for s in fact.seats}
        # the messages of rounds that closed, then what happened since: calls asked for the next round, ends
        for key, message in changes.messages:
            match_seats = seats.get(key, {})
            to = _recipients(match_seats, message.sender, message.recipients)
            sender = message.sender if message.sender == REFEREE else _who(match_seats, message.sender)
            say(f"[{key}] r{message.round} {sender} -> {to}: {_one_line(message.content, 160)}")
        ended: list[MatchEnded | MatchFailed | MatchInterrupted] = []
        for _, fact in changes.facts:
            if isinstance(fact, Note):
                say(f"note: {fact.text}")
            elif isinstance(fact, CallRecord):
                tally.add(fact)
            elif isinstance(fact, CallStarted) and fact.match in changes.running:
                say(f"[{fact.match}] r{fact.round} {_who(seats.get(fact.match, {}), fact.seat)} is asked: model call in flight")
            elif isinstance(fact, TurnFailed) and not first:
                say(f"[{fact.match}] r{fact.round} {_who(seats.get(fact.match, {}), fact.seat)} {fact.failure.upper()} "
                    f"attempt {fact.attempt}: {fact.reason}")
            elif isinstance(fact, (MatchEnded, MatchFailed, MatchInterrupted)):
                ended.append(fact)
        for end in ended:
            calls = tally.pop_line(end.match)
            seats_of = seats.pop(end.match, None) or {}
            if first:  # finished before we looked
                continue
            if isinstance(end, MatchFailed):
                say(f"[{end.match}] FAILED: {_first_line(end.error)}")
            elif isinstance(end, MatchInterrupted):
                say(f"[{end.match}] INTERRUPTED (to be played again): {_first_line(end.error)}")
            elif end.status == "truncated":
                say(f"[{end.match}] TRUNCATED at max_rounds after {end.rounds} rounds (left out of the results): "
                    + ", ".join(f"{_who(seats_of, s)}={v:g}" for s, v in end.payoffs.items()))
            else:
                outcomes = changes.outcomes.get(end.match, ("", []))[1]
                say(f"[{end.match}] finished: " + ", ".join(f"{_who({o.seat: o.agent}, o.seat)}={o.payoff:g}" for o in outcomes))
            if calls is not None:
                say(f"[{end.match}] {calls}")
        first = False
        if not running:
            return
        time.sleep(interval)
