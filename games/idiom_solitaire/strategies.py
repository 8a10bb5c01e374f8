"""Scripted idiom-solitaire players: a full or a limited vocabulary."""

from __future__ import annotations

import random

from pydantic import Field

from arena.contract import Strategy, StrategyParams, Turn



class IdiomPlayerParams(StrategyParams):
    vocabulary: int | None = Field(None, ge=1, description="Idioms it knows, drawn once with `seed` (default: all).")
    seed: int = Field(0, description="Which idioms a limited vocabulary holds.")


class IdiomPlayer(Strategy):
    """Plays an unused idiom it knows that connects; with none, it says one that does not (and loses)."""

    Params = IdiomPlayerParams

    def __init__(self, params: IdiomPlayerParams):
        super().__init__(params)
        self._known: frozenset[str] | None = None

    def known(self) -> frozenset[str]:
        if self._known is None:
            from arena.games.idiom_solitaire import dictionary

            idioms = sorted(dictionary()[0])
            if self.params.vocabulary is not None:
                idioms = random.Random(self.params.seed).sample(idioms, min(self.params.vocabulary, len(idioms)))
            self._known = frozenset(idioms)
        return self._known

    def reply(self, turn: Turn, rng: random.Random) -> str:
        from arena.games.idiom_solitaire import successors

        data = turn.prompt_data or {}
        last, used = data.get("last", ""), set(data.get("used", []))
        options = sorted(i for i in successors(last[-1], data.get("homophone", False)) if i in self.known() and i not in used)
        if options:
            return rng.choice(options)
        return sorted(self.known())[0]  # out of ideas: a move that does not connect
