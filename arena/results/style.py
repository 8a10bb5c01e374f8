"""The style of the answers a run's reviews compare, for style control (``arena.rank.style``).

A game that reports reviews names, in ``answers_field``, the field of its last notice's data that
holds the answers it had compared, by seat label (or by source name for answers no seat wrote).
Each review's two contestants are looked up there in the review's own match.
"""

from __future__ import annotations

from arena.contract import plugins
from arena.contract.capabilities import Review
from arena.contract.errors import ArenaError
from arena.contract.runs import RunReader
from arena.rank.reviews import ReviewError
from arena.rank.style import FEATURES, AnswerStyles, measure


def answer_fields(store: RunReader) -> dict[str, str]:
    """game -> the field of its last notice that keeps its answers, for the run's games that keep them."""
    fields: dict[str, str] = {}
    for game in store.finished_games():
        try:
            found = getattr(plugins.load("game", game), "answers_field", None)
        except (ArenaError, ImportError):  # not installed here: its answers cannot be found
            continue
        if found:
            fields[game] = found
    return fields


def answer_styles(store: RunReader, reviews: list[Review]) -> AnswerStyles:
    """Each compared answer's style, measured from the texts the run kept; a ReviewError that says
    what is missing when the run's games do not keep their answers."""
    fields = answer_fields(store)
    if not fields:
        games = ", ".join(store.finished_games()) or "none"
        raise ReviewError(f"--style-control needs the texts of the answers the reviews compare, and this run's games "
                          f"({games}) do not keep them (a game names them with answers_field)")
    texts: dict[tuple[str, str], str] = {}  # (match key, contestant) -> the answer
    for game, name in fields.items():
        for notice in store.final_notices((name,), game):
            agents = {seat.label: seat.agent for seat in notice.seats}
            answers = notice.data.get(name)
            if isinstance(answers, dict):
                texts.update(((notice.key, agents.get(who, who)), str(text)) for who, text in answers.items())
    styles = AnswerStyles(features=FEATURES, source="the run's kept answers")
    for review in reviews:
        for who in (review.a, review.b):
            text = texts.get((review.match, who))
            if text is not None:
                styles.values[(review.question, who, review.match, review.repeat)] = measure(text)
    return styles
