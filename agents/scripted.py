"""The scripted backend: an agent that plays a named strategy, no model involved."""

from __future__ import annotations

import inspect
from typing import Any

import trio
from pydantic import Field, ValidationError

from arena.contract import plugins, seeding
from arena.contract import Agent, AgentConfig, ConfigError, Problem, Strategy, Turn


class ScriptedConfig(AgentConfig):
    backend: str = "scripted"
    strategy: str = Field(description="A registered strategy (entry point group arena.strategies).")
    params: dict[str, Any] = Field(default_factory=dict, description="The strategy's own parameters.")
    delay: float = Field(0.0, ge=0, description="Seconds to wait before replying, to imitate latency.")
    jitter: float = Field(0.0, ge=0, le=1, description=(
        "How much the wait varies, as a fraction of delay: each reply waits between delay × (1 − jitter) and "
        "delay × (1 + jitter), drawn from the turn's seed (the same run waits the same)."))


class ScriptedAgent(Agent):
    Config = ScriptedConfig

    def __init__(self, name: str, config: ScriptedConfig, services=None):
        super().__init__(name, config, services)
        self.strategy = self.check(config)
        # a plain-function strategy without a delay answers at once (until it hands back an awaitable)
        self._at_once = not config.delay and not inspect.iscoroutinefunction(self.strategy.reply)
        # The awaitable a plain function handed back when first asked in line: the reply that follows
        # awaits it instead of asking again, so every attempt calls the strategy once. Set at most
        # once per agent, since that call turns answering at once off.
        self._handed: tuple[Turn, Any] | None = None

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
        out = self.strategy.reply(turn, seeding.lazy_random(turn.seed))
        if inspect.isawaitable(out):  # it needs awaiting after all: from now on, asked through reply
            self._at_once = False
            self._handed = (turn, out)
            return None
        return out

    async def reply(self, turn: Turn) -> str:
        handed, self._handed = self._handed, None
        if handed is not None and handed[0] is turn:
            out = handed[1]  # no delay to wait: an agent with one never answers in line
        else:
            delay, jitter = self.config.delay, self.config.jitter
            if delay:
                if jitter:
                    delay *= seeding.rng(turn.seed, "latency").uniform(1 - jitter, 1 + jitter)
                await trio.sleep(delay)
            out = self.strategy.reply(turn, seeding.lazy_random(turn.seed))
        if inspect.isawaitable(out):
            out = await out
        return out

