"""The game plugin API: what a game must say so the engine can run it."""

from __future__ import annotations

import functools
import random
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from pydantic import BaseModel, ConfigDict

from arena.contract.errors import ArenaError

if TYPE_CHECKING:
    import networkx as nx  # imported when a graph is first built: reading a run needs no graph library


class NoParams(BaseModel):
    model_config = ConfigDict(extra="forbid")


class InvalidReply(ArenaError):
    """Raised by ``Game.parse``; the message is shown to the seat when it is asked again."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@functools.lru_cache(maxsize=256)
def everyone_hears_everyone(seats: tuple[str, ...]) -> "nx.DiGraph":
    """The hearing graph in which every seat receives what every other seat says. Frozen and
    shared by every match with this seating: building a graph each round cost more than the round."""
    import networkx as nx

    return nx.freeze(nx.complete_graph(seats, create_using=nx.DiGraph))


@functools.lru_cache(maxsize=256)
def nobody_hears_anyone(seats: tuple[str, ...]) -> "nx.DiGraph":
    """The hearing graph in which replies stay private (the referee may still report on them);
    frozen and shared like ``everyone_hears_everyone``."""
    import networkx as nx

    return nx.freeze(nx.empty_graph(seats, create_using=nx.DiGraph))


class Notice(BaseModel):
    """Something the referee tells some seats when a round closes."""

    model_config = ConfigDict(frozen=True)

    to: tuple[str, ...]
    text: str
    data: dict[str, Any] | None = None


def example_prose(words: int, topic: str = "the task") -> str:
    """Plain sentences of about ``words`` words about ``topic``: the body of an example reply whose
    content does not matter, only its length (see ``Game.example_reply``)."""
    sentences = [f"Looking at {topic}, the first thing to weigh is whether each claim is supported.",
                 "Some points are stated clearly and follow from what was given, which counts in their favour.",
                 "Others are vague or leave out a step, and a careful reader would ask for more.",
                 "On balance the stronger parts outweigh the weaker ones, though not by a wide margin."]
    out: list[str] = []
    while sum(len(s.split()) for s in out) < words:
        out.append(sentences[len(out) % len(sentences)])
    return " ".join(out)


class Game(ABC):
    """Rules of one game. One instance plays one match.

    A game is plain deterministic Python: given its params, its seats, its RNG and
    the actions it is handed, it always does the same thing. It never talks to an
    agent; the match loop does that and hands it parsed actions.

    Subclasses set ``Params`` (a pydantic model), ``min_seats``/``max_seats`` and
    implement the abstract methods. A game's name is its entry point's name. Seats are labelled by role: the engine
    asks ``seat_roles`` for each seat's role and numbers seats sharing a role
    ("Player 1", "Player 2"); a role held by a single seat is its own label.

    What a game offers beyond its rules (something to judge, code to run, reviews for peer
    rank, cases to play on) is a capability, defined in ``arena.contract.capabilities``.
    """

    description: ClassVar[str] = ""
    Params: ClassVar[type[BaseModel]] = NoParams
    Action: ClassVar[type[BaseModel] | None] = None  # the shape of a reply, for backends with structured output
    min_seats: ClassVar[int] = 2
    max_seats: ClassVar[int | None] = None
    default_referee: ClassVar[str | tuple[str, ...]] = "rules"  # one referee, or several (the first gives the payoff)
    # Roles whose seats a tournament's role swap passes agents through; a seat of another role keeps
    # the agent listed for it (a judge is never made a contestant). None: every role takes part.
    rotating_roles: ClassVar[tuple[str, ...] | None] = None

    def __init__(self, params: BaseModel, seats: Sequence[str], roles: Mapping[str, str], rng: random.Random):
        self.params = params
        self.seats = tuple(seats)
        self.roles = dict(roles)
        self.rng = rng

    # -- seats -----------------------------------------------------------------
    @classmethod
    def seat_roles(cls, params: BaseModel, n_seats: int) -> list[str]:
        """The role of each seat position. Symmetric games keep the default."""
        return ["Player"] * n_seats

    @classmethod
    def seat_count_problem(cls, n_seats: int) -> str | None:
        """What is wrong with a table of ``n_seats`` for this game's ``min_seats``/``max_seats``
        ("needs at least 2 players"), or None. The one check of the seat count: ``arena validate``
        and the match both ask it, and each says where the count came from."""
        low, high = cls.min_seats, cls.max_seats
        if n_seats >= low and (high is None or n_seats <= high):
            return None
        wanted = f"at least {low}" if high is None else (str(low) if low == high else f"{low} to {high}")
        return f"needs {wanted} players"

    # -- what seats are told -----------------------------------------------------
    @abstractmethod
    def rules(self, seat: str) -> str:
        """The rules text this seat reads before round 1."""

    def rules_data(self, seat: str) -> dict[str, Any] | None:
        """The rules in structured form, for scripted agents."""
        return None

    @abstractmethod
    def prompt(self, seat: str, round: int) -> str:
        """What the seat is asked to do this round."""

    def prompt_data(self, seat: str, round: int) -> dict[str, Any] | None:
        """The prompt's facts in structured form, for scripted and synthetic agents; models see only the text."""
        return None

    def history(self, seat: str, round: int, messages: tuple) -> tuple:
        """What of its history a seat is shown with this round's prompt (default: all it may see).
        A game whose turns must be independent (a judge's k samples) shows less."""
        return messages

    @classmethod
    def seat_problem(cls, params: BaseModel, n_seats: int) -> str | None:
        """Why ``n_seats`` seats cannot play with these params (beyond min/max seats), or None."""
        return None

    @classmethod
    def rounds_needed(cls, params: BaseModel, n_seats: int) -> int | None:
        """The most rounds a match with these params can take, when the rules fix it (None: they
        do not). ``arena validate`` checks it against ``max_rounds``; the live view shows turn k of n."""
        return None

    def action_schema(self) -> dict[str, Any] | None:
        """The JSON schema of a valid reply, for backends that can hold a model's output to it (None:
        the game declares none). Default: the ``Action`` model's. A game whose valid moves depend on
        its params narrows the schema to them here, so that constrained decoding can only write moves
        the parser accepts; the parser still judges every reply. Called once per match: cache it."""
        return None if self.Action is None else _model_schema(self.Action)

    def turn_schema(self, seat: str, round: int) -> dict[str, Any] | None:
        """The JSON schema of this seat's reply this round (None: a free-text turn). Default: the game's
        ``action_schema`` for every turn. A game whose turns differ (an answer in prose, then a verdict)
        says so per turn; its ``parse`` takes a reply in that shape as well as in plain text, since a
        backend that cannot hold the model to the schema only describes it. Called once per turn: cache it."""
        return self.action_schema()

    def reply_text(self, seat: str, round: int, reply: str) -> str:
        """The reply as a person reads it, for the transcript and the seats that hear it (default: as
        given). A game whose turn has a schema turns a JSON reply into the text it would have asked for
        in plain words, so the pool, the report and the other models read prose, not JSON."""
        return reply

    # -- who acts and who hears whom ---------------------------------------------
    def speakers(self, round: int) -> list[str]:
        """Seats asked to act this round, all at once. Default: every seat."""
        return list(self.seats)

    def hears(self, round: int) -> nx.DiGraph:
        """Edge ``a -> b``: seat ``b`` receives what seat ``a`` says this round.

        Default: everyone hears everyone. A game where replies are private
        returns a graph without edges.
        """
        return everyone_hears_everyone(self.seats)

    # -- actions -----------------------------------------------------------------
    @abstractmethod
    def parse(self, seat: str, reply: str, round: int) -> Any:
        """Turn the reply ``seat`` gave in ``round`` into an action, or raise ``InvalidReply(reason)``.

        ``round`` is the round being answered (the one ``speakers`` and ``prompt`` were asked
        about): a game whose replies change shape from one phase to the next reads its phase from
        it, never from what its state happens to hold."""

    @abstractmethod
    def default_action(self, seat: str, round: int) -> Any:
        """The action taken for a seat that gave no valid reply in time."""

    def example_reply(self, seat: str, round: int) -> str | None:
        """A valid reply this seat might give now, about as long as a model's would, for
        ``arena run --dry-run``: it plays a match on these replies to count what a run will ask.
        Where the replies decide how long a match lasts, play it the long way (reviewers who keep
        disagreeing, a chain that goes on), so the estimate errs towards cost. None: no idea (the
        dry run replies "" and the turn takes the default)."""
        return None

    @abstractmethod
    def apply(self, round: int, actions: Mapping[str, Any]) -> list[Notice]:
        """Apply one round's actions; return what the referee tells seats about it."""

    @abstractmethod
    def is_over(self, round: int) -> bool:
        """Called after round ``round`` is applied."""

    @abstractmethod
    def payoffs(self) -> dict[str, float]:
        """Each seat's score once the game is over."""

    def metrics(self) -> dict[str, dict[str, float]]:
        """Further per-seat figures the rules produce besides the payoff (metric -> seat -> value),
        reported beside it: an idiom game's hits, a translation's chrF."""
        return {}


@functools.cache
def _model_schema(model: type[BaseModel]) -> dict[str, Any]:
    return model.model_json_schema()
