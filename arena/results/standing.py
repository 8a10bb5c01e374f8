"""What a leaderboard stands on: how many of each agent's turns behind it were valid and how many
were defaulted, and a note where that makes the board hollow.

A defaulted turn is the game's move, not the agent's (its replies stayed invalid to the last
attempt, or none came in time): a mean made of defaults ranks the game's fallback, and a judging
game whose verdicts all defaulted leaves peer rank nothing to count. The rule, one for every board:

- a row stands mostly on defaults when more than half of its agent's turns behind it defaulted;
- a whole board does when more than half of all the turns behind it defaulted;
- a peer rank is left out when the run's reviewing games finished matches but gave no review.

Each case gets a note: under the table in a terminal, in ``leaderboard_notes`` of `arena rank
--json`, and in the report.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import TYPE_CHECKING

from pydantic import BaseModel

from arena.contract import plugins
from arena.contract.capabilities import ReportsReviews, Review, has
from arena.contract.errors import ArenaError
from arena.contract.runs import RunReader, TurnRow

if TYPE_CHECKING:
    from arena.rank.board import Leaderboard

MOSTLY = 0.5  # more than this share of the turns defaulted: the row (or board) stands mostly on defaults
DEFAULTED = "A turn defaults when its replies stay invalid to the last attempt, or none comes in time."


class BoardNote(BaseModel):
    """A note on one leaderboard: a payoff (or metric) table of one entry, or the peer rank."""

    board: str  # "payoff", another metric's name, or "peer_rank"
    group: str | None = None  # the scenario entry; None for the peer rank
    agents: list[str] = []  # the rows that stand mostly on defaults
    mostly_defaults: bool = False  # the whole board does
    left_out: bool = False  # a peer rank left out for want of reviews
    text: str


def share(part: int, whole: int) -> float | None:
    return part / whole if whole else None


def stands_on(turns: int, defaulted: int) -> dict:
    """A row's turns, its valid turns and both shares, as ``PayoffSummary`` and ``TurnShare`` hold them."""
    valid = max(turns - defaulted, 0)
    return {"turns": turns, "valid_turns": valid, "valid_share": share(valid, turns),
            "defaulted_share": share(defaulted, turns)}


def mostly_defaulted(turns: int, defaulted: int) -> bool:
    return turns > 0 and defaulted > MOSTLY * turns


def _counted(defaulted: int, turns: int) -> str:
    return f"{defaulted} of {turns} turn{'s' if turns != 1 else ''} defaulted"


def _mostly(named: list[tuple[str, int, int]]) -> str:
    """'x (6 of 6 turns defaulted) stands mostly on defaults', for one row or several."""
    who = ", ".join(f"{name} ({_counted(defaulted, turns)})" for name, defaulted, turns in named)
    return f"{who} {'stands' if len(named) == 1 else 'stand'} mostly on defaults"


def payoff_notes(rows: Iterable) -> list[BoardNote]:
    """One note per table (entry and metric) of ``PayoffSummary`` rows whose agents, or whose whole
    table, stand mostly on defaults; none for a table that stands on valid turns."""
    tables: dict[tuple[str, str], list] = defaultdict(list)
    for row in rows:
        tables[(row.group, row.metric)].append(row)
    notes = []
    for (group, metric), members in tables.items():
        roles = len({r.role for r in members}) > 1
        hollow = [(f"{r.agent} as {r.role}" if roles else r.agent, r.defaulted_turns, r.turns)
                  for r in members if mostly_defaulted(r.turns, r.defaulted_turns)]
        turns, defaulted = sum(r.turns for r in members), sum(r.defaulted_turns for r in members)
        whole = mostly_defaulted(turns, defaulted)
        if whole:
            text = (f"{group}: this table stands mostly on defaults ({_counted(defaulted, turns)}): its means rank "
                    "the game's default moves, not the agents' play." + (f" {_mostly(hollow)}." if hollow else ""))
        elif hollow:
            one = len(hollow) == 1
            text = (f"{group}: {_mostly(hollow)}: {'its mean is' if one else 'their means are'} the game's default "
                    f"move, not {'its' if one else 'their'} play.")
        else:
            continue
        text += f" {DEFAULTED}"
        agents = [r.agent for r in members if mostly_defaulted(r.turns, r.defaulted_turns)]
        notes.append(BoardNote(board=metric, group=group, agents=list(dict.fromkeys(agents)), mostly_defaults=whole,
                               text=text))
    return notes


# -- peer rank --------------------------------------------------------------------------------------------
def reviewing_groups(store: RunReader, reviews: Iterable[Review] = ()) -> dict[str, str]:
    """The entries (group → game) of the run's finished matches whose game reports reviews, or that
    gave some of ``reviews`` (a game no longer installed)."""
    gave = {r.match for r in reviews}
    games: dict[str, str] = {}
    found: dict[str, str] = {}
    for row in store.matches(status="finished"):
        games.setdefault(row.group, row.game)
        if row.key in gave:
            found[row.group] = row.game
    for group, game in games.items():
        try:
            if has(plugins.load("game", game), ReportsReviews):
                found[group] = game
        except (ArenaError, ImportError):  # not installed here: counted only when its reviews are
            continue
    return {group: found[group] for group in games if group in found}


def _turns_in(store: RunReader, groups: Iterable[str], turns: list[TurnRow] | None) -> tuple[list[TurnRow], int, int]:
    """The seats' turns in the finished matches of ``groups`` (from ``turns``, the store's ``turns()``
    when the caller has read them), and all their turns and defaulted ones."""
    groups = set(groups)
    found = [t for t in (store.turns() if turns is None else turns) if t.group in groups] if groups else []
    return found, sum(t.turns for t in found), sum(t.defaulted for t in found)


def stand_peer_rank(store: RunReader, board: Leaderboard, groups: Iterable[str],
                    turns: list[TurnRow] | None = None) -> list[BoardNote]:
    """Give the board what it stands on: each contestant's own turns (its answers and its verdicts)
    in the matches of ``groups``, the entries whose reviews it counts; and its notes, on the board
    (for a terminal) and returned (for ``leaderboard_notes``). ``turns``: the store's ``turns()``,
    when the caller has read them."""
    from arena.rank.board import TurnShare  # the board's module loads the numbers' libraries: only here

    turns, total, defaulted = _turns_in(store, groups, turns)
    by_agent: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for t in turns:
        by_agent[t.agent][0] += t.turns
        by_agent[t.agent][1] += t.defaulted
    board.stands_on = {name: TurnShare(**stands_on(*by_agent[name]), defaulted_turns=by_agent[name][1])
                       for name in board.contestants if name in by_agent}
    hollow = [n for n, s in board.stands_on.items() if mostly_defaulted(s.turns, s.defaulted_turns)]
    whole = mostly_defaulted(total, defaulted)
    named = _mostly([(n, board.stands_on[n].defaulted_turns, board.stands_on[n].turns) for n in hollow]) if hollow else ""
    if whole:
        text = (f"This peer rank stands mostly on defaults ({defaulted} of {total} turns in the reviewing matches "
                "defaulted): a defaulted verdict is no review, so it ranks on the few that were given."
                + (f" {named}." if named else ""))
    elif hollow:
        its = "its" if len(hollow) == 1 else "their"
        text = f"{named}: few of the answers and verdicts behind {its} place are {its} own."
    else:
        return []
    text += f" {DEFAULTED}"
    board.notes.append(text)
    return [BoardNote(board="peer_rank", agents=hollow, mostly_defaults=whole, text=text)]


def left_out_note(store: RunReader, groups: dict[str, str], turns: list[TurnRow] | None = None) -> BoardNote | None:
    """Why a run with no reviews has no peer rank, when its reviewing games (``groups``) finished
    matches; None when it has no reviewing game. ``turns`` as for ``stand_peer_rank``."""
    if not groups:
        return None
    _, total, defaulted = _turns_in(store, groups, turns)
    why = (f"; {defaulted} of {total} turns in their matches defaulted, and a defaulted verdict is no review. "
           f"{DEFAULTED}" if defaulted else ".")
    entries = ", ".join(group if group == game else f"{group} ({game})" for group, game in groups.items())
    return BoardNote(board="peer_rank", left_out=True, mostly_defaults=mostly_defaulted(total, defaulted),
                     text=f"No peer rank: the reviewing games of this run ({entries}) finished matches but gave no "
                          f"review to rank{why}")
