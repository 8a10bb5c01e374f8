"""The agent protocol: given what a seat may see and what it is asked, return a reply."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

from pydantic import BaseModel, ConfigDict

from arena.contract.calls import Services
from arena.contract.errors import ArenaError
from arena.contract.messages import Turn


class AgentConfig(BaseModel):
    """Base for a backend's scenario parameters; unknown keys are errors."""

    model_config = ConfigDict(extra="forbid")


class FatalAgentError(ArenaError):
    """The agent cannot play at all (for example, a missing API key): the match fails.

    No exception from ``Agent.reply`` is ever taken for a move. ``BackendUnavailable``
    interrupts the match (it is replayed once the server is back); any other exception
    (a refused request, a bug) fails it with that error. Only a reply the game rejects
    is asked again, and only a reply that does not come in time gets the game's default.
    A reply too long to be read (``ReplyCut``) counts as one the game rejected.
    """


class ReplyCut(ArenaError):
    """A reply longer than the agent may send: reading (or generating) stopped where it passed the
    limit, so what came is no move and is never parsed, stored or cached. The match takes it as an
    invalid reply: the seat is asked again with ``reason``, then defaulted.

    ``limit``: the most characters a reply may have; ``seen``: how much had come when it stopped,
    in the unit it was counted in (bytes of the response, characters of the text)."""

    def __init__(self, limit: int, seen: int, unit: str = "characters", how: str = "seen"):
        self.limit, self.seen, self.unit = limit, seen, unit
        super().__init__(f"reply cut: longer than max_reply_chars ({limit:,} characters); {seen:,} {unit} {how}")

    @property
    def reason(self) -> str:
        """What the seat is told when it is asked again."""
        return f"Your reply was cut off unread: it ran past {self.limit:,} characters, the most a reply may have."


class Agent(ABC):
    """One configured player. Instances are shared by every match of a run, so
    ``reply`` must keep no per-match state: everything it needs is in the turn."""

    Config: ClassVar[type[AgentConfig]] = AgentConfig
    makes_calls: ClassVar[bool] = False  # True for backends that call a model (and may cost money)
    uses_terminal: ClassVar[bool] = False  # True for a person at this terminal: one process, and a terminal, are needed

    def __init__(self, name: str, config: AgentConfig, services: Services | None = None):
        self.name = name
        self.config = config
        self.services = services or Services()  # the run's cache, call log and limits; none when used alone

    @classmethod
    def nested_params(cls, raw: dict) -> dict[str, type[BaseModel]]:
        """Parts of a scenario's entry for this agent that another model validates (a strategy's
        ``params``), so that the scenario can resolve the file paths they mark (``path_field``)."""
        return {}

    @classmethod
    def check(cls, config: AgentConfig) -> None:
        """Deeper checks than the config model can make; raise ``ConfigError``. Must not
        open connections: ``arena validate`` calls it."""

    async def prepare(self) -> None:
        """Get ready to play (a client, a key, a model in memory); called once before a run's
        first match, so that what cannot work fails before anything is played. Raise
        ``FatalAgentError`` when the agent cannot play."""

    @abstractmethod
    async def reply(self, turn: Turn) -> str:
        """The seat's reply, within the time the match allows: the turn's deadline is trio's
        effective deadline. Raise ``BackendUnavailable`` when the server that would answer cannot
        be reached; a live model that is merely slow is cut off by the deadline."""

    def reply_now(self, turn: Turn) -> str | None:
        """The reply, when the agent has it without waiting on anything (a scripted strategy that is
        a plain function of the turn), else None: the engine then awaits ``reply``. A reply given here
        is taken in line, with no task or timer of its own (it has nothing to wait for), which is
        most of what a turn costs when the agents are instant."""
        return None

    def turn_timeout(self, match_timeout: float) -> float:
        """Seconds this agent has for a turn, given the match's ``turn_timeout`` (which is the
        default). A person typing is not held to a model's deadline: the human backend gives its own."""
        return match_timeout

    def endpoint(self) -> str | None:
        """Where this agent's requests go (a URL), when that place can be down. Agents that share an
        endpoint share its outages: while it is down, no match that needs it starts. None: the agent
        relies on nothing that can be down."""
        return None

    async def probe(self) -> None:
        """After an outage: return when the endpoint answers again, raise ``BackendUnavailable`` when
        it still does not. Make it cheap, and make it prove what a turn needs (a model backend sends
        the smallest chat request, not a model listing that a hung chat path still answers): a run
        probes while matches wait."""

    def cost_of(self, prompt_tokens: int, completion_tokens: int, extra_prices: dict[str, tuple[float, float]]) -> float | None:
        """USD for that many tokens, or None when unknown. Agents that call no model cost nothing."""
        return 0.0

    async def aclose(self) -> None:
        """Release clients and connections at the end of a run."""
