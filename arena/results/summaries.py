"""The summaries games declare of their own matches (``arena.contract.Summarized``), for any game.

Each game of the run's finished matches is loaded by its name; one that offers summaries is handed
the last notices of its matches that hold its ``summary_fields``, and returns its figures and
tables. Nothing here knows what a game's summary means: the CLI, ``arena rank --json`` and the
report show whatever tables come back.
"""

from __future__ import annotations

from typing import NamedTuple

from pydantic import TypeAdapter

from arena.contract import plugins
from arena.contract.capabilities import has
from arena.contract.summaries import Summarized, Summary
from arena.contract.runs import RunReader


def _summarized(name: str, problems: list[str]) -> type | None:
    """The game class when it is installed and declares summaries; a run of a game since
    uninstalled still shows its other results, and one whose package no longer imports says so."""
    try:
        game = plugins.load("game", name)
    except plugins.UnknownPlugin:
        return None
    except Exception as e:  # noqa: BLE001  (a plugin's import: a broken package costs its tables only)
        problems.append(f"game {name!r} could not be loaded to sum up its matches ({_said(e)}); "
                        "its summary tables are left out")
        return None
    return game if isinstance(game, type) and has(game, Summarized) else None


def _said(e: Exception) -> str:
    """An exception in a few words: its type and the first line of its message."""
    text = str(e).splitlines()[0] if str(e) else "no message"
    return f"{type(e).__name__}: {text}"


class Summaries(NamedTuple):
    found: list[Summary]
    problems: list[str]  # a game whose summaries failed, in a sentence: the rest of the results stand


def game_summaries(store: RunReader) -> Summaries:
    """Every summary of the run's games, game by game in the plan's order."""
    found: list[Summary] = []
    problems: list[str] = []
    for name in store.finished_games():
        game = _summarized(name, problems)
        if game is None:
            continue
        fields = getattr(game, "summary_fields", None)
        if not isinstance(fields, tuple) or not fields or not all(isinstance(f, str) and f for f in fields):
            problems.append(f"game {name!r} offers summaries but its summary_fields ({fields!r}) name no field of "
                            "its last notice's data to read them from (a tuple of names); its summary tables are left out")
            continue
        notices = list(store.final_notices(fields, game=name))
        if not notices:
            continue
        try:  # a plugin's code: whatever it does wrong costs its own tables only
            given = TypeAdapter(list[Summary]).validate_python(game.summaries(notices))
        except Exception as e:  # noqa: BLE001
            problems.append(f"game {name!r} could not sum up its {len(notices)} matches ({_said(e)}); "
                            "its summary tables are left out")
            continue
        found += given
    return Summaries(found, problems)


def summaries_json(summaries: Summaries) -> dict:
    """``arena rank --json``'s part: ``summaries`` (each summary's data by its name; two games giving
    one name are listed together), ``summary_tables`` (every table, as the CLI and report show them)
    and ``summary_problems``."""
    data: dict[str, list] = {}
    for summary in summaries.found:
        data.setdefault(summary.name, []).extend(summary.data)
    return {"summaries": data, "summary_tables": [t.model_dump() for s in summaries.found for t in s.tables],
            "summary_problems": summaries.problems}
