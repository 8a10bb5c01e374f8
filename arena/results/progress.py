"""How far a run has got: one model of progress, fed the same facts by the runner's dashboard
(its observer callbacks) and by `arena watch` (the rows of the run store).

Every fact comes with its time on the wall clock: the runner stamps a callback when it arrives,
the watcher takes the time the store wrote beside the row. Both clocks are ``time.time()`` taken
a moment apart, so the two views compute the same rate and ETA from the same formulas.

Rates look at a recent window only: a run that stalls shows its rate falling, and a watcher that
starts late sees the same rate as the runner, since both read the same timestamps. A span of work
(a call from its start to its end, a match from its start to its end) counts in the window when
it ended inside it; the window starts at the earliest start among those spans, or ``window``
seconds ago, whichever is later:

    rate = spans ended in the window / (now - window start)

The ETA, when the run calls models: the calls still to come divided by the recent call rate, the
calls still to come being ``mean calls per finished match`` for every match not yet started plus
what each running match has still to make of that mean. Before any match has finished, a running
match's calls so far are scaled by its rounds (``calls × n / rounds closed``). A run that calls no
model (scripted agents, or every reply from the cache) gets its ETA from the match rate instead.

Memory stays small: per agent a row of figures, per running match a few numbers, per match that
was played its key (to tell a replay from a first play), and the spans inside the window.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, replace

from arena.contract import plugins
from arena.contract.calls import CallRecord, CallStarted
from arena.contract.errors import ArenaError

WINDOW = 120.0
"""Seconds of recent work the rates are measured over."""

NOTES_KEPT = 5
"""Most recent distinct notes kept for the screen."""


def rounds_needed(game: str, params: Mapping, n_seats: int, max_rounds: int | None = None) -> int | None:
    """The most rounds a match can take (``n`` of "turn k of n"), or None when its game does not say."""
    try:
        cls = plugins.load("game", game)
        n = cls.rounds_needed(cls.Params.model_validate(dict(params)), n_seats)
    except (ArenaError, ValueError):  # an unknown game or bad params: the match itself will say so
        return None
    if n is None:
        return None
    return min(n, max_rounds) if max_rounds else n


@dataclass(slots=True)
class AgentFigures:
    """What one agent's model calls came to."""

    calls: int = 0  # requests that ended, answered or not; cache hits are not requests
    in_flight: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    spend: float = 0.0
    unpriced: int = 0  # calls whose cost is unknown (no price for the model, or unknown tokens)
    uncounted: int = 0  # calls whose tokens are unknown (cut off, or answered without usage)
    cached: int = 0  # replies the cache gave instead of a request
    cached_tokens: int = 0  # tokens those replies took when they were first paid for
    answered: int = 0
    latency: float = 0.0  # seconds, summed over answered calls
    retries: int = 0
    errors: int = 0  # calls that ended without an answer, after their retries
    invalid: int = 0  # turns whose reply the game rejected
    timeouts: int = 0  # turns with no reply in time

    @property
    def mean_latency(self) -> float | None:
        return self.latency / self.answered if self.answered else None


@dataclass(frozen=True, slots=True)
class Flight:
    """A call on its way."""

    token: str
    match: str
    seat: str
    round: int
    attempt: int
    agent: str
    started: float


@dataclass(slots=True)
class RunningMatch:
    key: str
    seats: dict[str, str]  # label -> agent
    rounds: int | None  # the most rounds it can take; None when the game does not say
    started: float
    closed: int = 0  # rounds closed so far
    calls: int = 0  # model calls it made so far

    @property
    def round(self) -> int:
        """The round being played (past the last, while it is scored)."""
        return self.closed + 1

    @property
    def turn(self) -> str:
        """'turn k of n', 'turn k', or 'scoring' once every round is played."""
        if self.rounds is None:
            return f"turn {self.round}"
        if self.round > self.rounds:
            return "scoring"
        return f"turn {self.round} of {self.rounds}"


@dataclass(frozen=True)
class Snapshot:
    """The figures at one moment; what a view draws."""

    now: float
    planned: int
    done: int
    failed: int
    resumed: int  # done by an earlier run, not played here
    running: list[RunningMatch]
    flights: list[Flight]
    agents: dict[str, AgentFigures]
    calls: int  # model requests that ended
    cached: int
    match_rate: float | None  # matches per second
    call_rate: float | None  # requests per second
    eta: float | None  # seconds
    eta_from: str  # "calls" or "matches"
    calls_per_match: float | None
    elapsed: float | None  # since the first match played here started
    notes: list[str]
    truncated: int = 0  # done, but stopped at max_rounds before the game ended: left out of the results
    interrupted: int = 0  # cut short by a backend that was down, not yet played again: neither done nor running

    @property
    def in_flight(self) -> int:
        return len(self.flights)

    @property
    def finished(self) -> bool:
        return self.planned > 0 and self.done >= self.planned and not self.running


def recent_rate(spans: deque[tuple[float, float]], now: float, window: float = WINDOW) -> float | None:
    """Spans (start, end) ended within ``window`` seconds of ``now``, per second (see the module's doc).
    Spans older than the window are dropped from the deque, which is kept in order of ending."""
    while spans and spans[0][1] <= now - window:
        spans.popleft()
    if not spans:
        return None
    start = max(now - window, min(s for s, _ in spans))
    return len(spans) / (now - start) if now > start else None


class RunProgress:
    """Progress of one run; feed it facts with their times, ask ``snapshot(now)``. ``now`` must not go back."""

    def __init__(self, window: float = WINDOW):
        self.window = window
        self._planned = 0
        self._done: dict[str, str] = {}  # key -> "finished" | "truncated" | "failed"
        self._failed = 0
        self._truncated = 0
        self._interrupted: set[str] = set()  # keys whose last attempt a backend outage cut short
        self._resumed: set[str] = set()
        self._played: dict[str, int] = {}  # done keys seen played here -> their model calls
        self._running: dict[str, RunningMatch] = {}
        self._flights: dict[str, Flight] = {}
        self._agents: dict[str, AgentFigures] = {}
        self._call_spans: deque[tuple[float, float]] = deque()
        self._match_spans: deque[tuple[float, float]] = deque()
        self._calls = 0
        self._cached = 0
        self._done_calls = 0  # sum of _played's calls
        self._first: float | None = None
        self._notes: dict[str, None] = {}  # insertion-ordered set: a note is said once
        self._since: float | None = None  # when this session of the run began (see session)

    # -- facts ---------------------------------------------------------------------
    def session(self, started: float) -> None:
        """The session shown began at ``started`` (a resumed run: this `arena run` on it). What earlier
        sessions did still counts in the totals (matches done, calls, tokens, spend); the clock, the rates
        and the notes are this session's. Give it before the facts."""
        self._since = started

    def _earlier(self, at: float) -> bool:
        return self._since is not None and at < self._since

    def planned(self, total: int) -> None:
        self._planned = total

    def match_started(self, key: str, seats: Mapping[str, str], rounds: int | None, at: float) -> None:
        """A match begins (again, when a resume replays it)."""
        if key in self._done:
            self._undo(key)
        self._interrupted.discard(key)  # played again
        for token in [t for t, f in self._flights.items() if f.match == key]:  # left by an attempt that crashed
            self._drop_flight(token)
        self._running[key] = RunningMatch(key, dict(seats), rounds, at)
        if not self._earlier(at) and (self._first is None or at < self._first):
            self._first = at

    def round_closed(self, key: str, round: int, at: float) -> None:
        match = self._running.get(key)
        if match is not None and round > match.closed:
            match.closed = round

    def turn_failed(self, key: str, seat: str, round: int, attempt: int, failure: str, at: float) -> None:
        match = self._running.get(key)
        agent = match.seats.get(seat) if match else None
        if failure == "timeout":  # the cancelled request sends no record: it is no longer in flight
            for token in [t for t, f in self._flights.items()
                          if (f.match, f.seat, f.round, f.attempt) == (key, seat, round, attempt)]:
                self._drop_flight(token)
        if agent is None:  # a judge is no seat: its failures count on its calls' errors only
            return
        figures = self._agent(agent)
        if failure == "invalid":
            figures.invalid += 1
        elif failure == "timeout":
            figures.timeouts += 1

    def match_done(self, key: str, status: str, at: float | None) -> None:
        """A match is over: ``status`` "finished", "truncated" or "failed"; ``at`` None when an earlier run
        finished it. "interrupted" (a backend was down: it will be played again) is counted as such until it
        starts again; any other status (a match wiped to be replayed) only takes it out of the running ones."""
        match = self._running.pop(key, None)
        for token in [t for t, f in self._flights.items() if f.match == key]:
            self._drop_flight(token)
        if status == "interrupted" and key not in self._done:
            self._interrupted.add(key)
        if status not in ("finished", "truncated", "failed") or key in self._done:
            return
        self._done[key] = status
        self._failed += status == "failed"
        self._truncated += status == "truncated"
        if match is not None and at is not None:
            self._played[key] = match.calls
            self._done_calls += match.calls
            if not self._earlier(at):
                self._match_spans.append((match.started, at))
        elif match is None:
            self._resumed.add(key)

    def call_started(self, call: CallStarted, at: float) -> None:
        if call.match not in self._running or call.token in self._flights:  # a retry keeps its first start
            return
        self._flights[call.token] = Flight(call.token, call.match, call.seat, call.round, call.attempt, call.agent, at)
        self._agent(call.agent).in_flight += 1

    def call_ended(self, call: CallRecord, at: float) -> None:
        if call.token is not None:
            self._drop_flight(call.token)
        figures = self._agent(call.agent)
        if call.cached:
            self._cached += 1
            figures.cached += 1
            figures.cached_tokens += (call.prompt_tokens or 0) + (call.completion_tokens or 0)
            return
        self._calls += 1
        figures.calls += 1
        figures.prompt_tokens += call.prompt_tokens or 0
        figures.completion_tokens += call.completion_tokens or 0
        figures.uncounted += call.prompt_tokens is None or call.completion_tokens is None
        figures.retries += call.retries
        if call.cost is None:
            figures.unpriced += 1
        else:
            figures.spend += call.cost
        if call.error is None:
            figures.answered += 1
            figures.latency += call.latency
        else:
            figures.errors += 1
        if not self._earlier(at):
            self._call_spans.append((at - call.latency, at))
        if call.match in self._running:
            self._running[call.match].calls += 1
        elif call.match in self._played:
            self._played[call.match] += 1
            self._done_calls += 1

    def call_gone(self, token: str) -> None:
        """A call is no longer in flight (its record is read separately)."""
        self._drop_flight(token)

    def note(self, text: str, at: float) -> None:
        if self._earlier(at):
            return  # said to an earlier session; this one says it again if it still holds
        self._notes.pop(text, None)
        self._notes[text] = None
        while len(self._notes) > NOTES_KEPT:
            del self._notes[next(iter(self._notes))]

    # -- figures -------------------------------------------------------------------
    def running_keys(self) -> set[str]:
        return set(self._running)

    def snapshot(self, now: float) -> Snapshot:
        match_rate = recent_rate(self._match_spans, now, self.window)
        call_rate = recent_rate(self._call_spans, now, self.window)
        done = len(self._done)
        planned = max(self._planned, done + len(self._running))
        remaining = planned - done
        per_match = self._calls_per_match()
        if self._calls:
            eta_from = "calls"
            eta = self._calls_left(remaining, per_match) / call_rate if call_rate and per_match is not None else None
        else:
            eta_from = "matches"
            eta = remaining / match_rate if match_rate else None
        if remaining == 0 and planned:
            eta = 0.0
        agents = {name: replace(f) for name, f in sorted(self._agents.items())}
        return Snapshot(
            now=now, planned=planned, done=done, failed=self._failed, resumed=len(self._resumed),
            running=sorted((replace(m, seats=dict(m.seats)) for m in self._running.values()), key=lambda m: (m.started, m.key)),
            flights=sorted(self._flights.values(), key=lambda f: (f.started, f.token)),
            agents=agents, calls=self._calls, cached=self._cached, match_rate=match_rate, call_rate=call_rate,
            eta=eta, eta_from=eta_from, calls_per_match=per_match,
            elapsed=None if self._first is None else max(0.0, now - self._first), notes=list(self._notes),
            truncated=self._truncated, interrupted=len(self._interrupted),
        )

    def _calls_per_match(self) -> float | None:
        if self._played:
            return self._done_calls / len(self._played)
        guesses = [m.calls * m.rounds / m.closed for m in self._running.values() if m.rounds and m.closed]
        return sum(guesses) / len(guesses) if guesses else None

    def _calls_left(self, remaining: int, per_match: float) -> float:
        running = self._running.values()
        return sum(max(0.0, per_match - m.calls) for m in running) + max(0, remaining - len(running)) * per_match

    # -- bookkeeping -----------------------------------------------------------------
    def _agent(self, name: str) -> AgentFigures:
        figures = self._agents.get(name)
        if figures is None:
            figures = self._agents[name] = AgentFigures()
        return figures

    def _drop_flight(self, token: str) -> None:
        flight = self._flights.pop(token, None)
        if flight is not None:
            self._agent(flight.agent).in_flight -= 1

    def _undo(self, key: str) -> None:
        """A match counted done is played again (a resume replays a failed match)."""
        status = self._done.pop(key)
        self._failed -= status == "failed"
        self._truncated -= status == "truncated"
        self._resumed.discard(key)
        self._done_calls -= self._played.pop(key, 0)  # the agents' totals keep its calls: they were paid for
