"""The report's sections, as HTML: leaderboards, figures, reviewers, roles, cost, transcripts.
A section with nothing to show is the empty string: the page leaves it, and its link, out.

Every text that comes from the run (agent names, groups, model names) goes through
``escape``; the figures come from svg.py, which escapes its own labels.
"""

from __future__ import annotations

from html import escape

from . import svg
from ..rank.places import competition_ranks
from ..rank.separability import describe, separability
from ..results.usage import dollars, known_sum
from .figures import METHOD_NAMES
from .svg import fmt


def _cell(value, cls: str = "") -> str:
    attr = f' class="{cls}"' if cls else ""
    return f"<td{attr}>{escape(str(value))}</td>"


def table(headers: list[str], rows: list[list], numeric_from: int = 1, row_classes: list[str] | None = None,
          attrs: str = "") -> str:
    head = "".join(f'<th{" class=num" if i >= numeric_from else ""}>{escape(h)}</th>' for i, h in enumerate(headers))
    body = []
    for r, row in enumerate(rows):
        cls = f' class="{row_classes[r]}"' if row_classes and row_classes[r] else ""
        cells = "".join(_cell(v, "num" if i >= numeric_from else ("name" if i == numeric_from - 1 else ""))
                        for i, v in enumerate(row))
        body.append(f"<tr{cls}>{cells}</tr>")
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def section(anchor: str, title: str, content: str) -> str:
    return f'<section id="{anchor}"><h2>{escape(title)}</h2>{content}</section>'


def note(text: str) -> str:
    return f'<p class="note">{escape(text)}</p>'


def warning(text: str) -> str:
    """A note a reader must see before trusting a board: it stands mostly on defaults, or is left out."""
    return f'<p class="note warning" data-note="standing">{escape(text)}</p>'


def _tied(ranks: list[int]) -> bool:
    return len(set(ranks)) < len(ranks)


TIES = "Equal scores share a rank (1, 2, 2, 4)."


def turn_share(count: int, share: float | None) -> str:
    """A count of turns with its share of the agent's turns: '4 (67%)'; the count alone when none were counted."""
    return str(count) if share is None else f"{count} ({share:.0%})"


def _board(board: dict, heading: str, key: str) -> str:
    """One table (a column pair per method, rows in the first method's order, ranked as it ranks:
    equal scores share a place, then, for a run's board, each contestant's own turns in the
    reviewing matches) and a figure per method."""
    methods = board["methods"]
    stands_on = board.get("stands_on")
    first = methods[0]
    order = sorted(first["scores"], key=lambda c: (first["rank"][c], c))
    headers, figures = ["Rank", "Contestant"], []
    for result in methods:
        title = ("weighted " if result["weighted"] else "") + METHOD_NAMES[result["method"]]
        headers += [title, "95% interval"] + (["spread over orders"] if result.get("spread") else [])
        digits = 3 if result["method"] == "winrate" else 0
        ranked = sorted(result["scores"], key=lambda c: (result["rank"][c], c))
        low, high = result["low"] or {}, result["high"] or {}  # no intervals with --bootstrap 0
        figures.append(f'<div class="figure-box" data-figure="intervals"><h4>{escape(title)}</h4>'
                       + svg.intervals([(n, result["scores"][n], low.get(n, result["scores"][n]),
                                         high.get(n, result["scores"][n])) for n in ranked],
                                       digits, f"{title} with 95% intervals", compact=True) + "</div>")
    rows = []
    for name in order:
        row = [first["rank"][name], name]
        for result in methods:
            digits = 3 if result["method"] == "winrate" else 0
            interval = "—" if result["low"] is None else \
                f"[{fmt(result['low'][name], digits)}, {fmt(result['high'][name], digits)}]"
            row += [fmt(result["scores"][name], digits), interval]
            if result.get("spread"):
                row.append(f"±{result['spread'][name]:.0f}")
        if stands_on is not None:
            found = stands_on.get(name)
            row += ["—", "—"] if found is None else [turn_share(found["defaulted_turns"], found["defaulted_share"]),
                                                    turn_share(found["valid_turns"], found["valid_share"])]
        rows.append(row)
    if stands_on is not None:
        headers += ["Defaulted", "Valid"]
    ranks = [first["rank"][n] for n in order]
    what = note(f"{board['reviews']} reviews of {len(board['contestants'])} contestants by "
                f"{', '.join(board['reviewers'])}; 95% bootstrap intervals, questions resampled; ranked by "
                f"{METHOD_NAMES[first['method']]}." + (f" {TIES}" if _tied(ranks) else "")
                + (" Defaulted and valid turns: each contestant's own turns (answers and verdicts) in the reviewing "
                   "matches, with their shares." if stands_on is not None else ""))
    warnings = "".join(warning(text) for text in board.get("notes") or ()) + _weight_check(board.get("weight_check"))
    apart = "".join(f'<div data-separability="{result["method"]}">'
                    + "".join(note(f"{METHOD_NAMES[result['method']]}: {line}")
                              for line in describe(result["separability"], 3 if result["method"] == "winrate" else 0))
                    + "</div>" for result in methods if result.get("separability"))
    # a column pair per method and the turns behind each row: wider than the page with many methods, so it scrolls
    return (f"<h3>{escape(heading)}</h3>" + what + warnings + '<div class="scroll">'
            + table(headers, rows, numeric_from=2, row_classes=["top" if r == 1 else "" for r in ranks],
                    attrs=f' class="board" data-board="{key}" data-method="{first["method"]}"')
            + "</div>" + apart + '<div class="pair">' + "".join(figures) + "</div>")


def _weight_check(check: dict | None) -> str:
    """A weighted board's check of its assumption (arena.rank.weight_check): each weighed reviewer's
    agreement beside its weights, and the rank correlation between them."""
    if not check:
        return ""
    methods = list(check["weights"])
    rows = [[r["reviewer"], r["examples"], fmt(r["agreement"], 3), *(fmt(check["weights"][m][r["reviewer"]], 3) for m in methods)]
            for r in sorted(check["reviewers"], key=lambda r: (-(r["agreement"] or 0.0), r["reviewer"]))]
    if check["holds"] is None:
        verdict = f"Not checked: {check['reason']}."
    else:
        rho = ", ".join(f"{METHOD_NAMES[m]} {c:+.2f}" for m, c in check["correlation"].items() if c is not None)
        verdict = (f"Spearman between weight and agreement: {rho}; the assumption "
                   f"{'holds' if check['holds'] else 'fails'} (it holds at {check['threshold']:g} or more).")
    return (f'<div class="weight-check" data-holds="{str(check["holds"]).lower()}">'
            + note(f"Weighting assumes that the reviewers who score best as contestants judge best. Each weighed "
                   f"reviewer's agreement with {check['against']} beside its weights. {verdict}")
            + table(["Reviewer", "Examples", "Agreement", *(f"{METHOD_NAMES[m]} weight" for m in methods)], rows)
            + "</div>")


def _metric_title(rank: dict, group: str, metric: str) -> str:
    """'payoff', 'payoff (judge)' when the payoff is a named metric, or another metric's name."""
    found = list((rank.get("metrics") or {}).get(group, {})) or ["payoff"]
    return f"payoff ({found[0]})" if metric == "payoff" and found[0] != "payoff" else metric


def _payoffs(rank: dict, rows: list[dict], key: str = "payoffs") -> str:
    parts = []
    for group in dict.fromkeys(r["group"] for r in rows):
        members = [r for r in rows if r["group"] == group]
        roles = list(dict.fromkeys(r["role"] for r in members))
        what = _metric_title(rank, group, members[0].get("metric", "payoff"))
        for role in roles:
            mine = [r for r in members if r["role"] == role]
            title = f"{group}: {what}" + (f", as {role}" if len(roles) > 1 else "")
            places = competition_ranks({r["agent"]: r["mean"] for r in mine})
            table_rows = [[places[r["agent"]], r["agent"], r["matches"], fmt(r["mean"], 2),
                           f"[{fmt(r['low'], 2)}, {fmt(r['high'], 2)}]", fmt(r["std"], 2), r["invalid_replies"],
                           turn_share(r["defaulted_turns"], r.get("defaulted_share")),
                           turn_share(r.get("valid_turns", 0), r.get("valid_share"))] for r in mine]
            figure = svg.intervals([(r["agent"], r["mean"], r["low"], r["high"]) for r in mine], 2, f"{title}: mean",
                                   compact=True)
            classes = ["top" if places[r["agent"]] == 1 else "" for r in mine]
            if _tied(list(places.values())):
                title += " (equal means share a rank)"
            apart = describe(separability({r["agent"]: r["mean"] for r in mine}, {r["agent"]: r["low"] for r in mine},
                                          {r["agent"]: r["high"] for r in mine}), 2)
            parts.append(f'<div class="method"><h4>{escape(title)}</h4><div class="pair">'
                         + table(["Rank", "Agent", "Matches", "Mean", "95% interval", "Std", "Invalid", "Defaulted",
                                  "Valid"],
                                 table_rows, numeric_from=2, row_classes=classes,
                                 attrs=f' class="board" data-board="{key}" data-group="{escape(group)}" '
                                       f'data-role="{escape(role)}" data-metric="{escape(mine[0]["metric"])}"')
                         + figure + "</div>" + "".join(note(line) for line in apart) + "</div>")
        metric = members[0].get("metric", "payoff")
        parts += [warning(n["text"]) for n in rank.get("leaderboard_notes") or ()
                  if n["board"] == metric and n.get("group") == group]
    return "".join(parts)


def _other_metrics(rank: dict):
    """(group, metric, its summary and role tables) for every metric beside an entry's payoff."""
    for group, metrics in (rank.get("metrics") or {}).items():
        for metric, found in list(metrics.items())[1:]:  # the first is the payoff, shown already
            yield group, metric, found


def leaderboard(summary: dict) -> str:
    rank = summary["rank"]
    parts = []
    if (summary.get("source") or {}).get("ranked_with_reference"):
        parts.append(note(f"The files hold only {rank['peer_rank']['reference'] or 'the reference'}'s reviews: "
                          "they are ranked with them, and there is no agreement to check."))
    if rank["peer_rank"]:
        parts.append(_board(rank["peer_rank"], "Peer rank (every reviewer counts the same)", "peer"))
    else:
        parts += [warning(n["text"]) for n in rank.get("leaderboard_notes") or () if n.get("left_out")]
    if summary["weighted"]:
        parts.append(_board(summary["weighted"], "Weighted peer rank (PRD: reviewers weighed by their own score)",
                            "weighted"))
    if rank["payoffs"]:
        parts.append("<h3>Payoffs</h3>" + note(
            "Mean payoff per agent over its matches (DeepEval Eq. 1; per role for games whose seats differ, Eq. 2), "
            "with a 95% bootstrap interval.") + _payoffs(rank, rank["payoffs"]))
    others = [found["summary"] for _, _, found in _other_metrics(rank) if found["summary"]]
    if others:
        parts.append("<h3>Metrics beside the payoff</h3>"
                     + "".join(_payoffs(rank, rows, key="metric") for rows in others))
    if not parts:
        parts.append(note("No finished matches yet."))
    for board_key, board in (("peer", rank["peer_rank"]), ("weighted", summary["weighted"])):
        if board and board["agreement"]:
            rows = [[a["method"], a["examples"]["examples"], fmt(a["examples"]["accuracy"], 3),
                     fmt(a["examples"]["cohen_kappa"], 3), fmt(a["examples"]["fleiss_kappa"], 3),
                     fmt(a["ranking"]["spearman"], 3), fmt(a["ranking"]["kendall"], 3)] for a in board["agreement"]]
            from ..rank.agreement import UNIT_TITLES

            what = UNIT_TITLES[board["agreement"][0]["examples"]["unit"]]
            parts.append(f"<h4>Agreement with {escape(board['reference'])} ({board_key}), {escape(what)}</h4>"
                         + table(["Method", "Examples", "Accuracy", "Cohen's κ", "Fleiss' κ", "Spearman", "Kendall"], rows))
    if rank["stability"]:
        rows = [[c["group"], c["repeats"], fmt(c["tau"], 2), fmt(c["max_width"], 2), fmt(c.get("width_limit"), 2),
                 "yes" if c["stable"] else "no", c.get("stopped") or ""] for c in rank["stability"]]
        parts.append("<h4>Stability checks (repeats until stable)</h4>"
                     + table(["Entry", "Repeats", "Kendall τ", "Widest interval", "Width allowed", "Stable", "Stopped by"],
                             rows))
    return section("leaderboard", "Leaderboard", "".join(parts))


def pairwise(summary: dict) -> str:
    panels = summary["figures"]["heatmap"]
    if not panels:
        return ""
    roles = note("Games with two roles: a heatmap per role (DeepEval Eq. 2: the row agent in that role, the column "
                 "agent in the other) and one across both roles.") if summary["rank"]["role_tables"] else ""
    return section("pairwise", "Pairwise", roles + "".join(
        f'<div class="figure-box" data-figure="heatmap"><h4>{escape(p["title"])}</h4>{svg.heatmap(p)}</div>'
        for p in panels))


def trend(summary: dict) -> str:
    panels = summary["figures"]["trend"]
    if not panels:
        return ""
    return section("trend", "Rating over battles", note(
        "PRD figure 4: how ratings settle as results come in; the last point of each line is the leaderboard's "
        "value.") + "".join(f'<div class="figure-box" data-figure="trend"><h4>{escape(p["title"])}</h4>{svg.trend(p)}</div>'
                            for p in panels))


def reviewers(summary: dict) -> str:
    board = summary["rank"]["peer_rank"]
    if not board:
        return ""
    parts = []
    for p in summary["figures"]["weights"]:
        parts.append(f'<div class="figure-box" data-figure="weights"><h4>{escape(p["title"])}</h4>'
                     + svg.bars(p["names"], p["values"], p["title"], low=0.0) + "</div>")
    bias = board["bias"]
    rows = [[b["reviewer"], b["reviews"], fmt(b["first_shown_wins"], 3), b["swapped_pairs"], fmt(b["flip_rate"], 3),
             "—" if b["self_preference"] is None else f"{b['self_preference']:+.3f}"] for b in bias]
    parts.append("<h4>Bias diagnostics</h4>" + note(
        "First shown wins: share of a reviewer's reviews won by the answer shown first (0.5 is unbiased). Flip rate: "
        "share of pairs reviewed in both orders whose verdict changes with the order. Self-preference: the reviewer's "
        "own win rate by its own reviews minus by the others' (— when it is not a contestant).")
        + table(["Reviewer", "Reviews", "First shown wins", "Swapped pairs", "Flip rate", "Self-preference"], rows))
    names = [b["reviewer"] for b in bias]
    parts.append('<div class="pair">'
                 + '<div class="figure-box"><h4>Position bias: first shown wins</h4>'
                 + svg.bars(names, [b["first_shown_wins"] for b in bias], "first shown wins", center=0.5, low=0.0, high=1.0)
                 + '</div><div class="figure-box"><h4>Self-preference</h4>'
                 + svg.bars(names, [b["self_preference"] for b in bias], "self-preference", low=-1.0, high=1.0)
                 + "</div></div>")
    return section("reviewers", "Reviewers", "".join(parts))


def _mean(mean: float | None, interval) -> str:
    if mean is None:
        return "—"
    return f"{mean:.2f}" if not interval else f"{mean:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def _role_table(rank: dict, t: dict) -> str:
    first, second = t["roles"]
    rows = []
    for a in t["agents"]:
        cells = []
        for b in t["agents"]:
            cell = t["cells"].get(a, {}).get(b)
            cells.append("—" if cell is None else f"{cell['scores'][0]:.2f} / {cell['scores'][1]:.2f} ({cell['matches']})")
        rows.append([a] + cells + [_mean(t["row_means"].get(a), t.get("row_intervals", {}).get(a))])
    rows.append([f"mean as {second}"] + [_mean(t["column_means"].get(b), t.get("column_intervals", {}).get(b))
                                         for b in t["agents"]] + [""])
    what = _metric_title(rank, t["group"], t.get("metric", "payoff"))
    return (f"<h4>{escape(t['group'])}, {escape(what)}: rows play {escape(first)}, columns play {escape(second)}</h4>"
            + note(f"Each cell: {first} / {second} mean (matches); row and column means with 95% bootstrap intervals.")
            + table([f"{first} \\ {second}"] + t["agents"] + [f"mean as {first}"], rows))


def role_tables(summary: dict) -> str:
    rank = summary["rank"]
    tables = list(rank["role_tables"]) + [t for _, _, found in _other_metrics(rank) for t in found["role_tables"]]
    if not tables:
        return ""
    return section("roles", "Role tables", "".join(_role_table(rank, t) for t in tables))


def usage(summary: dict) -> str:
    rows_in = summary["rank"]["usage"]
    if not rows_in:
        return ""
    rows = [[u["agent"], u["calls"], u["cached"], u["retries"], u["failed"], _count(u["prompt_tokens"]),
             _count(u["completion_tokens"]), dollars(u["cost"]), f"{u['latency']:.2f} s"] for u in rows_in]
    rows.append(["total", *(sum(u[k] for u in rows_in) for k in ("calls", "cached", "retries", "failed")),
                 *(_count(_total(rows_in, k)) for k in ("prompt_tokens", "completion_tokens")),
                 dollars(_total(rows_in, "cost")), ""])
    spent = note("Spent: the calls that reached a model.") + table(
        ["Agent", "Calls", "Cached", "Retries", "Failed", "Prompt tokens", "Reply tokens", "Cost", "Mean latency"], rows,
        row_classes=[""] * len(rows_in) + ["total"])
    saving = [u for u in rows_in if u["cached"]]
    if not saving:
        return section("cost", "Cost and tokens", spent)
    rows = [[u["agent"], u["cached"], _count(u["saved_prompt_tokens"]), _count(u["saved_completion_tokens"]),
             dollars(u["saved_cost"]), f"{u['saved_seconds']:.2f} s"] for u in saving]
    rows.append(["total", sum(u["cached"] for u in saving),
                 *(_count(_total(saving, k)) for k in ("saved_prompt_tokens", "saved_completion_tokens")),
                 dollars(_total(saving, "saved_cost")), f"{sum(u['saved_seconds'] for u in saving):.2f} s"])
    saved = note("Saved: the replies the response cache gave back, at what they cost when they were first asked.") + table(
        ["Agent", "Cached replies", "Prompt tokens", "Reply tokens", "Cost", "Time"], rows,
        row_classes=[""] * len(saving) + ["total"], attrs=' class="saved"')
    return section("cost", "Cost and tokens", spent + saved)


def _total(rows: list[dict], field: str) -> float | None:
    return known_sum(u.get(field) for u in rows)  # a stored summary from before the field counts as unknown


def _count(tokens: int | None) -> str:
    return "unknown" if tokens is None else str(tokens)



OUTCOMES = [("decided", "decided"), ("tie", "tie"), ("scored", "scored, not a contest (no winner)"),
            ("truncated", "truncated at max_rounds"), ("failed", "failed"), ("interrupted", "interrupted"),
            ("invalid", "with invalid replies"), ("won", "won by the chosen agent"),
            ("lost", "not won by the chosen agent")]


def transcripts(matches: int) -> str:
    """The transcript browser's frame; report.js fills it from the packed transcripts."""
    if not matches:
        return ""
    options = "".join(f'<option value="{value}">{escape(label)}</option>' for value, label in OUTCOMES)
    return section("transcripts", "Transcripts", note(
        "Every match, round by round. Each message says which seats saw it; seats' agents are revealed here, never "
        "to the agents. Invalid replies, defaulted turns and the referee's verdicts are marked. A match is decided "
        "or a tie only in a contest, where every match shares out the same total payoff; in other games (a reward "
        "both seats share, scores each seat earns on its own) no seat wins. \"As the seats saw it\" shows only the "
        "messages, each as its audience got it after the anonymity filter, and no agent names.") + f"""
  <form class="controls" id="filters" autocomplete="off">
    <label>Game <select id="f-group"><option value="">all</option></select></label>
    <label>Agent <select id="f-agent"><option value="">all</option></select></label>
    <label>Outcome <select id="f-outcome"><option value="">all</option>{options}</select></label>
    <label class="grow">Search <input id="f-text" type="search" placeholder="text in any message, a match key, an agent"></label>
    <label><input id="f-seen" type="checkbox"> As the seats saw it</label>
  </form>
  <div class="pager" id="pager-top"></div>
  <div id="matches"><p class="note">Loading transcripts…</p></div>
  <div class="pager" id="pager-bottom"></div>""")
