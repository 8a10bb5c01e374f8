"""Playing a scenario's tournament: matches at once under limits, the store kept
up to date, blocks of repeats added until stable, matches held back while a
backend they need is down, and resumption after a crash or an outage.

A finished match's record goes to the store and to the observer, then leaves memory: the
runner keeps each match's key and status (and, for entries repeated until stable, their
payoffs), so a run of any size runs in constant memory. A resume reads the keys of the
matches already finished, and each one's row as its turn in the plan comes."""

from __future__ import annotations

from contextlib import ExitStack, nullcontext
from pathlib import Path

import trio
from pydantic import BaseModel

from arena.run import stability
from arena.run.adaptive_schedule import AdaptiveCheck, AdaptiveRun
from arena.run.swiss import SwissRun
from arena.contract import plugins
from arena.contract.agent import Agent, FatalAgentError
from arena.contract.calls import PROBE_SEAT, CallRecord, CallStarted
from arena.services.cache import ResponseCache
from arena.services.calls import RunServices, Spending
from arena.contract.events import Event
from arena.engine.match import default_referees
from arena.contract.records import KEY_SCHEME, MatchRecord, MatchSpec
from arena.results.payoffs import summarize
from arena.run.collector import tuned_for_a_run
from arena.run.executor import Executor, InProcess, build_agents
from arena.run.workers import Job, Workers
from arena.run.outages import Outage, Outages
from arena.run.scenario import Concurrency, Execution, Scenario, UntilStable
from arena.store import RunStore
from arena.store.commits import GroupCommit
from arena.store.rows import MatchRow, ScoreRow
from arena.run.tournament import first_repeats, plan, plan_entry


class Observer:
    """Whoever watches a run: the live view, a log, a test. Every method is optional."""

    def planned(self, total: int) -> None:
        """The number of matches known so far (grows as until_stable adds blocks)."""

    def event(self, event: Event) -> None:
        """Everything that happens inside matches."""

    def finished(self, record: MatchRecord | MatchRow, resumed: bool) -> None:
        """A match is over: its record (kept by no one once this returns), or, when ``resumed`` (an
        earlier session of the run finished it, and it is not replayed), its row in the store, which
        has the same key, group, repeat, status, seats and payoffs, without the transcript."""

    def call_started(self, call: CallStarted) -> None:
        """A request to a model is on its way."""

    def call(self, call: CallRecord) -> None:
        """A request to a model ended (answered, failed, cut off, or served from the cache)."""

    def note(self, text: str) -> None:
        """Something to say once about the run: a backend's output mode, a backend down or back."""


class TournamentResult(BaseModel):
    """What a run did, without its records: those are in the store (and went past the observer)."""

    statuses: dict[str, str]  # key -> status of every match played by this run or kept from an earlier one, in plan order
    stability: list[stability.StabilityCheck]
    resumed: int
    not_started: list[str] = []  # keys of matches the budget kept from starting
    budget_note: str | None = None
    outages: list[Outage] = []  # backends the run gave up on; their matches are left for the next run
    unplayed: list[str] = []  # keys of matches not started because a backend they need was down
    warnings: list[str] = []  # what the person running it must hear, however quiet the output (a damaged cache)
    beyond_limit: int = 0  # matches of the plan past --limit, left for a later run
    adaptive: list[AdaptiveCheck] = []  # adaptive schedules, block by block, the last saying why each stopped

    def keys(self, status: str | None = None) -> list[str]:
        """The matches' keys in plan order (those of one status)."""
        return [k for k, s in self.statuses.items() if status is None or s == status]

    def count(self, status: str) -> int:
        return sum(s == status for s in self.statuses.values())


class KeepRecords(Observer):
    """An observer that keeps the record of every match played (and passes everything on to
    ``inner``): for tests and small scripts that want the records in hand. The runner keeps none."""

    def __init__(self, inner: Observer | None = None):
        self.inner = inner or Observer()
        self.by_key: dict[str, MatchRecord] = {}

    def in_order(self, result: TournamentResult) -> list[MatchRecord]:
        """The records of the matches this run played, in plan order."""
        return [self.by_key[k] for k in result.statuses if k in self.by_key]

    def planned(self, total: int) -> None:
        self.inner.planned(total)

    def event(self, event: Event) -> None:
        self.inner.event(event)

    def finished(self, record: MatchRecord | MatchRow, resumed: bool) -> None:
        if isinstance(record, MatchRecord):
            self.by_key[record.key] = record
        self.inner.finished(record, resumed)

    def call_started(self, call: CallStarted) -> None:
        self.inner.call_started(call)

    def call(self, call: CallRecord) -> None:
        self.inner.call(call)

    def note(self, text: str) -> None:
        self.inner.note(text)


class Limits:
    """A global limit on matches at once and optional per-agent limits.

    Agent slots are taken before the global one, in name order: a match
    waiting for a busy agent holds no global slot, so it does not stall
    matches of other agents, and the fixed order rules out deadlock.
    """

    def __init__(self, concurrency: Concurrency, agents: list[str], matches: int | None = None):
        self.matches = trio.CapacityLimiter(matches or concurrency.matches)
        self.per_agent = {a: trio.CapacityLimiter(n) for a in agents if (n := concurrency.limit_for(a))}

    def slot(self, spec: MatchSpec) -> "_Slot":
        """``async with limits.slot(spec):`` holds every limiter the match needs."""
        return _Slot((*(self.per_agent[a] for a in sorted(set(spec.agents)) if a in self.per_agent), self.matches))


class _Slot:
    """The limiters of one match, taken in order and given back in reverse (a plain class: the
    generator and exit stack of a context-manager function cost 4% of a scripted match)."""

    __slots__ = ("limiters",)

    def __init__(self, limiters: tuple[trio.CapacityLimiter, ...]):
        self.limiters = limiters

    async def __aenter__(self) -> None:
        taken = 0
        try:
            for limiter in self.limiters:
                await limiter.acquire()
                taken += 1
        except BaseException:  # cancelled while waiting: let go of what was taken
            for limiter in reversed(self.limiters[:taken]):
                limiter.release()
            raise

    async def __aexit__(self, *exc_info) -> None:
        for limiter in reversed(self.limiters):
            limiter.release()


def cache_path(scenario: Scenario, store: RunStore | None) -> Path | None:
    """The run's response cache: the scenario's, or the run directory's; none for a run without either."""
    if scenario.cache:
        return Path(scenario.cache)
    return None if store is None else store.run_dir / "responses.sqlite"


def build_services(scenario: Scenario, store: RunStore | None, use_cache: bool, spending: Spending,
                   observer: Observer | None = None, on_call=None, on_call_started=None) -> RunServices:
    observer = observer or Observer()
    cache, problem = None, None
    path = cache_path(scenario, store)
    if path is not None:
        cache, problem = ResponseCache.open_or_none(path)

    def record(call: CallRecord) -> None:
        spending.add(call)
        if store is not None:
            store.record_call(call)
        if on_call is not None:
            on_call(call)
        observer.call(call)

    def started(call: CallStarted) -> None:
        if store is not None:
            store.call_started(call)
        if on_call_started is not None:
            on_call_started(call)
        observer.call_started(call)

    def note(agent: str, endpoint: str, topic: str, text: str) -> None:
        if store is not None:
            store.record_note(agent, endpoint, topic, text)
        observer.note(text)

    services = RunServices(
        cache=cache, use_cache=use_cache, record_call=record, limit_settings=dict(scenario.limits),
        prices={model: (p.input, p.output) for model, p in scenario.prices.items()},
        on_call_started=started, on_note=note,
    )
    if problem is not None:
        services.warnings.append(problem)
        note(None, None, "cache", problem)
    return services


async def run_tournament(
    scenario: Scenario,
    store: RunStore | None = None,
    observer: Observer | None = None,
    matches_at_once: int | None = None,
    use_cache: bool = True,
    limit: int | None = None,
    processes: int | None = None,
    execution: Execution | None = None,
) -> TournamentResult:
    """``limit``: play only the first ``limit`` matches of the plan, until_stable's added blocks
    included (a smoke test). A match is the same whatever the limit, so a later run without it keeps
    them and plays the rest; a run the limit cut short judges no stability, as that needs whole blocks.
    ``execution``: where the matches are played (default: the scenario's ``execution``).
    ``processes``: without ``execution``, the older spelling of ``Execution(executor="processes",
    workers=N)`` over the scenario's (1: this process), kept for callers that pass it."""
    observer = observer or Observer()
    spending = Spending()
    if store is not None:  # what earlier sessions of this run spent counts against the budget too
        for call in store.read.calls():
            spending.add(call)

    def say(agent: str, endpoint: str, text: str) -> None:  # each change of a backend's state, however often
        if store is not None:
            store.record_note(agent, endpoint, "outage", text)
        observer.note(text)

    async def probe(agent: str) -> None:
        await agents[agent].probe()

    sent_in: dict[str, int] = {}  # a call in flight (its token) -> its endpoint's outage episode when its last try began

    def asking(call: CallStarted) -> None:
        if call.agent in agents:
            sent_in[call.token] = outages.asking(agents[call.agent].endpoint())

    def answered(call: CallRecord) -> None:
        episode = sent_in.pop(call.token, None) if call.token is not None else None
        if not call.cached and call.error is None and call.agent in agents and call.seat != PROBE_SEAT:
            outages.answered(agents[call.agent].endpoint(), episode)

    outages = Outages(scenario.match.outage_wait, probe, say)
    services = build_services(scenario, store, use_cache, spending, observer, on_call=answered,
                              on_call_started=asking)
    agents = build_agents(scenario, services)
    scheme = store.read.key_scheme() if store is not None else KEY_SCHEME  # a resumed old run keeps its keys and seeds
    wave = plan(scenario, scheme)
    execution = execution or scenario.execution_settings(processes)
    people = sorted(name for name, agent in agents.items() if agent.uses_terminal)
    if execution.executor != "local" and people:  # a worker has no terminal to ask a person at
        raise FatalAgentError(f"agent {people[0]!r} is a person at this terminal, who can only be asked in the run's "
                              f"own process, not in one of {execution.workers or 'several'} worker processes: play "
                              "it with executor: local")
    executor: Executor = InProcess(agents)  # or the workers, forked once nothing can fail before they serve
    not_started: list[str] = []
    unplayed: list[str] = []
    budget_note: str | None = None
    limits = Limits(scenario.concurrency, list(scenario.agents), matches_at_once)
    commits = GroupCommit(store, gather=limits.matches.total_tokens)  # matches that end together share a commit
    statuses: dict[str, str] = {}  # key -> status: all the runner keeps of a match once it is over
    earlier = store.read.finished_keys() if store else set()
    checks: list[stability.StabilityCheck] = []
    repeats_so_far = {  # until_stable entries still adding repeats
        entry.name: (entry, rule, first_repeats(scenario, entry))
        for entry in scenario.games
        if isinstance(rule := scenario.tournament_for(entry).repeats, UntilStable)
        and scenario.tournament_for(entry).format != "swiss"  # a Swiss entry judges its stability round by round
    }
    judged: dict[str, list[ScoreRow]] = {name: [] for name in repeats_so_far}  # what their stability is judged on
    adaptive = AdaptiveRun(scenario, store)
    swiss = SwissRun(scenario)

    def over(match: MatchRecord | MatchRow, resumed: bool) -> None:
        statuses[match.key] = match.status
        if match.group in judged and match.status == "finished":
            judged[match.group].append(ScoreRow.of(match))
        adaptive.finished(match)
        swiss.finished(match)
        observer.finished(match, resumed)

    # the match hands each event straight to the store and the live view: the runner is not on its way
    sinks = () if type(observer).event is Observer.event else (observer.event,)  # an observer that ignores events gets none

    async def play(spec: MatchSpec, position: int) -> None:
        nonlocal budget_note
        endpoints = endpoints_of(spec, agents)
        record: MatchRecord | None = None  # an interrupted attempt, until a replay replaces it
        while True:
            if await outages.wait_for(endpoints) is not None:  # given up: left for the next run
                if record is None:
                    unplayed.append(spec.key)
                break
            async with limits.slot(spec):
                if outages.any_down(endpoints):  # it went down while this match queued: wait again
                    continue
                budget_note = budget_note or spending.reached(scenario.budget)
                if budget_note:  # matches already in flight finish; no new one starts
                    not_started.append(spec.key)
                    break
                if store is not None:
                    store.prepare(spec, position)
                played = await executor.play(spec, sinks, store)
                if played is None:  # the worker playing it was lost: its rows are wiped and it is played again
                    continue
                record = played.record
                if played.outage is not None:  # before the slot is free: no match may start on a backend that is down
                    outages.failed(played.outage)
            if store is not None:  # counted as played once a commit has made it durable
                store.finish(record, commit=False)  # at once: whatever commits next has the match's last rows and its outcome together
                await commits.commit()
            if played.outage is None:
                break  # else wait for the backend (above), and play the match again
        if record is not None:
            over(record, resumed=False)

    order: list[str] = []
    beyond_limit = 0
    # the collector walks only what the run makes; a Ray instance started for the run stops after it
    with tuned_for_a_run(), ExitStack() as cluster:
        try:
            job = Job(scenario, execution.workers, cache_path(scenario, store), use_cache)
            if execution.executor == "processes":
                with services.cache.closed() if services.cache is not None else nullcontext():
                    executor = Workers.fork(job, preload=wave)
            elif execution.executor == "ray":  # imported here: Ray takes seconds to import, and is an extra
                from arena.run.ray_workers import RayWorkers, connected

                ray = cluster.enter_context(connected(execution.address))  # unreachable: said before anything is played
                executor = await trio.to_thread.run_sync(RayWorkers.start, ray, job, execution.lost_after)
            async with executor.serving(services):
                await executor.ready()  # a missing key or model stops the run before any match starts
                while wave:
                    if limit is not None:  # matches past the limit wait for a later run, unless one has played them
                        room = max(0, limit - len(order))
                        beyond = [s for s in wave[room:] if s.key not in earlier]
                        beyond_limit += len(beyond)
                        wave = wave[:room] + [s for s in wave[room:] if s.key in earlier]
                    first = len(order)
                    order += [s.key for s in wave]
                    observer.planned(len(order))
                    if store is not None:
                        store.set_planned(len(order) + beyond_limit)
                    async with trio.open_nursery() as nursery:
                        for position, spec in enumerate(wave, start=first):
                            if spec.key in earlier:
                                over(store.read.match(spec.key), resumed=True)
                            else:
                                nursery.start_soon(play, spec, position)
                    wave = []
                    if budget_note or outages.given_up() or beyond_limit:  # stability is judged on complete blocks only
                        if store is not None:  # the entries still adding blocks say what stopped them
                            why = (stability.BUDGET if budget_note else stability.OUTAGE if outages.given_up()
                                   else stability.LIMIT)
                            for name in repeats_so_far:
                                store.stop_stability(name, why)
                        break
                    for name, (entry, rule, repeats) in list(repeats_so_far.items()):
                        members = judged[name]
                        current = summarize(members)
                        previous = summarize([r for r in members if r.repeat <= repeats - rule.block])
                        check = stability.check(name, previous, current, repeats, rule,
                                                stability.payoff_range(name, members))
                        checks.append(check)
                        if store is not None:
                            store.record_stability(name, repeats, check.tau, check.max_width, check.stable, check.done,
                                                   check.stopped, check.width_limit)
                        if check.done:
                            del repeats_so_far[name]
                        else:
                            more = min(rule.max, repeats + rule.block)
                            wave += plan_entry(scenario, entry, repeats + 1, more, scheme)
                            repeats_so_far[name] = (entry, rule, more)
                    wave += adaptive.next_wave(lambda group, text: stopped_schedule(store, observer, group, text))
                    wave += [spec for entry, round, chosen in swiss.next_rounds(store, checks)
                             for spec in plan_entry(scenario, entry, round, round, scheme, chosen)]
                if store is not None:
                    failed = sum(s == "failed" for s in statuses.values())
                    store.set_status("stopped by an outage" if outages.given_up() else "stopped by budget" if not_started
                                     else f"stopped by --limit {limit}" if beyond_limit
                                     else "finished" if not failed else "finished with failures")
        except BaseException as exc:
            if store is not None:
                try:
                    store.flush()
                    store.set_status("interrupted")
                except Exception:  # the store fails too (a full disk): the error that stopped the run is the one to tell
                    pass
            if isinstance(exc, BaseExceptionGroup) and exc.subgroup(KeyboardInterrupt) is not None:
                raise KeyboardInterrupt from None  # Ctrl-C arrives wrapped by the nursery; callers expect it bare
            raise
        finally:
            with trio.CancelScope(shield=True):
                for agent in agents.values():
                    await agent.aclose()
            services.close()
    resumed = sum(1 for key in order if key in earlier)
    return TournamentResult(statuses={k: statuses[k] for k in order if k in statuses}, stability=checks, resumed=resumed,
                            not_started=not_started, budget_note=budget_note, outages=outages.given_up(),
                            unplayed=unplayed, warnings=services.warnings, beyond_limit=beyond_limit,
                            adaptive=adaptive.checks)


def stopped_schedule(store: RunStore | None, observer: Observer, group: str, text: str) -> None:
    """Why an adaptive schedule stopped: told to the observer, and kept once in the store under the
    entry's name, which the text does not repeat (a resumed run that stops the same way again does
    not repeat the note)."""
    if store is not None and not any(n["topic"] == "schedule" and n["agent"] == group and n["text"] == text
                                     for n in store.read.notes()):
        store.record_note(group, None, "schedule", text)
    observer.note(f"{group}: {text}")


def endpoints_of(spec: MatchSpec, agents: dict[str, Agent]) -> list[str]:
    """The endpoints a match needs: its players' and its referees' judges'."""
    names = list(spec.agents)
    try:
        referees = spec.referees or default_referees(plugins.load("game", spec.game))
        for referee in referees:
            cls = plugins.load("referee", referee.use)
            names += cls.agents_needed(cls.Params.model_validate(referee.params))
    except Exception:  # a spec that cannot be set up fails when played, with the reason; nothing to wait for here
        pass
    return sorted({e for name in names if name in agents and (e := agents[name].endpoint()) is not None})
