"""The core names no built-in game: everything under ``arena/`` works for a game it has never heard
of, so that a third-party game gets what a built-in one does (its summary tables included). The
built-in games are those ``pyproject.toml`` registers under ``arena.games``; their names and
module names are looked for in every source file of the core, code, strings and comments alike."""

from __future__ import annotations

import re
import tomllib

from helpers import ROOT

SUFFIXES = (".py", ".js", ".html", ".css")


def built_in_names() -> set[str]:
    """The registered game names and the modules they live in (``arena.games.NAME``)."""
    games = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]["entry-points"]["arena.games"]
    names = set(games)
    for target in games.values():
        module = target.split(":")[0].split(".")
        assert module[:2] == ["arena", "games"], target
        names.add(module[2])
    return names


def offences(text: str, names: set[str]) -> list[str]:
    """Where ``text`` names one of ``names``. A name with an underscore (public_goods) is a game's
    wherever it stands. A one-word name (translation) is also a word of prose, so it counts only
    where code names it: quoted alone (``"translation"``) or as a module path (``arena.games.translation``)."""
    found = []
    for name in sorted(names):
        word = re.escape(name)
        pattern = (rf"(?<![\w]){word}(?![\w])" if "_" in name
                   else rf"\bgames\.{word}\b|(?<=[\"']){word}(?=[\"'])")
        found += [f"line {text.count(chr(10), 0, m.start()) + 1}: {m.group(0)}" for m in re.finditer(pattern, text)]
    return found


def test_the_check_finds_a_game_named_and_lets_prose_be():
    names = {"public_goods", "translation", "idiom_solitaire"}
    assert offences('if spec.game == "public_goods":\n    pass', names) == ["line 1: public_goods"]
    assert offences("from arena.games.translation import X", names) == ["line 1: games.translation"]
    assert offences("if game == 'translation':", names) == ["line 1: translation"]
    assert offences("# seats of idiom_solitaire\n", names) == ["line 1: idiom_solitaire"]
    assert offences("a translation's chrF; public goods; idiom_solitaires_x; my_public_goods", names) == []


def test_the_built_in_games_are_read_from_pyproject():
    names = built_in_names()
    assert {"public_goods", "pairwise_review", "translation"} <= names


def test_no_module_of_the_core_names_a_built_in_game():
    names = built_in_names()
    core = ROOT / "arena"
    found = {}
    for path in sorted(core.rglob("*")):
        if path.suffix in SUFFIXES and path.is_file():
            hits = offences(path.read_text(encoding="utf-8"), names)
            if hits:
                found[str(path.relative_to(ROOT))] = hits
    assert not found, f"the core names built-in games: {found}"
