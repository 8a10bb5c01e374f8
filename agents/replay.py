"""The replay backend: a seat that gives, turn by turn, the replies a record holds.

The record is a finished Arena run (its folder) or a JSONL file of replies (``agents/replay_record.py``).
A turn is looked up by the match's identity, the seat's role and the round (and the attempt, so that a
reply the game once refused is refused again), never by the agent's name. A turn the record does not
hold is an error naming the match and the turn, unless a ``fallback`` agent is configured to answer it.
A recorded turn that got no reply in time waits for the turn's deadline, as it did.
"""

from __future__ import annotations

from typing import Any, Literal

import trio
from pydantic import Field, ValidationError

from arena.contract import Agent, AgentConfig, ConfigError, FatalAgentError, Problem, Turn, path_field
from arena.contract import plugins

from .replay_record import TIMED_OUT, LinesRecord, RecordError, RunRecord, read_record


class ReplayConfig(AgentConfig):
    backend: str = "replay"
    record: str = path_field(description="A run folder, or a JSONL file of {case, role or seat, round, reply} lines "
                             "({question_id, text} answer files work as they are), relative to the scenario file.")
    model: str | None = Field(None, description="The model that wrote the record: the anonymity filter hides its "
                              "name from the other seats as it would the live agent's.")
    stands_in: dict[str, str] = Field(default_factory=dict, description=(
        "Agents of this run that took the place of the record's (new name -> recorded name), so that a match with "
        "them is the recorded match they replaced (`arena rescore --judge` writes it)."))
    match_by: Literal["table", "role"] = Field("table", description=(
        "table: a turn replays the recorded match with the same seating; role: the one recorded match that seated "
        "the same places in the turn's role, whoever else sat there (for seats whose replies do not depend on the "
        "others, such as contestants' answers re-judged by a panel of another size)."))
    fallback: dict[str, Any] | None = Field(None, description="An agent (backend and its parameters) that answers the "
                                            "turns the record does not hold; without one such a turn fails its match.")


class ReplayAgent(Agent):
    Config = ReplayConfig

    def __init__(self, name: str, config: ReplayConfig, services=None):
        super().__init__(name, config, services)
        self.fallback = self._fallback(name, config, services)
        self._record: RunRecord | LinesRecord | None = None

    @classmethod
    def nested_params(cls, raw: dict) -> dict:
        """The fallback's own paths (a local model's file) are read from the scenario's folder too."""
        fallback = raw.get("fallback")
        try:
            return {"fallback": plugins.load("agent backend", fallback["backend"]).Config}
        except (KeyError, TypeError, plugins.UnknownPlugin):
            return {}  # reported by check()

    @classmethod
    def check(cls, config: ReplayConfig) -> None:
        if config.fallback is not None:
            cls._fallback_config(config.fallback)

    @staticmethod
    def _fallback_config(raw: dict[str, Any]):
        name = raw.get("backend")
        if name == "replay":
            raise ConfigError([Problem(("fallback", "backend"), "a fallback that replays would have nothing to add")])
        try:
            backend = plugins.load("agent backend", name)
        except (plugins.UnknownPlugin, TypeError) as exc:
            raise ConfigError([Problem(("fallback", "backend"), str(exc))]) from None
        try:
            config = backend.Config.model_validate(raw)
        except ValidationError as exc:
            raise ConfigError.from_validation(exc, prefix=("fallback",)) from None
        try:
            backend.check(config)
        except ConfigError as exc:
            raise exc.prefixed(("fallback",)) from None
        return backend, config

    @classmethod
    def _fallback(cls, name: str, config: ReplayConfig, services) -> Agent | None:
        if config.fallback is None:
            return None
        backend, fallback_config = cls._fallback_config(config.fallback)
        return backend(name, fallback_config, services)

    def record(self) -> RunRecord | LinesRecord:
        if self._record is None:
            self._record = read_record(self.config.record)
        return self._record

    async def prepare(self) -> None:
        try:
            self.record()  # a record that cannot be read stops the run before anything is played
        except RecordError as exc:
            raise FatalAgentError(f"agent {self.name!r} cannot replay: {exc}") from None
        if self.fallback is not None:
            await self.fallback.prepare()

    def reply_now(self, turn: Turn) -> str | None:
        try:
            # None: the recorded turn timed out, which `reply` waits out
            return self.record().find(turn, self.config.stands_in, self.config.match_by == "role")
        except RecordError:
            return None  # `reply` asks the fallback, or says what is missing

    async def reply(self, turn: Turn) -> str:
        try:
            reply = self.record().find(turn, self.config.stands_in, self.config.match_by == "role")
        except RecordError:
            if self.fallback is None:
                raise
            return await self.fallback.reply(turn)
        if reply is TIMED_OUT:
            await trio.sleep_forever()  # the turn's deadline ends it, as it ended the recorded one
        return reply

    def endpoint(self) -> str | None:
        return None if self.fallback is None else self.fallback.endpoint()

    async def probe(self) -> None:
        if self.fallback is not None:
            await self.fallback.probe()

    def cost_of(self, prompt_tokens: int, completion_tokens: int, extra_prices) -> float | None:
        return 0.0 if self.fallback is None else self.fallback.cost_of(prompt_tokens, completion_tokens, extra_prices)

    async def aclose(self) -> None:
        if self.fallback is not None:
            await self.fallback.aclose()
