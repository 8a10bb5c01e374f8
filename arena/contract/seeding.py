"""Seeds derived by hashing, so that a match's randomness never depends on
what else ran before it, concurrently with it, or in another process."""

from __future__ import annotations

import hashlib
import random


def derive(seed: int | str, *parts: object) -> int:
    return hashed(joined(seed, *parts))


def joined(*parts: object) -> str:
    """The text a seed is hashed from; a caller deriving many seeds may join their common start once."""
    return "\x1f".join(map(str, parts))


def hashed(text: str) -> int:
    return int.from_bytes(hashlib.blake2b(text.encode(), digest_size=8).digest(), "big")


def rng(seed: int | str, *parts: object) -> random.Random:
    return lazy_random(derive(seed, *parts))


def lazy_random(seed: int) -> random.Random:
    """What ``random.Random(seed)`` is, made without seeding it until something draws from it."""
    return _SeededOnFirstUse(seed)


def _seed_now(rng: random.Random) -> None:
    pending = rng.__dict__.pop("_pending_seed", None)
    if pending is not None:
        rng.__class__ = random.Random  # the same layout: only where these methods are looked up changes
        random.Random.seed(rng, pending)


class _SeededOnFirstUse(random.Random):
    """``random.Random(seed)``, seeded only when first drawn from: most strategies and games never
    draw, and seeding the Mersenne Twister (7 µs) was the dearest step of a scripted turn. Once
    seeded it becomes a plain ``random.Random``, so every draw after the first runs at full speed
    and gives exactly what ``random.Random(seed)`` would."""

    def __init__(self, seed: int):
        self._pending_seed = seed
        self.gauss_next = None

    # A method bound before the switch (``gauss`` keeps ``self.random``) still lands here: hence
    # the explicit base calls, which work whatever the class is by then.
    def random(self):
        _seed_now(self)
        return random.Random.random(self)

    def getrandbits(self, k):
        _seed_now(self)
        return random.Random.getrandbits(self, k)

    def randbytes(self, n):
        _seed_now(self)
        return random.Random.randbytes(self, n)

    def getstate(self):
        _seed_now(self)
        return random.Random.getstate(self)

    def setstate(self, state):
        self.__dict__.pop("_pending_seed", None)
        self.__class__ = random.Random
        random.Random.setstate(self, state)

    def seed(self, a=None, version=2):
        self.__dict__.pop("_pending_seed", None)
        self.__class__ = random.Random
        random.Random.seed(self, a, version)

    def __reduce__(self):  # a copy or a pickle is of the seeded generator, a plain random.Random
        _seed_now(self)
        return random.Random.__reduce__(self)
