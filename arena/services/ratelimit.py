"""Limits on calls to one endpoint: calls in flight, requests and tokens per minute."""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass

import trio

WINDOW = 60.0


@dataclass
class Reservation:
    """A request counted against the per-minute limits; set ``tokens`` to what it really used."""

    at: float
    tokens: int


class CallLimits:
    def __init__(self, calls: int | None = None, rpm: int | None = None, tpm: int | None = None):
        self._in_flight = trio.CapacityLimiter(calls) if calls else None
        self.rpm, self.tpm = rpm, tpm
        self._sent: deque[Reservation] = deque()  # the last minute's requests
        self._lock = trio.Lock()

    async def _admit(self, tokens: int) -> Reservation:
        async with self._lock:  # first come, first served
            while True:
                now = trio.current_time()
                while self._sent and now - self._sent[0].at >= WINDOW:
                    self._sent.popleft()
                used = sum(r.tokens for r in self._sent)
                fits_requests = self.rpm is None or len(self._sent) < self.rpm
                # a request larger than the whole budget still goes, alone, rather than never
                fits_tokens = self.tpm is None or used + tokens <= self.tpm or not self._sent
                if fits_requests and fits_tokens:
                    reservation = Reservation(now, tokens)
                    if self.rpm is not None or self.tpm is not None:
                        self._sent.append(reservation)
                    return reservation
                await trio.sleep(max(0.01, self._sent[0].at + WINDOW - now))

    @asynccontextmanager
    async def slot(self, tokens: int) -> AsyncIterator[Reservation]:
        if self._in_flight is None:
            yield await self._admit(tokens)
            return
        async with self._in_flight:
            yield await self._admit(tokens)
