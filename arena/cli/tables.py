"""The result tables as a person reads them in a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table
from rich.text import Text

from arena.rank.separability import describe as describe_separability
from arena.results.separability import payoff_separability
from arena.results.payoffs import PayoffSummary, RoleTable, role_tables, summarize
from arena.results.standing import payoff_notes
from arena.results.usage import Usage, dollars, usage_by_agent
from arena.contract.runs import RunReader


def print_results(console: Console, store: RunReader) -> None:
    """A run's tables, from the store's rows: payoffs, role tables, every other metric, calls, stability."""
    names = store.metric_names()
    turns = list(store.turns())
    print_payoffs(console, summarize(store.scores(), turns), names)
    for table in role_tables(store.scores()):
        print_role_table(console, table, names)
    for metric in dict.fromkeys(m for found in names.values() for m in found[1:]):  # the payoff's came first
        print_payoffs(console, summarize(store.scores(metric), turns, metric=metric), names)
        for table in role_tables(store.scores(metric), metric=metric):
            print_role_table(console, table, names)
    print_peer_rank_left_out(console, store)
    usage = usage_by_agent(store.calls())
    if usage:
        print_usage(console, usage)
    for note in store.notes():
        console.print(f"note ({note['agent']}): {note['text']}", markup=False, highlight=False)
    print_stability(console, store)
    print_left_out(console, store)


def print_stability(console: Console, store: RunReader) -> None:
    """A line for each until_stable entry: its last check."""
    checks = store.stability()
    for group in dict.fromkeys(c["group"] for c in checks):
        console.print(stability_line([c for c in checks if c["group"] == group][-1]), markup=False, highlight=False)


STOPPED = {  # why an until_stable entry stopped adding repeats, as the store says it
    "stable": "stable (Kendall tau and interval width both reached)",
    "max repeats": "not stable; stopped at max repeats",
    "budget": "not stable yet; the run stopped at its budget",
    "outage": "not stable yet; the run stopped at an outage",
    "limit": "not stable yet; the run stopped at --limit",
    None: "not stable yet; the run stopped before the next block",
}


def stability_line(last: dict) -> str:
    """An until_stable entry's last check: what stopped it, after how many repeats, and its figures."""
    tau = "—" if last["tau"] is None else f"{last['tau']:.2f}"
    limit = "" if last.get("width_limit") is None else f", at most {last['width_limit']:.2f} allowed"
    verdict = STOPPED.get(last.get("stopped"), last.get("stopped"))
    return (f"{last['group']}: {verdict} after {last['repeats']} repeats (Kendall tau {tau}, widest interval "
            f"{last['max_width']:.2f}{limit})")


def print_peer_rank_left_out(console: Console, store: RunReader) -> None:
    """Say why there is no peer rank, when the run's reviewing games gave no review to rank."""
    from arena.results.summary import peer_rank_left_out

    note = peer_rank_left_out(store)
    if note is not None:
        console.print(Text(f"note: {note.text}", style="yellow"))


def print_left_out(console: Console, store: RunReader) -> None:
    """Say what the results leave out: matches stopped at max_rounds before their game ended."""
    truncated = store.counts().get("truncated", 0)
    if truncated:
        console.print(Text(
            f"{truncated} {'match was' if truncated == 1 else 'matches were'} stopped at match.max_rounds before "
            f"the game ended (truncated): scored where they stopped, kept in the store and in exports, and left out "
            f"of these results; `arena show {store.run_dir}` lists them. To play them to the end, raise "
            "match.max_rounds and start the run afresh (--force-new).", style="yellow"))


def _metric_title(group: str, metric: str, names: dict[str, list[str]] | None) -> str:
    """'payoff', or the name of what the payoff is ('payoff: judge'), or another metric's name."""
    found = (names or {}).get(group, ["payoff"])
    if metric == "payoff" and found and found[0] != "payoff":
        return f"payoff ({found[0]})"
    return metric


def print_payoffs(console: Console, rows: list[PayoffSummary], names: dict[str, list[str]] | None = None) -> None:
    groups = list(dict.fromkeys(r.group for r in rows))
    for group in groups:
        members = [r for r in rows if r.group == group]
        by_role = len({r.role for r in members}) > 1
        what = _metric_title(group, members[0].metric, names)
        table = Table(title=f"{group}: mean {what} per agent (95% bootstrap interval)", title_justify="left")
        table.add_column("Agent")
        if by_role:
            table.add_column("Role")
        # timeouts beside invalid replies only when there were any: the table stays narrow otherwise
        late = any(r.timeouts for r in members)
        for name in ("Matches", "Mean", "95% CI", "Std", "Invalid") + ("Timeouts",) * late + ("Defaulted", "Valid"):
            table.add_column(name, justify="right")
        for r in members:
            cells = [r.agent] + ([r.role] if by_role else [])
            cells += [str(r.matches), f"{r.mean:.2f}", f"[{r.low:.2f}, {r.high:.2f}]", f"{r.std:.2f}",
                      str(r.invalid_replies)] + [str(r.timeouts)] * late
            cells += [turn_share(r.defaulted_turns, r.defaulted_share), turn_share(r.valid_turns, r.valid_share)]
            table.add_row(*cells)
        console.print(table)
        for board in payoff_separability(members):
            for line in describe_separability(board.separability, 2):
                console.print(f"  {board.role + ': ' if by_role else ''}{line}", highlight=False)
        for note in payoff_notes(members):
            console.print(Text(f"  note: {note.text}", style="yellow"))


def turn_share(count: int, share: float | None) -> str:
    """A count of turns with its share of the agent's turns: '4 (67%)'; the count alone when no turns were counted."""
    return str(count) if share is None else f"{count} ({share:.0%})"


def print_role_table(console: Console, t: RoleTable, names: dict[str, list[str]] | None = None) -> None:
    first, second = t.roles
    what = _metric_title(t.group, t.metric, names)
    table = Table(title=f"{t.group}, {what}: rows play {first}, columns play {second}; each cell: {first} / {second} "
                  "(means; intervals are 95% bootstrap)", title_justify="left")
    table.add_column(f"{first} \\ {second}")
    for b in t.agents:
        table.add_column(b, justify="center")
    table.add_column(f"mean as {first}", justify="right")
    for a in t.agents:
        cells = []
        for b in t.agents:
            cell = t.cells.get(a, {}).get(b)
            cells.append("—" if cell is None else f"{cell.scores[0]:.2f} / {cell.scores[1]:.2f}")
        table.add_row(a, *cells, _mean(t.row_means.get(a), t.row_intervals.get(a)))
    table.add_row(f"mean as {second}", *[_mean(t.column_means.get(b), t.column_intervals.get(b)) for b in t.agents], "")
    console.print(table)


def _mean(mean: float | None, interval: tuple[float, float] | None) -> str:
    if mean is None:
        return "—"
    return f"{mean:.2f}" if interval is None else f"{mean:.2f} [{interval[0]:.2f}, {interval[1]:.2f}]"


def print_usage(console: Console, rows: list[Usage]) -> None:
    """What the calls spent; then, when the response cache answered some, what it saved."""
    table = Table(title="model calls per agent: spent by the calls that reached a model", title_justify="left")
    for column in ("Agent", "Calls", "Cached", "Retries", "Failed", "Prompt tokens", "Reply tokens", "Cost", "Mean latency"):
        table.add_column(column, justify="left" if column == "Agent" else "right")
    for r in rows:
        table.add_row(r.agent, str(r.calls), str(r.cached), str(r.retries), str(r.failed), count(r.prompt_tokens),
                      count(r.completion_tokens), dollars(r.cost), f"{r.latency:.2f} s")
    console.print(table)
    saving = [r for r in rows if r.cached]
    if not saving:
        return
    table = Table(title="saved by the response cache: its replies, at what they cost when first asked", title_justify="left")
    for column in ("Agent", "Cached replies", "Prompt tokens", "Reply tokens", "Cost", "Time"):
        table.add_column(column, justify="left" if column == "Agent" else "right")
    for r in saving:
        table.add_row(r.agent, str(r.cached), count(r.saved_prompt_tokens), count(r.saved_completion_tokens),
                      dollars(r.saved_cost), f"{r.saved_seconds:.2f} s")
    console.print(table)


def count(tokens: int | None) -> str:
    """A token count as the tables show it; None is a count nobody knows (a call cut off, an answer without usage)."""
    return "unknown" if tokens is None else str(tokens)


METHOD_NAMES = {"winrate": "win rate", "elo": "Elo", "bt": "Bradley–Terry"}
PAIRWISE_LIMIT = 12  # contestants: a bigger matrix is left to --json


def _weights_line(result) -> str:
    if result.method == "winrate":
        how = f"after {result.iterations} iterations, last change {result.last_change:.2g}"
    elif result.method == "elo":
        scheme = {"ordering": "each ordering replayed with its own weights, scaled to mean 1",
                  "mean": "from the mean over orderings, scaled to [0, 1]"}.get(result.scheme, "")
        how = f"{scheme}; after {result.iterations} passes, last change {result.last_change:.2g}"
        if result.scheme == "ordering":
            how += "; mean over orderings"
    else:
        how = "from the weighted win rate"
    weights = ", ".join(f"{r} {w:.3f}" for r, w in sorted(result.weights.items(), key=lambda x: (-x[1], x[0])))
    return f"  reviewer weights ({how}): {weights}"


def print_leaderboard(console: Console, board) -> None:
    """A peer-rank leaderboard: one table per method, then weights, the pairwise matrix, bias and agreement."""
    who = ", ".join(board.reviewers)
    console.print(f"{board.reviews} reviews of {len(board.contestants)} contestants by {who}")
    stands = getattr(board, "stands_on", None)  # a run's board: each contestant's own turns in the reviewing matches
    if stands is not None:
        console.print("Defaulted, Valid: each contestant's own turns (answers and verdicts) in the reviewing matches, "
                      "with their shares; — where it took none.", highlight=False)
    for note in getattr(board, "notes", []):
        console.print(Text(f"note: {note}", style="yellow"))
    for result in board.methods:
        intervals = result.low is not None
        how = "95% bootstrap interval, questions resampled" if intervals else "no intervals: --bootstrap 0"
        table = Table(title=f"{'weighted ' if result.weighted else ''}{METHOD_NAMES[result.method]} ({how})",
                      title_justify="left")
        columns = ("Rank", "Contestant", "Score") + (("95% CI",) if intervals else ())
        columns += ("Spread over orderings",) if result.spread else ()
        for column in columns + (("Defaulted", "Valid") if stands is not None else ()):
            table.add_column(column, justify="left" if column == "Contestant" else "right")
        digits = 3 if result.method == "winrate" else 0
        for name in result.ranking():
            row = [str(result.rank[name]), name, f"{result.scores[name]:.{digits}f}"]
            if intervals:
                row.append(f"[{result.low[name]:.{digits}f}, {result.high[name]:.{digits}f}]")
            if result.spread:
                row.append(f"±{result.spread[name]:.0f}")
            if stands is not None:
                found = stands.get(name)
                row += (["—", "—"] if found is None else [turn_share(found.defaulted_turns, found.defaulted_share),
                                                          turn_share(found.valid_turns, found.valid_share)])
            table.add_row(*row)
        console.print(table)
        if len(set(result.rank.values())) < len(result.rank):
            console.print("  equal scores share a rank")
        if result.separability is not None:
            for line in describe_separability(result.separability, digits):
                console.print(f"  {line}", highlight=False)
        for note in result.notes:
            console.print(f"  note: {note}")
        if result.weighted and result.weights:
            console.print(_weights_line(result))
    print_weight_check(console, getattr(board, "weight_check", None))
    if getattr(board, "style_control", None) is not None:
        print_style_control(console, board.style_control, board.methods[0].weighted)
    print_pairwise(console, board)
    table = Table(title="reviewer bias", title_justify="left")
    for column in ("Reviewer", "Reviews", "First shown wins", "Swapped pairs", "Flip rate", "Self-preference"):
        table.add_column(column, justify="left" if column == "Reviewer" else "right")
    for b in board.bias:
        table.add_row(b.reviewer, str(b.reviews), f"{b.first_shown_wins:.3f}", str(b.swapped_pairs),
                      "—" if b.flip_rate is None else f"{b.flip_rate:.3f}",
                      "—" if b.self_preference is None else f"{b.self_preference:+.3f}")
    console.print(table)
    if board.agreement:
        from arena.rank.agreement import UNIT_TITLES

        what = UNIT_TITLES[board.agreement[0].examples.unit]
        table = Table(title=f"agreement with {board.reference}, {what}", title_justify="left")
        for column in ("Method", "Examples", "Accuracy", "Cohen's kappa", "Fleiss' kappa", "Spearman", "Kendall"):
            table.add_column(column, justify="left" if column == "Method" else "right")
        for a in board.agreement:
            e, r = a.examples, a.ranking
            table.add_row(a.method, str(e.examples), f"{e.accuracy:.3f}", f"{e.cohen_kappa:.3f}", f"{e.fleiss_kappa:.3f}",
                          f"{r.spearman:.3f}", f"{r.kendall:.3f}")
        console.print(table)


def print_weight_check(console: Console, check) -> None:
    """Weighted boards: each weighed reviewer's agreement with the yardstick beside its weights, and
    whether the weights rank the reviewers as their agreement does (arena.rank.weight_check)."""
    if check is None:
        return
    methods = list(check.weights)
    unit = "per presented order" if check.unit == "order" else "per pair"
    table = Table(title=f"weighting check: the reviewers' agreement with {check.against} ({unit}) against their "
                        "weights; weighting assumes the best writers judge best", title_justify="left")
    for column in ("Reviewer", "Examples", "Agreement", *(f"{METHOD_NAMES[m]} weight" for m in methods)):
        table.add_column(column, justify="left" if column == "Reviewer" else "right")
    for row in sorted(check.reviewers, key=lambda r: (-(r.agreement or 0.0), r.reviewer)):
        table.add_row(row.reviewer, str(row.examples), "—" if row.agreement is None else f"{row.agreement:.3f}",
                      *(f"{check.weights[m][row.reviewer]:.3f}" for m in methods))
    console.print(table)
    if check.holds is None:
        console.print(f"  not checked: {check.reason}", highlight=False)
        return
    rho = ", ".join(f"{METHOD_NAMES[m]} {c:+.2f}" for m, c in check.correlation.items() if c is not None)
    verdict = "holds" if check.holds else "FAILS (the note at the top says what it means)"
    console.print(f"  Spearman between weight and agreement: {rho}; it must be {check.threshold:g} or more: "
                  f"the assumption {verdict}", highlight=False)


def print_style_control(console: Console, style, weighted: bool = False) -> None:
    """The style-controlled Bradley–Terry beside the raw one, then what each style feature is worth."""
    intervals = style.low is not None
    how = "95% bootstrap interval, questions resampled" if intervals else "no intervals: --bootstrap 0"
    table = Table(title=f"{'weighted ' if weighted else ''}Bradley–Terry, style-controlled ({how})", title_justify="left")
    columns = ("Rank", "Contestant", "Score") + (("95% CI",) if intervals else ()) + ("Raw rank", "Raw score")
    for column in columns:
        table.add_column(column, justify="left" if column == "Contestant" else "right")
    for name in sorted(style.scores, key=lambda n: (style.rank[n], n)):
        row = [str(style.rank[name]), name, f"{style.scores[name]:.0f}"]
        if intervals:
            row.append(f"[{style.low[name]:.0f}, {style.high[name]:.0f}]")
        table.add_row(*row, str(style.raw_rank[name]), f"{style.raw_scores[name]:.0f}")
    console.print(table)
    if style.separability is not None:
        for line in describe_separability(style.separability):
            console.print(f"  {line}", highlight=False)
    table = Table(title="what style is worth: Elo points for one standard deviation of (A − B) / (A + B)",
                  title_justify="left")
    for column in ("Feature", "Elo points") + (("95% CI", "Significant") if intervals else ()) + ("Std of difference",):
        table.add_column(column, justify="left" if column == "Feature" else "right")
    for c in style.coefficients:
        row = [FEATURE_LABELS.get(c.feature, c.feature), f"{c.value:+.1f}"]
        if intervals:
            row += [f"[{c.low:+.1f}, {c.high:+.1f}]", "yes" if c.significant else "no"]
        table.add_row(*row, f"{c.spread:.3f}")
    if style.coefficients:  # answers that never differ in style leave none; the notes say so
        console.print(table)
    for note in style.notes:
        console.print(f"  note: {note}")


FEATURE_LABELS = {"length": "length (words)", "headers": "headers", "lists": "list items", "bold": "bold spans"}


def print_pairwise(console: Console, board) -> None:
    names = board.contestants
    weighted = board.pairwise_weights is not None
    if len(names) > PAIRWISE_LIMIT:
        console.print(f"pairwise win rates of {len(names)} contestants: in --json (pairwise)")
        return
    title = "pairwise win rate, row beats column (ties half" + ("; reviewers weighted as in the weighted win rate)"
                                                                 if weighted else ")")
    table = Table(title=title, title_justify="left")
    table.add_column("")
    for name in names:
        table.add_column(name, justify="right")
    for name, row in zip(names, board.pairwise):
        table.add_row(name, *("—" if v is None else f"{v:.3f}" for v in row))
    console.print(table)


# -- the tables games declare of their matches ------------------------------------------------
def print_summaries(console: Console, store: RunReader) -> None:
    """Each table the run's games sum their matches up in (``arena.results.summaries``), as given."""
    from arena.results.summaries import game_summaries

    summaries = game_summaries(store)
    for summary in summaries.found:
        for found in summary.tables:
            print_summary_table(console, found)
    for problem in summaries.problems:
        console.print(Text(f"note: {problem}", style="yellow"))


def print_summary_table(console: Console, found) -> None:
    """One ``arena.contract.Table``: its note as a line, then the table, text columns left, figures right."""
    if found.note:
        console.print(found.note, markup=False, highlight=False)
    table = Table(title=found.title, title_justify="left")
    for column in found.columns:
        table.add_column(column.name, justify="right" if column.numeric else "left", no_wrap=not column.numeric)
    for row in found.text_rows():
        table.add_row(*(Text(cell) for cell in row))
    console.print(table)


# -- panels of judges ---------------------------------------------------------------------------
def _share(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def print_panels(console: Console, store: RunReader) -> None:
    """Each panel of judges (a panel referee, a game's judge seats): its members' verdicts against
    the panel's, and the members' agreement."""
    from arena.results.panels import panel_summaries

    for s in panel_summaries(store):
        kappa = "—" if s.fleiss_kappa is None else f"{s.fleiss_kappa:.3f}"
        table = Table(title=f"{s.group}: panel {s.name} ({s.rule}), {s.decided} of {s.items} items decided; the "
                      f"members' agreement, Fleiss' kappa {kappa}. With the panel: the share of a member's verdicts "
                      "that were the panel's", title_justify="left")
        for column in ("Member", "Items", "Verdicts", "With the panel", *(("Weight",) if s.weights else ())):
            table.add_column(column, justify="left" if column == "Member" else "right", no_wrap=column == "Member")
        for m in s.members:
            weight = () if not s.weights else (_share((s.weights or {}).get(m.agent)),)
            table.add_row(m.agent, str(m.items), str(m.verdicts), _share(m.with_panel), *weight)
        console.print(table)
