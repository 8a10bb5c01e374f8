"""A run's numbers in one structure: what `arena rank RUN_DIR --json` prints and the report shows.

Everything is computed from the store's rows (scores, troubled turns, reviews, calls), read as
it goes: no match record is built."""

from __future__ import annotations

from arena.results.listing import rescored_from
from arena.results.panels import panel_summaries
from arena.results.payoffs import PayoffSummary, role_tables, summarize
from arena.results.separability import payoff_separability
from arena.results.standing import BoardNote, left_out_note, payoff_notes, reviewing_groups, stand_peer_rank
from arena.results.summaries import game_summaries, summaries_json
from arena.results.usage import usage_by_agent
from arena.contract.runs import RunReader, ScoreRow, TurnRow


def peer_rank(store: RunReader, weighted: bool = False, **options):
    """The run's review tuples as a leaderboard, with what each row stands on, when its games produced
    any; ``options`` are ``arena.rank.leaderboard``'s (methods, reviewers, reference, bootstrap, ...)
    and ``style_control`` (``ranked``)."""
    return ranked(store, weighted, **options)[0]


def ranked(store: RunReader, weighted: bool = False, turns: list[TurnRow] | None = None,
           style_control: bool = False, **options) -> tuple:
    """(the peer rank or None, its notes): what it stands on when there is one (``standing``), why
    it is left out when the run's reviewing games gave no review. ``turns``: the store's ``turns()``,
    when the caller has read them; ``style_control``: add the style-controlled Bradley–Terry,
    measured on the answers the run kept (``arena.results.style``)."""
    from arena.rank import leaderboard
    from arena.rank.reviews import Reviews
    from arena.results.style import answer_styles

    rows = store.review_rows()
    groups = reviewing_groups(store, rows)
    if not rows:
        note = left_out_note(store, groups, turns)
        return None, [note] if note else []
    styles = answer_styles(store, rows) if style_control else None
    board = leaderboard(Reviews.from_rows(rows), weighted=weighted, styles=styles, **options)
    return board, stand_peer_rank(store, board, groups, turns)


def stood(store: RunReader, board, rows: list):
    """A board ranked from the run's review ``rows`` elsewhere (the report's weighted one), with what
    it stands on and its notes, as ``ranked`` gives them."""
    stand_peer_rank(store, board, reviewing_groups(store, rows))
    return board


def peer_rank_left_out(store: RunReader) -> BoardNote | None:
    """Why the run has no peer rank, when it has reviewing games and they gave no review; else None.
    The reviews are read only when the run has a reviewing game."""
    groups = reviewing_groups(store)
    return left_out_note(store, groups) if groups and not store.review_rows() else None


def rank_json(store: RunReader, weighted: bool = False, scores: list[ScoreRow] | None = None,
              style_control: bool = False, **options) -> dict:
    """``scores``: the store's ``scores()``, when the caller has read them already."""
    info = store.run_info()
    turns = list(store.turns())  # every seat's turns: how many, how many defaulted, invalid, late
    board, peer_notes = ranked(store, weighted, turns, style_control, **options)
    scores = list(store.scores()) if scores is None else scores  # read once: the payoffs and the role tables
    payoffs = summarize(scores, turns)
    metrics = metrics_json(store, turns, scores)
    others = [PayoffSummary(**row) for group in metrics.values() for name, found in list(group.items())[1:]
              for row in found["summary"]]  # the first metric is the payoff
    return {
        "peer_rank": None if board is None else board.model_dump(),
        "run": {"name": info.get("name"), "status": store.status(), "planned": info.get("planned"), **store.counts(),
                "rescored_from": rescored_from(info)},
        "payoffs": [r.model_dump() for r in payoffs],
        "role_tables": [t.model_dump() for t in role_tables(scores)],
        "metrics": metrics,
        # where a board stands mostly on defaults, or a peer rank is left out (arena.results.standing)
        "leaderboard_notes": [n.model_dump() for n in payoff_notes(payoffs) + payoff_notes(others) + peer_notes],
        # each payoff and metric board's separability, per entry and role (arena.results.separability)
        "payoff_separability": [b.model_dump() for b in payoff_separability(payoffs + others)],
        "stability": store.stability(),
        "usage": [u.model_dump() for u in usage_by_agent(store.calls())],
        "notes": store.notes(),  # what the run found about its endpoints: output modes, chat templates
        "panels": [p.model_dump() for p in panel_summaries(store)],  # judges' panels: each member and their kappa
        **summaries_json(game_summaries(store)),  # the tables games declare of their matches: none in most runs
    }


def metrics_json(store: RunReader, turns: list[TurnRow] | None = None, payoffs: list[ScoreRow] | None = None) -> dict:
    """Every metric the referees reported, by entry: its summary and role tables (the first is the payoff).

    ``payoffs``: the store's ``scores()``, when the caller has read them. A match's payoffs are its
    first metric's figures, so that metric is taken from them rather than read a second time."""
    turns = list(store.turns()) if turns is None else turns
    by_group: dict[str, list[ScoreRow]] = {}
    for row in payoffs or ():
        by_group.setdefault(row.group, []).append(row)
    out: dict = {}
    for group, names in store.metric_names().items():
        mine = [t for t in turns if t.group == group]
        out[group] = {}
        for place, name in enumerate(names):
            scores = by_group.get(group, []) if place == 0 and payoffs is not None else list(store.scores(name, group))
            out[group][name] = {"summary": [r.model_dump() for r in summarize(scores, mine, metric=name)],
                                "role_tables": [t.model_dump() for t in role_tables(scores, metric=name)]}
    return out
