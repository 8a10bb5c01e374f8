"""Matches played by Ray actors (``execution: {executor: ray}``, ``arena run --executor ray``).

Ray only places and supervises the workers; what they say goes the way a forked worker's does
(``arena.run.workers``): each actor connects to a TCP socket the run listens on and runs the same
worker loop, which builds the scenario's agents once, plays every spec it is sent and streams each
event's store rows, call and note back as it happens. So the run's process stays the one writer
of the store, the live view and the limits see what they see in a local run, and a match's rows are
the ones a local run writes. A socket per worker, rather than Ray's objects, because a match sends
dozens of small items whose order matters, and a Ray task costs milliseconds where a scripted match
takes one (a worker plays many matches, never one task each).

The run listens on 127.0.0.1 when every node of the cluster is this machine (a local instance), and
otherwise on the address Ray gives this node, which the other nodes reach. An actor that dies (its
process killed) ends its socket, and one that sends nothing for ``execution.lost_after`` seconds
(its node cut off, its process frozen: it says it is alive 4 times in that span) is taken for lost
and killed: either way its unfinished matches are played again by the others, their rows wiped
first, so nothing is stored twice (``Workers.replay_lost``). An actor on
another node than the run's cannot open the run's response cache: it asks the run for saved replies
and sends new ones back over its socket, so a rerun on the cluster asks the models nothing again.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import socket
import struct
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import trio

from arena.run.executor import ExecutorError
from arena.run.placement import workers_that_fit
from arena.run.workers import Job, WorkerFailed, Workers, _serve, _Worker

ACTOR_PREFIX = "arena-worker"  # its actors' names: ACTOR_PREFIX-RUN-N, so a person (or a test) can find them
_PID = struct.Struct(">Q")  # the first thing an actor sends: the id of its process
START_WITHIN = 120  # seconds for every actor to be placed and connect: past it the cluster lacks room
LOST_AFTER = 40.0  # seconds an actor may send nothing before its matches are played elsewhere (execution.lost_after)


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError("executor: ray needs Ray, which is not installed here: pip install 'arena-eval[ray]'") from None
    return ray


def _reachable(address: str) -> None:
    """Refuse at once a cluster whose head does not answer (Ray itself retries for a minute)."""
    if address.startswith("ray://"):
        raise ExecutorError(f"address {address!r} is a Ray client address, and a client is not a node the workers can "
                          "send their matches to: run arena on a node of the cluster, with address: auto")
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ExecutorError(f"address {address!r} is not a Ray cluster's address: give auto or HOST:PORT of its head")
    try:
        socket.create_connection((host, int(port)), timeout=5).close()
    except OSError as exc:
        raise ExecutorError(f"the Ray cluster at {address} cannot be reached ({exc.strerror or exc}); nothing was "
                          "played") from None


@contextmanager
def connected(address: str | None) -> Iterator[Any]:
    """Ray for the run: the instance this process already joined (a script's, a test's), the cluster at
    ``address`` (``auto``: the one this machine is a node of), or a local instance started here for the
    run (127.0.0.1, no dashboard, no usage statistics) and stopped after it."""
    ray = _ray()
    if ray.is_initialized():
        yield ray
        return
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # a run tells no one it ran
    quiet = {"log_to_driver": False, "logging_level": logging.WARNING}  # workers' output would break the live view
    if address is None:
        # "local": a new instance even when RAY_ADDRESS or a `ray start` on this machine names one
        ray.init(address="local", include_dashboard=False, _node_ip_address="127.0.0.1", **quiet)
    else:
        if address != "auto":
            _reachable(address)
        try:
            ray.init(address=address, **quiet)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            where = ("no Ray cluster runs on this machine" if address == "auto"
                     else f"the Ray cluster at {address} cannot be reached")
            raise ExecutorError(f"{where} ({exc}); nothing was played") from None
    try:
        yield ray
    finally:
        ray.shutdown()


class _Actor:
    """A Ray actor that plays matches: the worker loop of ``arena.run.workers``, over TCP."""

    def pid(self) -> int:
        return os.getpid()

    def serve(self, host: str, port: int, job: Job) -> None:
        sock = socket.create_connection((host, port))
        sock.sendall(_PID.pack(os.getpid()))
        elsewhere = job.cache_node is not None and job.cache_node != _this_node(_ray())
        trio.run(_serve, sock, job, elsewhere)  # returns when the run closes the socket


class RayWorkers(Workers):
    """The executor of a run played by Ray actors (``arena.run.executor``)."""

    replay_lost = True

    def __init__(self, workers: list[_Worker], ray: Any, actors: list[Any], serving: list[Any], lost_after: float):
        super().__init__(workers)
        self._ray, self._actors, self._serving = ray, actors, serving
        self.lost_after = lost_after
        self._actor_of: dict[int, Any] = {}  # a worker's process -> its actor

    @classmethod
    def start(cls, ray: Any, job: Job, lost_after: float = LOST_AFTER) -> RayWorkers:
        """Place ``job.workers`` actors (default: as many as the cluster has room for, each with what the
        scenario's agents and referees ask for: ``arena.run.placement``) and wait for each to connect.
        An actor says it is alive 4 times per ``lost_after``; one silent for that long is lost."""
        need = job.scenario.worker_need()
        try:  # before any actor is asked for: Ray would wait for ever for room that never comes
            count = workers_that_fit(ray.nodes(), need, job.workers)
        except ValueError as exc:
            raise ExecutorError(str(exc)) from None
        nodes = {node["NodeManagerAddress"] for node in ray.nodes() if node["Alive"]}
        here = ray.util.get_node_ip_address()
        host = "127.0.0.1" if nodes <= {here, "127.0.0.1"} else here
        job = dataclasses.replace(job, heartbeat=lost_after / 4)
        if job.cache is not None:  # an actor's working folder is not the run's; an actor on another node asks the run
            job = dataclasses.replace(job, cache=job.cache.absolute(), cache_node=_this_node(ray))
        actor = ray.remote(**need.actor_options(), max_concurrency=2, max_restarts=0)(_Actor)  # 2: pid() answers while serve() runs
        run = uuid.uuid4().hex[:8]
        with socket.create_server((host, 0)) as listener:
            listener.settimeout(1)
            actors = [actor.options(name=f"{ACTOR_PREFIX}-{run}-{n}").remote() for n in range(count)]
            serving = [a.serve.remote(host, listener.getsockname()[1], job) for a in actors]
            workers: list[_Worker] = []
            try:
                deadline = time.monotonic() + START_WITHIN
                while len(workers) < count:
                    try:
                        sock, _ = listener.accept()
                    except TimeoutError:
                        ended, _ = ray.wait(serving, timeout=0)
                        if ended:  # an actor that could not start says why
                            ray.get(ended[0])
                            raise WorkerFailed("a Ray worker ended before it connected")
                        if time.monotonic() > deadline:
                            raise ExecutorError(f"{count - len(workers)} of {count} Ray workers were not placed within "
                                               f"{START_WITHIN} s: the cluster has no room for them") from None
                        continue
                    sock.settimeout(None)
                    _keep_alive(sock, lost_after)
                    workers.append(_Worker(_PID.unpack(_receive(sock, _PID.size))[0], sock))
            except BaseException as exc:
                for sock in (w.sock for w in workers):
                    sock.close()
                for a in actors:
                    ray.kill(a)
                if isinstance(exc, ray.exceptions.RayError):
                    raise WorkerFailed(f"a Ray worker could not start: {exc}") from None
                raise
        started = cls(workers, ray, actors, serving, lost_after)
        started._actor_of = dict(zip(ray.get([a.pid.remote() for a in actors]), actors))
        return started

    def _lost(self, worker: _Worker, services: Any, why: str) -> None:
        super()._lost(worker, services, why)
        actor = self._actor_of.get(worker.pid)
        if actor is not None:  # one that went silent is not trusted to wake: it would play on for no one
            self._ray.kill(actor)

    async def _reap(self) -> None:
        for worker in self._workers:
            worker.sock.close()  # an actor sees the end of its input, closes its agents and returns
        ray = self._ray
        await trio.to_thread.run_sync(lambda: ray.wait(self._serving, num_returns=len(self._serving), timeout=10))
        for actor in self._actors:  # done, or stuck: it has nothing left to give
            ray.kill(actor)
        gone = [actor.pid.remote() for actor in self._actors]  # answered by an error once the cluster knows it is dead
        await trio.to_thread.run_sync(lambda: ray.wait(gone, num_returns=len(gone), timeout=10))


def _this_node(ray: Any) -> str:
    """The Ray node this process runs on (a test makes the run's differ, to play "another node" on one)."""
    return ray.get_runtime_context().get_node_id()


def _keep_alive(sock: socket.socket, lost_after: float) -> None:
    """A worker's machine that goes silent (a lost node closes nothing) ends its connection within about
    ``lost_after``, and its matches are played again elsewhere, instead of the run waiting for them
    forever. The system answers these probes for a process that is frozen, or still preparing its
    agents: the run hears a prepared one's silence by the "alive" it sends (``Workers.lost_after``)."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    idle, every = max(1, round(lost_after / 2)), max(1, round(lost_after / 8))  # idle + 4 probes: lost_after
    for option, value in (("TCP_KEEPIDLE", idle), ("TCP_KEEPINTVL", every), ("TCP_KEEPCNT", 4)):
        if hasattr(socket, option):  # Linux's names; elsewhere the system's defaults
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _receive(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        part = sock.recv(size - len(data))
        if not part:
            raise WorkerFailed("a Ray worker closed its connection before saying who it is")
        data += part
    return data
