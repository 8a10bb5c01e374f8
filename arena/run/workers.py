"""Worker processes that play a run's matches (``execution: {executor: processes, workers: N}``).

One process runs every match's work on one trio thread, so matches whose agents answer fast are
bound by one core: 128 scripted matches at once need more CPU per 100 ms than a core has. With
workers, the run's own process keeps what must be one (the plan, the limits, the store, the live
view, outages, the budget) and the workers play the matches it hands them.

The run forks its workers as it starts, before any of its agents has opened a client: they begin
with the scenario, the plugins and the imports already in memory, in milliseconds. A worker then
runs its own trio loop on a fresh thread (the forked copy of the run's loop is never touched
again), builds the scenario's agents with services of its own, prepares them, and plays the specs
it is sent. Everything a match says comes back over a socket pair, in order: each event's store
rows as it happens, each call and note, then what playing came to. The run writes the rows and
makes the events again for the record and the live view, as if the match had been played in its
own process, so the store, the export and the figures are the same whatever the number of workers.

What the workers share goes through the run: a request another worker is asking right now waits
for that reply (the cache is one SQLite file), notes are said once, and the budget counts every
worker's calls. A worker on another machine than the run's (a Ray actor on another node) cannot
open that file: it asks the run for a saved reply as it claims its turn at a request, and sends
each new reply back for the run to save, so the cluster shares one cache. The rate limits are the run's: a worker asks the run's process for a place under
an endpoint's limits before each request and gives it back after, with the tokens the request
used, so the calls at once, requests and tokens per minute of all workers together are those the
scenario allows (a round trip on the socket per request). A forked worker that dies stops the run
as a crash of the run would: finished matches are kept and a rerun replays the others (Ray's workers,
``arena.run.ray_workers``, speak the same protocol over TCP and hand a lost worker's matches to the
others instead). When the run
ends, or its process dies, the workers see their socket close and exit.

What crosses a socket is a frame: its length in 4 bytes, then a pickled list of items, each a
tuple whose first element says what it is. Pickle, because both ends are the same program forked
from one process, and it keeps what was sent as it was (tuples, numbers) at a fraction of JSON's
cost. To a worker: ``play`` a spec, ``turn`` at a claimed request. From it: ``ready``, ``fatal``
(an agent cannot play), ``crash``, ``message`` and ``event`` (an event's store rows, and what the
run needs to make the event again), ``played``, ``call``, ``started``, ``note``, ``claim`` and
``release`` of a request (to it: ``turn``, with the run's saved reply for a worker that asked for
it), ``remember`` a new reply (a worker without the cache file), ``slot`` and ``unslot`` of a place
under the limits (to it: ``granted``).
"""

from __future__ import annotations

import itertools
import os
import pickle
import signal
import socket
import struct
import sys
import threading
import traceback
import warnings
from collections import deque
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

import trio
from pydantic import TypeAdapter

from arena.contract import plugins
from arena.contract.agent import FatalAgentError
from arena.contract.calls import CachedReply, Services, Slot
from arena.contract.errors import ArenaError, BackendUnavailable, leaves
from arena.contract.events import Event, MessagePosted
from arena.contract.messages import Message
from arena.contract.records import EventLog, MatchRecord, MatchSpec
from arena.engine.match import EventSink, Played, default_referees, play_spec
from arena.run.collector import tuned_for_a_run
from arena.run.executor import build_agents
from arena.run.scenario import Scenario
from arena.services.cache import ResponseCache
from arena.services.calls import RunServices
from arena.store import RunStore
from arena.store.writer import EventRows

_EVENT: TypeAdapter[Event] = TypeAdapter(Event)
_TRANSCRIPT = {"messages", "events"}  # what the run makes again from the events it was sent
_LENGTH = struct.Struct(">I")


class WorkerFailed(ArenaError):
    """A worker process crashed or ended while the run needed it."""


@dataclass(frozen=True)
class Job:
    """What a worker needs besides the code: all of it is in memory when the run forks."""

    scenario: Scenario
    workers: int | None  # None: one per core (of this machine, or of the Ray cluster)
    cache: Path | None  # the run's response cache, a file every worker on the run's machine opens
    use_cache: bool
    cache_node: str | None = None  # Ray: the node whose disk holds the cache; a worker elsewhere asks the run
    heartbeat: float | None = None  # Ray: seconds between a worker's "alive", so the run hears a silent one


class _Outbox:
    """Items for one socket: all that were queued while it was busy go in one frame."""

    def __init__(self, stream: trio.SocketStream):
        self.stream = stream
        self.items: list[tuple] = []
        self.wake = trio.Event()

    def put(self, *item: Any) -> None:
        self.items.append(item)
        self.wake.set()

    async def pump(self) -> None:
        try:
            while True:
                await self.wake.wait()
                self.wake = trio.Event()
                data, self.items = pickle.dumps(self.items, pickle.HIGHEST_PROTOCOL), []
                await self.stream.send_all(_LENGTH.pack(len(data)) + data)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # the other end is gone: its reader says so, once


@dataclass
class _Ended:
    silent: bool = False  # the other end sent nothing for longer than it may


async def _frames(stream: trio.SocketStream, silence: Callable[[], float | None] = lambda: None,
                  ended: _Ended | None = None) -> AsyncIterator[list[tuple]]:
    """The stream's frames until it closes, or until nothing comes for ``silence()`` seconds (said in ``ended``)."""
    buffer = bytearray()
    while True:
        try:
            with trio.fail_after(silence() or float("inf")):
                data = await stream.receive_some(1 << 18)
        except trio.BrokenResourceError:  # reset, or timed out by keepalive (a machine gone silent): ended too
            return
        except trio.TooSlowError:
            if ended is not None:
                ended.silent = True
            return
        if not data:
            return
        buffer += data
        start = 0
        while len(buffer) - start >= 4:
            (size,) = _LENGTH.unpack_from(buffer, start)
            if len(buffer) - start - 4 < size:
                break
            yield pickle.loads(memoryview(buffer)[start + 4:start + 4 + size])
            start += 4 + size
        del buffer[:start]


# --- the run's side -------------------------------------------------------------------------


@dataclass(eq=False)
class _Worker:
    pid: int
    sock: socket.socket
    ready: trio.Event = field(default_factory=trio.Event)
    playing: int = 0
    outbox: _Outbox | None = None
    wants_reply: bool = False  # it cannot open the run's cache: its turns at a request bring the saved reply


@dataclass(eq=False)
class _Pending:
    sinks: Sequence[EventSink]
    store: RunStore | None
    worker: _Worker
    messages: list[Message] = field(default_factory=list)
    events: EventLog = field(default_factory=EventLog)
    played: Played | None = None
    done: trio.Event = field(default_factory=trio.Event)


@dataclass(eq=False)
class _Held:
    """A place under an endpoint's limits that the run holds for a worker's request."""

    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    released: trio.Event = field(default_factory=trio.Event)
    tokens: int = 0  # what the request used, once it is given back


class Workers:
    """The executor of a run played by worker processes (``arena.run.executor``)."""

    # A worker that ends while the run needs it: False stops the run (a forked worker dies with a bug or
    # the machine, as the run itself would); True plays its unfinished matches again on the others (a
    # cluster's worker lost with its node), and only the last one's end stops the run.
    replay_lost = False
    # Seconds a prepared worker may send nothing before the run takes it for lost (None: as long as its
    # socket is open). A frozen process or a stuck loop keeps its socket open: only its silence shows it.
    lost_after: float | None = None

    def __init__(self, workers: list[_Worker]):
        self._workers = workers
        self._alive = list(workers)  # those matches are handed to
        self._pending: dict[str, _Pending] = {}
        # a request being asked -> the workers in line, the asker first, each with its claim's number (a
        # worker is in a line once: its own matches take turns at a request before one of them claims it)
        self._claims: dict[str, deque[tuple[_Worker, int]]] = {}
        self._held: dict[tuple[_Worker, int], _Held] = {}  # (worker, its number for the request) -> its place
        self._nursery: trio.Nursery | None = None
        self._services: Services | None = None  # the run's: its cache answers workers that cannot open it
        self._closing = False

    @classmethod
    def fork(cls, job: Job, preload: Sequence[MatchSpec] = ()) -> Workers:
        """Start the workers; the run calls it as it starts, before its agents hold clients or threads.
        The plugins ``preload``'s matches use are loaded first, so that no worker imports them again."""
        import networkx  # noqa: F401  every match's hearing graph: loaded once here, not in each worker

        for game in sorted({spec.game for spec in preload}):
            for referee in default_referees(plugins.load("game", game)):
                plugins.load("referee", referee.use)
        for referee in sorted({r.use for spec in preload for r in spec.referees or ()}):
            plugins.load("referee", referee)
        if not hasattr(os, "fork"):
            raise ArenaError("worker processes are forked, and this system cannot fork (Windows); "
                             "play the run with executor: local (or ray)")
        workers: list[_Worker] = []
        sys.stdout.flush(), sys.stderr.flush()  # nothing buffered is written twice
        for _ in range(job.workers or os.cpu_count() or 1):
            ours, theirs = socket.socketpair()
            with warnings.catch_warnings():  # Python 3.12 warns of other threads (a live view's): a worker uses none of their locks
                warnings.simplefilter("ignore", DeprecationWarning)
                pid = os.fork()
            if pid == 0:  # the worker: it keeps only its own end
                ours.close()
                for worker in workers:
                    worker.sock.close()
                _worker_main(theirs, job)
            theirs.close()
            workers.append(_Worker(pid, ours))
        return cls(workers)

    @asynccontextmanager
    async def serving(self, services: Services) -> AsyncIterator[Workers]:
        """Read what the workers send while the block runs; then let them go and wait for them."""
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery  # where the places under the limits are held
                self._services = services
                for worker in self._workers:
                    stream = trio.SocketStream(trio.socket.from_stdlib_socket(worker.sock))
                    worker.outbox = _Outbox(stream)
                    nursery.start_soon(worker.outbox.pump)
                    nursery.start_soon(self._read, worker, stream, services)
                yield self
                self._closing = True
                nursery.cancel_scope.cancel()
        except BaseExceptionGroup as group:  # the run's callers expect what went wrong bare, as with no workers
            failures = [e for e in leaves(group) if not isinstance(e, trio.Cancelled)]
            if len({(type(e), str(e)) for e in failures}) == 1:  # one failure, whether one worker said it or all
                raise failures[0] from None
            raise
        finally:
            self._closing = True
            with trio.CancelScope(shield=True):
                await self._reap()

    async def ready(self) -> None:
        """Return once every worker has prepared its agents (an agent that cannot play stops the run here)."""
        for worker in self._workers:
            await worker.ready.wait()

    async def play(self, spec: MatchSpec, sinks: Sequence[EventSink], store: RunStore | None = None) -> Played | None:
        worker = min(self._alive, key=lambda w: w.playing)
        pending = self._pending[spec.key] = _Pending(sinks, store, worker, events=EventLog(match=spec.key))
        worker.playing += 1
        try:
            worker.outbox.put("play", spec)
            await pending.done.wait()
        finally:  # cancelled: the worker plays on, and what it sends of this match is dropped
            worker.playing -= 1
            self._pending.pop(spec.key, None)
        return pending.played

    async def _read(self, worker: _Worker, stream: trio.SocketStream, services: Services) -> None:
        pending_of = self._pending.get
        # counted once it is ready: preparing its agents (loading a model) may hold a worker's loop a while
        silence = lambda: self.lost_after if worker.ready.is_set() else None  # noqa: E731
        ended = _Ended()
        async for items in _frames(stream, silence, ended):
            for item in items:
                kind = item[0]
                if kind == "message":  # ("message", store rows, recipients, data)
                    _, rows, recipients, data = item
                    key, _, index, round, sender, _, kind_, content, _, shown = rows[0][1]
                    pending = pending_of(key)
                    if pending is not None:
                        if pending.store is not None:
                            pending.store.add_rows(rows)
                        message = Message.made(index, round, sender, recipients, content, kind_, data, shown)
                        pending.messages.append(message)
                        pending.events.append_message(message)
                        if pending.sinks:  # the event itself only for whoever reads events
                            event = MessagePosted(match=key, message=message)
                            for sink in pending.sinks:
                                sink(event)
                elif kind == "event":  # ("event", store rows): the last row holds the event's JSON
                    rows = item[1]
                    pending = pending_of(rows[-1][1][0])
                    if pending is not None:
                        if pending.store is not None:
                            pending.store.add_rows(rows)
                        event = _EVENT.validate_json(rows[-1][1][3])
                        pending.events.append(event)
                        for sink in pending.sinks:
                            sink(event)
                elif kind == "played":
                    self._played(item[1], item[2])
                elif kind == "call":
                    services.record_call(item[1])
                elif kind == "started":
                    services.call_started(item[1])
                elif kind == "note":
                    services.note(*item[1:])
                elif kind == "claim":  # ("claim", digest, number, whether the worker wants the run's saved reply)
                    self._claim(worker, *item[1:])
                elif kind == "remember":  # ("remember", digest, reply): a reply a worker without the cache got
                    if services.cache is not None:
                        services.cache.put(item[1], item[2])
                elif kind == "release":  # ("release", digest): done asking, or given up while in line
                    self._release(worker, item[1])
                elif kind == "slot":  # ("slot", number, backend, endpoint, tokens)
                    self._slot(worker, services, *item[1:])
                elif kind == "unslot":  # ("unslot", number, tokens used): done, or given up while waiting
                    self._unslot(worker, *item[1:])
                elif kind == "ready":
                    worker.ready.set()
                elif kind == "fatal":
                    raise FatalAgentError(item[1])
                elif kind == "crash":
                    raise WorkerFailed(f"worker process {worker.pid} crashed:\n{item[1]}")
                # "alive" says only that: its arrival is what counts
        if ended.silent:
            await stream.aclose()  # should it wake, it finds the run gone and ends
        if not self._closing:
            self._lost(worker, services, f"went silent mid-run (nothing for {self.lost_after:g} s: its node lost, or its "
                       "process frozen)" if ended.silent else "ended mid-run")

    def _lost(self, worker: _Worker, services: Services, why: str) -> None:
        """A worker ended mid-run: stop the run, or (``replay_lost``) give back what it held and hand its
        matches back to the run (``play`` returns None), which wipes their rows and plays them again."""
        if not self.replay_lost:
            raise WorkerFailed(f"worker process {worker.pid} ended while the run needed it")  # (forked: never silent)
        self._alive.remove(worker)
        if not self._alive:
            raise WorkerFailed(f"every worker ended while the run needed them (the last: process {worker.pid})")
        worker.ready.set()  # the run no longer waits for it to prepare
        lost = [pending for pending in self._pending.values() if pending.worker is worker and not pending.done.is_set()]
        for pending in lost:
            pending.played = None
            pending.done.set()
        services.note(None, None, "worker", f"worker process {worker.pid} {why}: its {len(lost)} unfinished "
                      f"matches are played again by the {len(self._alive)} other worker(s)")
        for place in [place for place in self._held if place[0] is worker]:
            self._unslot(worker, place[1], 0)
        for digest in list(self._claims):  # its turn at a request passes on; its place in a line goes
            self._release(worker, digest)

    def _played(self, record: dict, outage: tuple[str, str, str, str] | None) -> None:
        pending = self._pending.get(record["key"])
        if pending is None:
            return
        record["messages"], record["events"] = tuple(pending.messages), pending.events
        pending.played = Played(MatchRecord.model_validate(record), None if outage is None else BackendUnavailable(*outage))
        pending.done.set()

    def _slot(self, worker: _Worker, services: Services, number: int, backend: str, endpoint: str, tokens: int) -> None:
        held = self._held[(worker, number)] = _Held()
        self._nursery.start_soon(self._hold, worker, held, services, number, backend, endpoint, tokens)

    def _unslot(self, worker: _Worker, number: int, tokens: int) -> None:
        held = self._held.pop((worker, number))
        held.tokens = tokens
        held.released.set()
        held.scope.cancel()  # if it is still waiting for its place, it stops waiting

    async def _hold(self, worker: _Worker, held: _Held, services: Services, number: int, backend: str,
                    endpoint: str, tokens: int) -> None:
        """Take a place under the run's limits for a worker's request and keep it until the worker gives
        it back, with the tokens the request used (the tokens-per-minute window counts those)."""
        with held.scope:
            async with services.slot(backend, endpoint, tokens) as reservation:
                worker.outbox.put("granted", number)
                try:
                    await held.released.wait()
                finally:
                    reservation.tokens = held.tokens or reservation.tokens

    def _claim(self, worker: _Worker, digest: str, number: int, wants_reply: bool) -> None:
        worker.wants_reply = wants_reply
        line = self._claims.setdefault(digest, deque())
        line.append((worker, number))
        if len(line) == 1:
            self._turn(digest)

    def _release(self, worker: _Worker, digest: str) -> None:
        """``worker`` leaves the line: the asker once done, or any in line whose match gave the request up
        (its turn cancelled, the match stopped); the turn passes on only if it was the asker's."""
        line = self._claims.get(digest, ())
        place = next((i for i, (w, _) in enumerate(line) if w is worker), None)
        if place is None:
            return
        del line[place]
        if not line:
            del self._claims[digest]
        elif place == 0:
            self._turn(digest)

    def _turn(self, digest: str) -> None:
        """The first in line's turn at asking a request, for its claim's number; with the reply the run's
        cache holds for it, to a worker that cannot open the cache (read now: the one before it in line may
        have just saved it)."""
        worker, number = self._claims[digest][0]
        cache = self._services.cache if worker.wants_reply and self._services is not None else None
        worker.outbox.put("turn", (digest, number, None if cache is None else cache.get(digest)))

    async def _reap(self) -> None:
        for worker in self._workers:
            worker.sock.close()  # the worker sees the end of its input and exits
        for worker in self._workers:
            with trio.move_on_after(10) as waited:
                await trio.to_thread.run_sync(os.waitpid, worker.pid, 0, abandon_on_cancel=True)
            if waited.cancelled_caught:  # stuck (an agent that does not close): it has nothing left to give
                os.kill(worker.pid, signal.SIGKILL)
                os.waitpid(worker.pid, 0)


# --- the worker's side ----------------------------------------------------------------------


def _worker_main(sock: socket.socket, job: Job) -> NoReturn:
    """The forked process: never returns to the run's code, and exits without its clean-up (the
    run's store and files are the run's to close)."""
    code = 1
    try:
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C is the run's to handle: it closes the sockets
        signal.set_wakeup_fd(-1)  # the run's loop listens on that one
        sys.stdout = sys.stderr = open(os.devnull, "w")  # a lock another thread held at the fork stays held
        crashed: list[str] = []

        def loop() -> None:  # a thread of its own: the forked copy of the run's loop is still 'running' here
            try:
                trio.run(_serve, sock, job)
            except BaseException:
                crashed.append(traceback.format_exc())

        thread = threading.Thread(target=loop, name="arena-worker")
        thread.start()
        thread.join()
        code = 1 if crashed else 0
        if crashed:
            try:
                data = pickle.dumps([("crash", crashed[0])])
                sock.setblocking(True)
                sock.sendall(_LENGTH.pack(len(data)) + data)
            except OSError:
                pass
    finally:
        os._exit(code)


class _Places:
    """This worker's side of the run's limits: the run's process holds them for every worker."""

    def __init__(self, outbox: _Outbox):
        self.outbox = outbox
        self.granted: dict[int, trio.Event] = {}
        self._numbers = itertools.count()

    @asynccontextmanager
    async def slot(self, backend: str, endpoint: str, tokens: int) -> AsyncIterator[Slot]:
        number = next(self._numbers)
        granted = self.granted[number] = trio.Event()
        place = Slot(tokens)
        self.outbox.put("slot", number, backend, endpoint, tokens)
        try:
            await granted.wait()
            yield place
        finally:
            del self.granted[number]
            self.outbox.put("unslot", number, place.tokens)  # given up while waiting too: the run lets it go

    def grant(self, number: int) -> None:
        granted = self.granted.get(number)
        if granted is not None:
            granted.set()


class _Claims:
    """This worker's side of taking turns with the others at asking one request."""

    def __init__(self, outbox: _Outbox, cache: _CacheOverSocket | None):
        self.outbox = outbox
        self.cache = cache  # None: the worker opens the run's cache file itself
        self.turns: dict[str, tuple[int, trio.Event]] = {}  # a request claimed -> the claim's number, its turn
        self.numbers = itertools.count()

    @asynccontextmanager
    async def claim(self, digest: str) -> AsyncIterator[None]:
        number, turn = self.turns[digest] = next(self.numbers), trio.Event()  # the worker's own matches already
        self.outbox.put("claim", digest, number, self.cache is not None)  # take turns: one claim at a time here
        try:
            await turn.wait()
            yield
        finally:
            del self.turns[digest]
            if self.cache is not None:
                self.cache.replies.pop(digest, None)  # unread if the claim was given up
            self.outbox.put("release", digest)  # given up while waiting too: the run then passes the turn on

    def granted(self, digest: str, number: int, reply: CachedReply | None) -> None:
        """The run's turn for claim ``number``. A claim given up while its turn was on the way (its release
        crossed it) gets it late: it is for nobody now, not for a newer claim of the same request."""
        claim = self.turns.get(digest)
        if claim is None or claim[0] != number:
            return
        if reply is not None and self.cache is not None:
            self.cache.replies[digest] = reply
        claim[1].set()


class _CacheOverSocket:
    """The run's response cache for a worker that cannot open its file (on another machine): what the
    run found for a request comes with the worker's turn at asking it (``_Claims``), and a new reply
    goes to the run, which saves it. Every request is claimed before it is asked, so nothing is kept
    here but the replies not yet read."""

    def __init__(self, outbox: _Outbox):
        self.outbox = outbox
        self.replies: dict[str, CachedReply] = {}

    def get(self, key: str) -> CachedReply | None:
        return self.replies.pop(key, None)

    def put(self, key: str, reply: CachedReply) -> None:
        self.outbox.put("remember", key, reply)

    def close(self) -> None:
        pass


async def _beat(outbox: _Outbox, every: float) -> None:
    """Tell the run this worker is alive, however long its matches go without saying anything."""
    while True:
        await trio.sleep(every)
        outbox.put("alive")


async def _serve(sock: socket.socket, job: Job, cache_over_socket: bool = False) -> None:
    """Play what the run sends on ``sock``; ``cache_over_socket``: the run's cache file is out of reach."""
    stream = trio.SocketStream(trio.socket.from_stdlib_socket(sock))
    outbox = _Outbox(stream)
    remote = _CacheOverSocket(outbox) if cache_over_socket and job.cache is not None else None
    claims, places = _Claims(outbox, remote), _Places(outbox)
    scenario = job.scenario
    cache = remote if remote is not None else None if job.cache is None else ResponseCache.open_or_none(job.cache)[0]
    services = RunServices(
        cache=cache, use_cache=job.use_cache, held_slot=places.slot,
        prices={model: (p.input, p.output) for model, p in scenario.prices.items()},
        record_call=lambda call: outbox.put("call", call),
        on_call_started=lambda call: outbox.put("started", call),
        on_note=lambda *note: outbox.put("note", *note), claim=claims.claim,
    )
    agents = build_agents(scenario, services)
    encoder = EventRows()  # the store's rows are made here, where the match is played

    def send(event: Event) -> None:
        rows = encoder.rows(event)
        if event.type == "message":
            outbox.put("message", rows, event.message.recipients, event.message.data)
        else:
            outbox.put("event", rows)

    async def play(spec: MatchSpec) -> None:
        encoder.start(spec.key)
        played = await play_spec(spec, agents, (send,))
        encoder.end(spec.key)
        outage = played.outage
        outbox.put("played", played.record.model_dump(exclude=_TRANSCRIPT),
                   None if outage is None else (outage.agent, outage.backend, outage.endpoint, outage.error))

    with tuned_for_a_run():
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(outbox.pump)
                if job.heartbeat:
                    nursery.start_soon(_beat, outbox, job.heartbeat)
                try:
                    for agent in agents.values():
                        await agent.prepare()
                except FatalAgentError as exc:
                    outbox.put("fatal", str(exc))  # the run stops on it and closes the socket
                else:
                    outbox.put("ready")
                async for items in _frames(stream):
                    for kind, value in items:
                        if kind == "play":
                            nursery.start_soon(play, value)
                        elif kind == "turn":
                            claims.granted(*value)
                        elif kind == "granted":
                            places.grant(value)
                nursery.cancel_scope.cancel()  # the run has ended, or is gone: nobody reads what is left
        finally:
            with trio.CancelScope(shield=True):
                for agent in agents.values():
                    await agent.aclose()
            services.close()
