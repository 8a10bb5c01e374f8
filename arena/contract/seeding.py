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
    return random.Random(derive(seed, *parts))
