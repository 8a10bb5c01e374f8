"""Backends that are down: one circuit breaker per endpoint, shared by every agent and match using it.

A match interrupted by an unreachable backend opens its endpoint's breaker. While it is open no
match that needs the endpoint starts (the others go on); the matches waiting for it take turns
probing it, with pauses that grow, and all go ahead once it answers. An endpoint that has not
given a real answer (a probe does not count) for ``wait`` seconds is given up on for the rest of
the run: its matches are left for the next ``arena run``, which replays exactly those.

A breaker's state changes from several tasks at once: a waiting match's probe, and the real
answers that matches still playing on the endpoint get. Each opening is an *episode*; a probe or
a request speaks only for the episode it was sent in. A probe that ends after a real answer has
already closed the breaker (or after the endpoint failed anew) changes nothing, and neither does
an answer to a request sent before the endpoint failed: a server that dies answers what it had
already taken in, and that is no sign it is back.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable

import trio
from pydantic import BaseModel

from arena.contract.errors import BackendUnavailable

FIRST_PAUSE = 1.0  # seconds before the first probe; doubled after each failed one
LONGEST_PAUSE = 30.0


class Outage(BaseModel):
    """A backend the run gave up on, as the person running it is told."""

    agent: str
    backend: str
    endpoint: str
    error: str

    def __str__(self) -> str:
        return f"backend {self.backend} at {self.endpoint} (agent {self.agent!r}) is unavailable: {self.error}"


class Breaker:
    def __init__(self, endpoint: str):
        self.endpoint = endpoint
        self.failure: BackendUnavailable | None = None  # the latest, while the endpoint is down
        self.silent_since: float | None = None  # when it last answered a real request, if it has failed since
        self.gave_up = False
        self.episode = 0  # how many times the breaker has opened: a probe's result is for its own episode only
        self.pause = FIRST_PAUSE
        self.probing = trio.Lock()  # one waiter probes at a time; the others queue behind it

    @property
    def down(self) -> bool:
        return self.failure is not None


class Outages:
    """``probe(agent)`` asks that agent's backend whether it is back (``Agent.probe``); ``say(agent,
    endpoint, text)`` tells the person running the run."""

    def __init__(self, wait: float, probe: Callable[[str], Awaitable[None]], say: Callable[[str, str, str], None]):
        self.wait = wait
        self._probe = probe
        self._say = say
        self._breakers: dict[str, Breaker] = {}

    def _breaker(self, endpoint: str) -> Breaker:
        return self._breakers.setdefault(endpoint, Breaker(endpoint))

    def failed(self, outage: BackendUnavailable) -> None:
        """A match was interrupted by ``outage``: open the breaker (once; later reports update the error)."""
        breaker = self._breaker(outage.endpoint)
        if breaker.silent_since is None:
            breaker.silent_since = trio.current_time()
        if not breaker.down:
            breaker.episode += 1
            if not breaker.gave_up:
                self._say(outage.agent, outage.endpoint, f"{outage}; matches that need it wait for it")
        breaker.failure = outage
        self._give_up_if_late(breaker)

    def asking(self, endpoint: str | None) -> int:
        """The episode a request to ``endpoint`` is sent in, for ``answered`` (0: it never failed)."""
        breaker = self._breakers.get(endpoint) if endpoint else None
        return breaker.episode if breaker is not None else 0

    def answered(self, endpoint: str | None, sent_in: int | None = None) -> None:
        """A real request to ``endpoint`` was answered: whatever the outage was, it is over, unless the
        request was sent before the endpoint last failed (``sent_in``, from ``asking``; None: not known)."""
        breaker = self._breakers.get(endpoint) if endpoint else None
        if breaker is None or breaker.gave_up:
            return
        if sent_in is not None and sent_in != breaker.episode:  # old news: it tells nothing of now
            return
        if breaker.down:
            self._back(breaker)
        breaker.silent_since = None

    def any_down(self, endpoints: Iterable[str]) -> bool:
        return any(self._breakers[e].down for e in endpoints if e in self._breakers)

    async def wait_for(self, endpoints: Iterable[str]) -> Breaker | None:
        """Return once every one of ``endpoints`` is up (None), or the first one given up on."""
        for endpoint in endpoints:
            breaker = self._breakers.get(endpoint)
            while breaker is not None and breaker.down and not breaker.gave_up:
                async with breaker.probing:
                    if breaker.down and not breaker.gave_up:
                        await self._probe_once(breaker)
            if breaker is not None and breaker.gave_up:
                return breaker
        return None

    def given_up(self) -> list[Outage]:
        return [Outage(agent=b.failure.agent, backend=b.failure.backend, endpoint=b.endpoint, error=b.failure.error)
                for b in self._breakers.values() if b.gave_up and b.failure is not None]

    async def _probe_once(self, breaker: Breaker) -> None:
        give_up_at = breaker.silent_since + self.wait
        await trio.sleep(max(0.0, min(breaker.pause, give_up_at - trio.current_time())))
        breaker.pause = min(2 * breaker.pause, LONGEST_PAUSE)
        failure, episode = breaker.failure, breaker.episode
        if failure is None:  # a real answer came while we paused
            return
        if trio.current_time() >= give_up_at:  # no time left for a probe to be answered in
            self._give_up_if_late(breaker)
            return
        with trio.move_on_at(give_up_at):
            try:
                await self._probe(failure.agent)
            except BackendUnavailable as exc:
                if breaker.down and breaker.episode == episode:  # else a real answer closed it meanwhile: that stands
                    breaker.failure = exc
            except Exception as exc:  # a probe that breaks proves nothing: still down, and the person is told why
                if breaker.down and breaker.episode == episode:
                    breaker.failure = BackendUnavailable(failure.agent, failure.backend, failure.endpoint,
                                                         f"the probe failed: {type(exc).__name__}: {exc}")
            else:
                if breaker.episode == episode:  # not if it failed anew while the probe was out: that is newer news
                    self._back(breaker)
                return
        self._give_up_if_late(breaker)

    def _back(self, breaker: Breaker) -> None:
        """Close the breaker, once: a probe and a real answer may both find it back."""
        failure = breaker.failure
        if failure is None:
            return
        breaker.failure, breaker.pause = None, FIRST_PAUSE
        self._say(failure.agent, breaker.endpoint, f"backend {failure.backend} at {breaker.endpoint} is back")

    def _give_up_if_late(self, breaker: Breaker) -> None:
        if (breaker.gave_up or breaker.failure is None or breaker.silent_since is None
                or trio.current_time() < breaker.silent_since + self.wait):
            return
        breaker.gave_up = True
        failure = breaker.failure
        self._say(failure.agent, breaker.endpoint,
                  f"{failure}; given up after {self.wait:g} s: its matches are left for the next `arena run`")
