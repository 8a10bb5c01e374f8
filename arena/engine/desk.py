"""What a match lends its referees (the contract's ``Desk``): asking an agent that has no seat, and
posting a verdict. It is built from the parts of the match it needs and sees nothing else."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from arena.contract.agent import Agent
from arena.contract.errors import MatchSetupError
from arena.engine.anonymity import Filter
from arena.engine.pool import MessagePool
from arena.engine.turns import Asker

T = TypeVar("T")

# What an outside agent asked by a referee is called in events and calls: no game's role gives a seat
# this label (a judging game may have seats called "Judge"), so the two can always be told apart.
# Which judge it was is the ``agent`` its events and calls carry: a referee may ask several in one round.
JUDGE = "Referee's judge"


class MatchDesk:
    def __init__(self, agents: Mapping[str, Agent], asker: Asker, filter: Filter, pool: MessagePool,
                 post_verdict: Callable[[str, dict[str, Any]], object]):
        self._agents, self._asker, self._filter, self._pool = agents, asker, filter, pool
        self._post_verdict = post_verdict

    async def ask(self, agent: str, prompt: str, parse: Callable[[str], T], data: dict[str, Any] | None = None) -> T | None:
        """The agent's verdict under the rules of a seat's turn; None when no valid one came in time.

        What the agent raises goes through the referee, as from a seat: it is no verdict, and it
        ends the match (an unreachable backend interrupts it, to be played again)."""
        if agent not in self._agents:
            raise MatchSetupError(f"the referee asks agent {agent!r}, which the scenario does not define")
        round = self._pool.round
        if self._filter:  # the judge reads the seats' words: it must not learn who wrote them either
            prompt, data = self._filter.text(prompt)[0], self._filter.data(data)[0]
        turn = self._asker.turn(JUDGE, "judge", round, (), prompt, prompt_data=data)
        outcome = await self._asker.ask(self._agents[agent], turn, parse, lambda: None, name=agent)
        self._asker.taken(round, JUDGE, outcome)
        return outcome.action

    def post_verdict(self, text: str, data: dict[str, Any]) -> None:
        self._post_verdict(text, data)
