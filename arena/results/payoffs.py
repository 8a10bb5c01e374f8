"""Payoffs per agent over repeated matches: DeepEval Eq. 1 (symmetric games) and
Eq. 2 (per role, for asymmetric ones), with bootstrap 95% intervals."""

from __future__ import annotations

import hashlib
from collections import defaultdict
from collections.abc import Iterable
from operator import attrgetter

import numpy as np
from pydantic import BaseModel

from arena.contract import seeding
from arena.results.standing import stands_on
from arena.contract.runs import ScoreRow, TurnRow  # the same rows as arena.store.rows, without the writer's modules (trio)


class PayoffSummary(BaseModel):
    group: str
    metric: str = "payoff"
    agent: str
    role: str
    matches: int
    mean: float
    low: float  # bootstrap 95% interval of the mean
    high: float
    std: float
    invalid_replies: int
    timeouts: int  # attempts that got no reply within the turn's time
    defaulted_turns: int  # turns given the game's default: invalid replies to the last attempt, or a timeout
    # what the mean stands on: the agent's turns in the matches behind it, and the shares of them that
    # were valid and defaulted (None: no turns known, as in a store written before turns were counted)
    turns: int = 0
    valid_turns: int = 0
    valid_share: float | None = None
    defaulted_share: float | None = None


class RoleCell(BaseModel):
    matches: int
    scores: tuple[float, float]  # mean payoff of the row agent in role 1, of the column agent in role 2


class RoleTable(BaseModel):
    """The agent x agent table of a two-role game: rows hold role 1, columns role 2."""

    group: str
    metric: str = "payoff"
    roles: tuple[str, str]
    agents: list[str]
    cells: dict[str, dict[str, RoleCell]]
    row_means: dict[str, float]  # each agent's mean in role 1
    column_means: dict[str, float]  # each agent's mean in role 2
    row_intervals: dict[str, tuple[float, float]] = {}  # bootstrap 95% interval of each row mean
    column_intervals: dict[str, tuple[float, float]] = {}


def bootstrap_interval(values: Iterable[float], resamples: int = 2000, seed: int | str = 0) -> tuple[float, float, float]:
    """Mean and percentile-bootstrap 95% interval, resampling matches with replacement."""
    x = np.asarray(list(values), dtype=float)
    key = (hashlib.blake2b(x.tobytes(), digest_size=16).digest(), x.size, resamples, seed)
    found = _INTERVALS.get(key)
    if found is None:
        found = _INTERVALS[key] = _interval(x, resamples, seed)
        while len(_INTERVALS) > 256:
            del _INTERVALS[next(iter(_INTERVALS))]
    return found


# A run's payoff table and the table of its "payoff" metric (a game that reports no metric of its
# own) bootstrap the same values with the same seed: the second time is read back, not redrawn.
_INTERVALS: dict[tuple, tuple[float, float, float]] = {}


def _interval(x: np.ndarray, resamples: int, seed: int | str) -> tuple[float, float, float]:
    mean = float(x.mean())
    if x.size < 2 or _exactly_constant(x):
        return mean, mean, mean
    rng = np.random.default_rng(seeding.derive(seed, "bootstrap"))
    # 32-bit draws below 2**32 are the very numbers numpy draws for 64-bit ones, in half the memory
    index = np.int32 if x.size < 2 ** 31 else np.int64
    draws = rng.integers(0, x.size, size=(resamples, x.size), dtype=index)
    # the resamples' values a few rows at a time: each row's mean is the same to the bit, and the
    # rows gathered stay in the cache instead of filling a resamples x n array first
    rows = max(1, (1 << 19) // x.size)
    means = np.concatenate([x[draws[i:i + rows]].mean(axis=1) for i in range(0, resamples, rows)])
    low, high = np.percentile(means, [2.5, 97.5])
    return mean, float(low), float(high)


def _exactly_constant(x: np.ndarray) -> bool:
    """Every value the same (a judge's payoff of 0, say) and a number every resample's mean gives
    back to the bit: a multiple of 2**-20 small enough that each partial sum is exact. Its interval
    is that one point, which the resampling would only have confirmed."""
    v = float(x[0])
    return bool((x == v).all()) and (v * 2 ** 20).is_integer() and abs(v) * x.size < 2 ** 32


def summarize(scores: Iterable[ScoreRow], turns: Iterable[TurnRow] = (), resamples: int = 2000,
              metric: str | None = None) -> list[PayoffSummary]:
    """One row per (scenario entry, agent, role), best mean first within each entry and role, from
    the finished matches' ``scores`` under one metric (None: the payoffs; else the metric's name, for
    the label); ``turns`` adds the troubled turns of the matches scored (of every finished match, for
    the payoff). A seat not scored is left out.

    Values are taken in key order, so the intervals do not depend on the order
    in which matches happened to finish."""
    rows = [row for row in scores if row.scores]
    group_order = list(dict.fromkeys(row.group for row in rows))
    rows.sort(key=attrgetter("key"))
    payoffs: dict[tuple[str, str, str], list[float]] = defaultdict(list)
    for row in rows:
        for seat in row.seats:
            if seat.label in row.scores:
                payoffs[(row.group, seat.agent, seat.role)].append(row.scores[seat.label])
    scored = None if metric is None else {row.key for row in rows}
    invalid: dict[tuple[str, str, str], int] = defaultdict(int)
    timeouts: dict[tuple[str, str, str], int] = defaultdict(int)
    defaulted: dict[tuple[str, str, str], int] = defaultdict(int)
    taken: dict[tuple[str, str, str], int] = defaultdict(int)
    for turn in turns:
        if scored is None or turn.key in scored:
            cell = (turn.group, turn.agent, turn.role)
            invalid[cell] += turn.invalid
            timeouts[cell] += turn.timeouts
            defaulted[cell] += turn.defaulted
            taken[cell] += turn.turns
    summaries = []
    for key, values in payoffs.items():
        group, agent, role = key
        mean, low, high = bootstrap_interval(values, resamples, seed=f"{group}/{agent}/{role}")
        std = float(np.std(values, ddof=1)) if len(values) > 1 else 0.0
        summaries.append(PayoffSummary(group=group, metric=metric or "payoff", agent=agent, role=role,
                                       matches=len(values), mean=mean, low=low, high=high, std=std,
                                       invalid_replies=invalid[key], timeouts=timeouts[key],
                                       defaulted_turns=defaulted[key],
                                       **stands_on(taken[key], defaulted[key])))
    summaries.sort(key=lambda r: (group_order.index(r.group), r.role, -r.mean, r.agent))
    return summaries


def role_tables(scores: Iterable[ScoreRow], metric: str | None = None, resamples: int = 2000) -> list[RoleTable]:
    """Eq. 2 laid out as DeepEval prints it, for every entry whose matches have exactly two roles,
    from the finished matches' ``scores`` under one metric (None: the payoffs; else the metric's
    name, for the label). A cell holds only matches where both seats were scored."""
    by_group: dict[str, list[ScoreRow]] = defaultdict(list)
    for row in sorted(scores, key=attrgetter("key")):
        by_group[row.group].append(row)
    tables = []
    for group, members in by_group.items():
        roles = list(dict.fromkeys(seat.role for seat in members[0].seats))
        if len(roles) != 2 or any(len(r.seats) != 2 for r in members):
            continue
        first, second = roles
        cells: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
        as_first: dict[str, list[float]] = defaultdict(list)
        as_second: dict[str, list[float]] = defaultdict(list)
        for row in members:
            a = next(s for s in row.seats if s.role == first)
            b = next(s for s in row.seats if s.role == second)
            scores = row.scores
            if a.label not in scores or b.label not in scores:
                continue
            pa, pb = scores[a.label], scores[b.label]
            cells[(a.agent, b.agent)].append((pa, pb))
            as_first[a.agent].append(pa)
            as_second[b.agent].append(pb)
        if not cells:
            continue
        agents = sorted(set(as_first) | set(as_second))
        table_cells: dict[str, dict[str, RoleCell]] = defaultdict(dict)
        for (a, b), scores in cells.items():
            arr = np.asarray(scores)
            table_cells[a][b] = RoleCell(matches=len(scores), scores=(float(arr[:, 0].mean()), float(arr[:, 1].mean())))
        tables.append(
            RoleTable(
                group=group, metric=metric or "payoff", roles=(first, second), agents=agents, cells=dict(table_cells),
                row_means={a: float(np.mean(v)) for a, v in as_first.items()},
                column_means={b: float(np.mean(v)) for b, v in as_second.items()},
                row_intervals={a: bootstrap_interval(v, resamples, f"{group}/{metric}/{a}/{first}")[1:]
                               for a, v in as_first.items()},
                column_intervals={b: bootstrap_interval(v, resamples, f"{group}/{metric}/{b}/{second}")[1:]
                                  for b, v in as_second.items()},
            )
        )
    return tables
