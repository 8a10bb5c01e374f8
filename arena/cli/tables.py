"""The result tables as a person reads them in a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.table import Table

from arena.results.payoffs import PayoffSummary, RoleTable, metric_names, role_tables, summarize
from arena.results.usage import Usage, usage_by_agent
from arena.store import RunStore


def print_results(console: Console, records, store: RunStore | None = None) -> None:
    names = metric_names(records)
    print_payoffs(console, summarize(records), names)
    for table in role_tables(records):
        print_role_table(console, table, names)
    for metric in dict.fromkeys(m for found in names.values() for m in found[1:]):  # the payoff's came first
        print_payoffs(console, summarize(records, metric=metric), names)
        for table in role_tables(records, metric=metric):
            print_role_table(console, table, names)
    if store is not None:
        usage = usage_by_agent(store.calls())
        if usage:
            print_usage(console, usage)
        for note in store.notes():
            console.print(f"note ({note['agent']}): {note['text']}", markup=False, highlight=False)
        checks = store.stability()
        groups = dict.fromkeys(c["group"] for c in checks)
        for group in groups:
            last = [c for c in checks if c["group"] == group][-1]
            verdict = "stable" if last["stable"] else "not stable; stopped at the cap"
            tau = "—" if last["tau"] is None else f"{last['tau']:.2f}"
            console.print(f"{group}: {verdict} after {last['repeats']} repeats (Kendall tau {tau}, widest interval {last['max_width']:.2f})")


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
        for name in ("Matches", "Mean", "95% CI", "Std", "Invalid", "Defaulted"):
            table.add_column(name, justify="right")
        for r in members:
            cells = [r.agent] + ([r.role] if by_role else [])
            cells += [str(r.matches), f"{r.mean:.2f}", f"[{r.low:.2f}, {r.high:.2f}]", f"{r.std:.2f}",
                      str(r.invalid_replies), str(r.defaulted_turns)]
            table.add_row(*cells)
        console.print(table)


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
    table = Table(title="model calls per agent (cached replies cost nothing)", title_justify="left")
    for column in ("Agent", "Calls", "Cached", "Retries", "Failed", "Prompt tokens", "Reply tokens", "Cost", "Mean latency"):
        table.add_column(column, justify="left" if column == "Agent" else "right")
    for r in rows:
        cost = "unknown" if r.cost is None else f"${r.cost:.4f}"
        table.add_row(r.agent, str(r.calls), str(r.cached), str(r.retries), str(r.failed), str(r.prompt_tokens),
                      str(r.completion_tokens), cost, f"{r.latency:.2f} s")
    console.print(table)


def print_leaderboard(console: Console, board) -> None:
    """A peer-rank leaderboard: one table per method, then weights, bias and agreement."""
    who = ", ".join(board.reviewers)
    console.print(f"{board.reviews} reviews of {len(board.contestants)} contestants by {who}")
    for result in board.methods:
        kind = {"winrate": "win rate", "elo": "Elo", "bt": "Bradley–Terry"}[result.method]
        title = f"{'weighted ' if result.weighted else ''}{kind} (95% bootstrap interval, questions resampled)"
        table = Table(title=title, title_justify="left")
        for column in ("Rank", "Contestant", "Score", "95% CI") + (("Spread over orderings",) if result.spread else ()):
            table.add_column(column, justify="left" if column == "Contestant" else "right")
        digits = 3 if result.method == "winrate" else 0
        for place, name in enumerate(result.ranking(), start=1):
            row = [str(place), name, f"{result.scores[name]:.{digits}f}",
                   f"[{result.low[name]:.{digits}f}, {result.high[name]:.{digits}f}]"]
            if result.spread:
                row.append(f"±{result.spread[name]:.0f}")
            table.add_row(*row)
        console.print(table)
        if result.weighted and result.weights:
            how = {"winrate": f"after {result.iterations} iterations, last change {result.last_change:.2g}",
                   "elo": f"after {result.iterations} passes", "bt": "from the weighted win rate"}[result.method]
            weights = ", ".join(f"{r} {w:.3f}" for r, w in sorted(result.weights.items(), key=lambda x: -x[1]))
            console.print(f"  reviewer weights ({how}): {weights}")
    table = Table(title="reviewer bias", title_justify="left")
    for column in ("Reviewer", "Reviews", "First shown wins", "Swapped pairs", "Flip rate", "Self-preference"):
        table.add_column(column, justify="left" if column == "Reviewer" else "right")
    for b in board.bias:
        table.add_row(b.reviewer, str(b.reviews), f"{b.first_shown_wins:.3f}", str(b.swapped_pairs),
                      "—" if b.flip_rate is None else f"{b.flip_rate:.3f}",
                      "—" if b.self_preference is None else f"{b.self_preference:+.3f}")
    console.print(table)
    if board.agreement:
        table = Table(title=f"agreement with {board.reference}", title_justify="left")
        for column in ("Method", "Examples", "Accuracy", "Cohen's kappa", "Fleiss' kappa", "Spearman", "Kendall"):
            table.add_column(column, justify="left" if column == "Method" else "right")
        for a in board.agreement:
            e, r = a.examples, a.ranking
            table.add_row(a.method, str(e.examples), f"{e.accuracy:.3f}", f"{e.cohen_kappa:.3f}", f"{e.fleiss_kappa:.3f}",
                          f"{r.spearman:.3f}", f"{r.kendall:.3f}")
        console.print(table)
