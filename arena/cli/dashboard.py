"""The dashboard: progress, the latest messages and a running leaderboard, on one screen.

`Dashboard` is an observer of a run played in this process; `watch_run` feeds
the same dashboard from the run store of a run that another process is playing.

It must stay cheap on long runs: observer calls only update counters and a
short ring of messages (O(1) each, under a lock, since rich refreshes from its
own thread); everything is laid out only when the screen refreshes, four times
a second. The leaderboard keeps running sums; the bootstrap intervals are left
to the final results table.

The watcher may know which agent sits in which seat, so names are shown beside
seat labels here; they never reach a prompt.
"""

from __future__ import annotations

import json
import sqlite3
import threading
import time
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from pydantic import TypeAdapter
from rich import box
from rich.columns import Columns
from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.progress import BarColumn, MofNCompleteColumn, Progress, ProgressColumn, Task, TextColumn
from rich.table import Table
from rich.text import Text

from arena.contract.events import Event, MatchFailed, MatchStarted, MessagePosted, SeatInfo, TurnFailed
from arena.contract.records import MatchRecord
from arena.contract.messages import REFEREE, Message
from arena.run.runner import Observer
from arena.store import RunStore

FEED_SIZE = 8
"""Messages shown at once."""


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


class _RateColumn(ProgressColumn):
    def render(self, task: Task) -> Text:
        rate = task.fields.get("rate")
        return Text("—/s" if not rate else f"{rate:.1f}/s" if rate >= 1 else f"{rate * 60:.1f}/min", style="progress.data.speed")


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
    """A `rich.live.Live` view of a run; use it as a context manager around the run."""

    def __init__(self, console: Console, title: str, feed_size: int = FEED_SIZE):
        self.console = console
        self.title = title
        self._lock = threading.Lock()
        self._total = 0
        self._done = 0
        self._resumed = 0  # done before this view started looking: not counted in the rate
        self._failed = 0
        self._started = time.monotonic()
        self._stopped: float | None = None
        self._seats: dict[str, dict[str, str]] = {}
        self._feed: deque[_Line] = deque(maxlen=feed_size)
        self._board: dict[str, dict[tuple[str, str], list[float]]] = {}  # group -> (agent, role) -> [n, sum]
        self._board_matches: dict[str, int] = {}
        self._progress = Progress(
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
        self._task = self._progress.add_task("", total=None)
        self._live = Live(console=console, get_renderable=self._render, refresh_per_second=4, transient=False)

    # -- as a context manager ----------------------------------------------------
    def __enter__(self) -> "Dashboard":
        self._started, self._stopped = time.monotonic(), None
        self._progress.reset(self._task, total=self._total or None, completed=self._done)
        self._live.start(refresh=True)
        return self

    def __exit__(self, *exc) -> bool:
        self._stopped = time.monotonic()
        self._live.stop()
        return False

    def refresh(self) -> None:
        """Redraw now (the live view also redraws by itself, four times a second)."""
        self._live.refresh()

    # -- the observer ------------------------------------------------------------
    def planned(self, total: int) -> None:
        self._total = total

    def event(self, event: Event) -> None:
        if isinstance(event, MessagePosted):
            self.message(event.match, event.message)
        elif isinstance(event, MatchStarted):
            self.learn_seats(event.match, event.seats)
        elif isinstance(event, TurnFailed):
            text = f"{event.failure.upper()} (attempt {event.attempt}): {event.reason}"
            line = _Line(event.match, event.round, self._seats.get(event.match, {}), event.seat, (), text, "yellow")
            with self._lock:
                self._feed.append(line)
        elif isinstance(event, MatchFailed):
            line = _Line(event.match, None, {}, None, (), f"✖ failed: {_first_line(event.error)}", "bold red")
            with self._lock:
                self._feed.append(line)

    def finished(self, record: MatchRecord, resumed: bool) -> None:
        outcomes = ([(s.agent, s.role, record.payoffs[s.label]) for s in record.seats if s.label in record.payoffs]
                    if record.status == "finished" else [])
        self.tally(record.group, outcomes, failed=record.status != "finished", resumed=resumed)
        self._seats.pop(record.key, None)

    # -- feeding it directly (the store watcher) --------------------------------------
    def learn_seats(self, match: str, seats: Iterable[SeatInfo]) -> None:
        self._seats[match] = {s.label: s.agent for s in seats}

    def forget_seats(self, match: str) -> None:
        self._seats.pop(match, None)

    def message(self, match: str, message: Message) -> None:
        if message.kind == "rules":  # every match opens with the same rules: noise in a feed this short
            return
        line = _Line(match, message.round, self._seats.get(match, {}), message.sender, message.recipients, message.content)
        with self._lock:
            self._feed.append(line)

    def tally(self, group: str, outcomes: list[tuple[str, str, float]], failed: bool = False, resumed: bool = False) -> None:
        """A finished match: ``outcomes`` holds (agent, role, payoff) per seat; empty when it failed."""
        with self._lock:
            self._done += 1
            self._resumed += resumed
            self._failed += failed
            if outcomes:
                board = self._board.setdefault(group, {})
                for agent, role, payoff in outcomes:
                    cell = board.get((agent, role))
                    if cell is None:
                        board[(agent, role)] = [1, payoff]
                    else:
                        cell[0] += 1
                        cell[1] += payoff
                self._board_matches[group] = self._board_matches.get(group, 0) + 1

    def set_counts(self, done: int, failed: int) -> None:
        """Overrule the counts of done and failed matches (the store watcher knows them exactly)."""
        with self._lock:
            self._done, self._failed = done, failed

    # -- laying it out, at refresh time only ----------------------------------------------
    def _render(self) -> RenderableType:
        with self._lock:
            total, done, resumed, failed = self._total, self._done, self._resumed, self._failed
            feed = list(self._feed)
            board = {g: [(a, r, n, s / n) for (a, r), (n, s) in cells.items()] for g, cells in self._board.items()}
            board_matches = dict(self._board_matches)
        elapsed = (self._stopped or time.monotonic()) - self._started
        rate = (done - resumed) / elapsed if elapsed > 0 and done > resumed else None
        eta = (max(total, done) - done) / rate if rate else None
        notes = []
        if failed:
            notes.append(f"[red]{failed} failed[/]")
        if resumed:
            notes.append(f"{resumed} done before")
        self._progress.update(self._task, total=max(total, done) or None, completed=done, rate=rate, eta=eta, elapsed=elapsed,
                              description="".join(f"· {note} " for note in notes))
        parts: list[RenderableType] = [Text(self.title, style="bold"), self._progress.get_renderable()]
        parts.append(self._feed_table(feed))
        if board:
            parts.append(Columns([self._board_table(g, board[g], board_matches.get(g, 0)) for g in sorted(board)],
                                 padding=(0, 4)))
        return Group(*parts)

    def _feed_table(self, feed: list[_Line]) -> Table:
        width = self.console.width
        wide = width >= 100  # narrower screens leave out the recipients to keep room for what was said
        table = Table(box=None, show_header=False, padding=(0, 1), pad_edge=False, expand=True,
                      title="latest messages", title_justify="left", title_style="dim")
        key_width = max(12, min(32, width // 5))
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
_event = TypeAdapter(Event)
_ACTIVE = "running"


class _StoreReader:
    """Cheap incremental reads of a run store that another process writes.

    Each poll reads only rows added since the last one (by rowid), in one read
    transaction so that what it sees is consistent.
    """

    def __init__(self, store: RunStore):
        self.store = store
        self.db: sqlite3.Connection = store.db
        self.message_mark = 0
        self.event_mark = 0
        self.outcome_mark = 0
        self.failed_seen: set[str] = set()
        self.seats: dict[str, dict[str, str]] = {}

    def forget(self, match: str) -> None:
        """A match is over: its seats are no longer needed."""
        self.seats.pop(match, None)

    def wait_for_run(self, timeout: float = 10.0) -> dict:
        """The run row; a run that is just starting may not have written it yet."""
        deadline = time.monotonic() + timeout
        while True:
            try:
                info = self.store.run_info()
            except sqlite3.OperationalError:  # the schema is not there yet
                info = {}
            if info or time.monotonic() > deadline:
                return info
            time.sleep(0.05)

    def poll(self, first: bool = False):
        """What changed: (planned, counts, seats of newly seen matches, new messages, new turn and match
        failures, newly finished matches, newly failed matches)."""
        db = self.db
        db.execute("BEGIN")
        try:
            planned = db.execute("SELECT planned FROM run WHERE id = 1").fetchone()[0]
            counts = dict(db.execute("SELECT status, COUNT(*) FROM matches GROUP BY status").fetchall())
            if first:
                # The board counts every finished match; the feed starts with the last few messages of
                # the matches in play and goes on from there.
                messages = db.execute(
                    "SELECT m.rowid, m.match_key, m.idx, m.round, m.sender, m.recipients, m.kind, m.content "
                    "FROM messages m JOIN matches x ON x.key = m.match_key "
                    "WHERE x.status = 'running' AND m.kind != 'rules' ORDER BY m.rowid DESC LIMIT ?",
                    (FEED_SIZE,)).fetchall()[::-1]
                self.message_mark = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM messages").fetchone()[0]
                self.event_mark = db.execute("SELECT COALESCE(MAX(rowid), 0) FROM events").fetchone()[0]
            else:
                messages = db.execute(
                    "SELECT rowid, match_key, idx, round, sender, recipients, kind, content FROM messages "
                    "WHERE rowid > ? ORDER BY rowid", (self.message_mark,)).fetchall()
            events = db.execute(
                "SELECT rowid, match_key, body FROM events WHERE rowid > ? AND type IN ('turn_failed', 'match_failed') "
                "ORDER BY rowid", (self.event_mark,)).fetchall()
            self.event_mark = db.execute("SELECT COALESCE(MAX(rowid), ?) FROM events", (self.event_mark,)).fetchone()[0]
            outcomes = db.execute(
                "SELECT o.rowid, o.match_key, x.grp, o.seat, o.agent, o.role, o.payoff FROM outcomes o "
                "JOIN matches x ON x.key = o.match_key WHERE o.rowid > ? ORDER BY o.rowid",
                (self.outcome_mark,)).fetchall()
            failed = [
                (key, group, db.execute("SELECT error FROM matches WHERE key = ?", (key,)).fetchone()[0])
                for key, group in db.execute("SELECT key, grp FROM matches WHERE status = 'failed'").fetchall()
                if key not in self.failed_seen
            ]
            unknown = {key for _, key, *_ in messages if key not in self.seats}
            unknown |= {key for _, key, _ in events if key not in self.seats}
            new_seats = {}
            for key in unknown:
                row = db.execute("SELECT seats FROM matches WHERE key = ?", (key,)).fetchone()
                if row and row[0]:
                    new_seats[key] = [SeatInfo(**s) for s in json.loads(row[0])]
                    self.seats[key] = {s.label: s.agent for s in new_seats[key]}
        finally:
            db.execute("COMMIT")
        if messages:
            self.message_mark = max(self.message_mark, messages[-1][0])
        if outcomes:
            self.outcome_mark = outcomes[-1][0]
        new_messages = [
            (key, Message(index=idx, round=rnd, sender=sender, recipients=tuple(json.loads(rcpt)), kind=kind, content=content))
            for _, key, idx, rnd, sender, rcpt, kind, content in messages
        ]
        new_events = [_event.validate_json(body) for _, _, body in events]
        finished: dict[str, tuple[str, list[tuple[str, str, str, float]]]] = {}
        for _, key, group, seat, agent, role, payoff in outcomes:
            finished.setdefault(key, (group, []))[1].append((seat, agent, role, payoff))
        self.failed_seen.update(key for key, _, _ in failed)
        return planned, counts, new_seats, new_messages, new_events, finished, failed


def watch_run(run_dir: str | Path, console: Console, interval: float = 0.5, plain: bool = False) -> int:
    """Follow a run that another process is playing, from its store, until it stops; then print its results."""
    from arena.cli.tables import print_results

    run_dir = Path(run_dir)
    store = RunStore.open(run_dir)
    reader = _StoreReader(store)
    try:
        info = reader.wait_for_run()
        if not info:
            console.print(f"{run_dir} holds no run yet.")
            return 0
        name = info.get("name") or run_dir.name
        status = store.status()
        if status == _ACTIVE:
            if plain:
                _follow_plain(reader, store, console, name, run_dir, interval)
            else:
                _follow_live(reader, store, console, name, interval)
            status = store.status()
        counts, planned = store.counts(), store.run_info().get("planned", 0)
        console.print(
            f"Run {name} in {run_dir}: {status} — {counts.get('finished', 0)} finished, "
            f"{counts.get('failed', 0)} failed, of {planned} planned.", markup=False)
        records = store.records()
        if records:
            print_results(console, records, store)
        else:
            console.print("No finished matches yet.")
        return 0
    except KeyboardInterrupt:
        return 0
    finally:
        store.close()


def _still_running(store: RunStore) -> bool:

    return store.status() == _ACTIVE


def _follow_live(reader: _StoreReader, store: RunStore, console: Console, name: str, interval: float) -> None:
    view = Dashboard(console, title=f"{name} (watching {store.run_dir})")
    first = True
    with view:
        while True:
            running = _still_running(store)  # asked before the poll, so the last poll sees everything
            planned, counts, seats, messages, events, finished, failed = reader.poll(first)
            view.planned(planned)
            for key, seated in seats.items():
                view.learn_seats(key, seated)
            for event in events:
                view.event(event)
            for key, message in messages[-FEED_SIZE:]:
                view.message(key, message)
            for key, (group, outcomes) in finished.items():
                view.tally(group, [(a, r, p) for _, a, r, p in outcomes], resumed=first)
                view.forget_seats(key)
                reader.forget(key)
            for key, group, _ in failed:
                view.tally(group, [], failed=True, resumed=first)
                view.forget_seats(key)
                reader.forget(key)
            # a failed match that a resumed run plays again leaves 'failed': the store's counts are the truth
            view.set_counts(counts.get("finished", 0) + counts.get("failed", 0), counts.get("failed", 0))
            first = False
            if not running:
                view.refresh()
                return
            time.sleep(interval)


def _follow_plain(reader: _StoreReader, store: RunStore, console: Console, name: str, run_dir: Path, interval: float) -> None:
    def say(line: str, style: str | None = None) -> None:
        console.print(line, markup=False, highlight=False, soft_wrap=True, style=style)

    first = True
    while True:
        running = _still_running(store)
        planned, counts, _, messages, events, finished, failed = reader.poll(first)
        if first:
            done = counts.get("finished", 0) + counts.get("failed", 0)
            say(f"Watching {name} in {run_dir}: {done} of {planned} matches done so far.")
        first_poll, first = first, False
        for key, message in messages:
            if message.kind == "rules":
                continue
            seats = reader.seats.get(key, {})
            to = _recipients(seats, message.sender, message.recipients)
            sender = message.sender if message.sender == REFEREE else _who(seats, message.sender)
            say(f"[{key}] r{message.round} {sender} -> {to}: {_one_line(message.content, 160)}")
        for event in events:
            seats = reader.seats.get(event.match, {})
            if isinstance(event, TurnFailed):
                say(f"[{event.match}] r{event.round} {_who(seats, event.seat)} {event.failure.upper()} "
                    f"attempt {event.attempt}: {event.reason}")
        if not first_poll:
            for key, (group, outcomes) in finished.items():
                scores = ", ".join(f"{_who({s: a}, s)}={p:g}" for s, a, _, p in outcomes)
                say(f"[{key}] finished: {scores}")
            for key, group, error in failed:
                say(f"[{key}] FAILED: {_first_line(error)}")
        for key in list(finished) + [k for k, _, _ in failed]:
            reader.forget(key)
        if not running:
            return
        time.sleep(interval)
