"""The referee API: who decides that a match is over and what it scored."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .game import Game
    from .pool import MessagePool


class Referee(ABC):
    """Asked by the match loop after every round, and once at the end.

    Async because some referees (an LLM judge, a human) take time to decide.
    """

    @abstractmethod
    async def is_over(self, game: Game, pool: MessagePool, round: int) -> bool: ...

    @abstractmethod
    async def score(self, game: Game, pool: MessagePool) -> dict[str, float]: ...
