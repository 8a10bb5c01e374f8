"""The scripted backend: an agent that plays a named strategy, no model involved."""

from __future__ import annotations

import inspect
import random
from typing import Any

import trio
from pydantic import Field, ValidationError

from arena.contract import plugins
from arena.contract import Agent, AgentConfig, ConfigError, Problem, Strategy, Turn



def _seed_now(rng: random.Random) -> None:
    pending = rng.__dict__.pop("_pending_seed", None)
    if pending is not None:
        rng.__class__ = random.Random  # the same layout: only where these methods are looked up changes
        random.Random.seed(rng, pending)


class _SeededOnFirstUse(random.Random):
    """``random.Random(seed)``, seeded only when first drawn from: most strategies never draw, and
    seeding the Mersenne Twister (7 µs) was the dearest step of a scripted turn. Once seeded it
    becomes a plain ``random.Random``, so every draw after the first runs at full speed and gives
    exactly what ``random.Random(seed)`` would."""

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


class ScriptedConfig(AgentConfig):
    backend: str = "scripted"
    strategy: str = Field(description="A registered strategy (entry point group arena.strategies).")
    params: dict[str, Any] = Field(default_factory=dict, description="The strategy's own parameters.")
    delay: float = Field(0.0, ge=0, description="Seconds to wait before replying, to imitate latency.")


class ScriptedAgent(Agent):
    Config = ScriptedConfig

    def __init__(self, name: str, config: ScriptedConfig, services=None):
        super().__init__(name, config, services)
        self.strategy = self.check(config)
        # a plain-function strategy without a delay answers at once (until it hands back an awaitable)
        self._at_once = not config.delay and not inspect.iscoroutinefunction(self.strategy.reply)

    @classmethod
    def nested_params(cls, raw: dict) -> dict:
        try:
            return {"params": plugins.load("strategy", raw["strategy"]).Params}
        except (KeyError, TypeError, plugins.UnknownPlugin):
            return {}  # reported by check()

    @classmethod
    def check(cls, config: ScriptedConfig) -> Strategy:
        try:
            strategy_cls = plugins.load("strategy", config.strategy)
        except plugins.UnknownPlugin as exc:
            raise ConfigError([Problem(("strategy",), str(exc))]) from None
        try:
            params = strategy_cls.Params.model_validate(config.params)
        except ValidationError as exc:
            raise ConfigError.from_validation(exc, prefix=("params",)) from None
        return strategy_cls(params)

    def reply_now(self, turn: Turn) -> str | None:
        if not self._at_once:
            return None
        out = self.strategy.reply(turn, _SeededOnFirstUse(turn.seed))
        if inspect.isawaitable(out):  # it needs awaiting after all: from now on, asked through reply
            self._at_once = False
            if inspect.iscoroutine(out):
                out.close()
            return None
        return out

    async def reply(self, turn: Turn) -> str:
        if self.config.delay:
            await trio.sleep(self.config.delay)
        out = self.strategy.reply(turn, _SeededOnFirstUse(turn.seed))
        if inspect.isawaitable(out):
            out = await out
        return out

