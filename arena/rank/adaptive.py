"""Which comparisons to ask for next: the pure decision logic of an adaptive schedule.

A *comparison* is one question (``case``), one unordered pair of contestants and one judge; the
judge is always asked both presentation orders, so a comparison costs two judge calls and its
outcome is the calibrated verdict over both orders, a score in [-1, 1] (-1: ``first`` better, +1:
``second`` better, 0: a tie). Nothing here plays a match: the runner and ``bench/adaptive.py``
hand in what was played and get back what to play.

Every rule is deterministic: the block it returns depends only on the rule, the candidates as a
set, the outcomes as a multiset, the block size, the seed and the block number. Inputs are sorted
before use and random draws come from a numpy Generator seeded with ``(seed, block)``, so a run
that resumes after a kill asks for the same comparisons as one that never stopped.

The rules (docs/peer-rank.md, "Adaptive comparisons"):

- ``full``: the whole design, question by question (every pair and judge on the first question,
  then the second, ...), the order a non-adaptive run plays it. The yardstick.
- ``uniform``: any comparison not yet played, each as likely as the next.
- ``interval``: Chatbot Arena's rule. A pair is drawn with probability proportional to how much one
  more comparison would narrow the interval of its win rate, sqrt(v/n) - sqrt(v/(n+1)) with v the
  variance of one outcome of the pair and n the comparisons it has had; then an unplayed question
  and judge for it, uniformly.
- ``elimination``: active ranking (Heckel, Shah, Ramchandran and Wainwright, 2019). Each
  contestant's Borda score, its chance to beat an opponent drawn at random, is estimated with an
  interval that holds with probability ``1 - DELTA`` for all contestants at all times (see
  ``borda``); a contestant whose interval clears every other contestant's has its place settled and
  is compared no more (the caller hands back the ones settled earlier, so that they stay settled). Each block goes round the unsettled contestants, giving each one comparison
  at a time against the unsettled opponent it has met least; when none is left, the rule asks for
  nothing more, as the whole ranking is settled.
- ``default``: Arena's own, built for what decides a ranking (see ``_default``): pairs are drawn by
  the chance that the current estimate has them in the wrong order, each gets a question it has not
  been asked yet, and the judge whose verdicts agree best with the consensus.

``seed_block`` opens a run before any of them has outcomes to go on, and ``swiss_pairs`` pairs a
round of a Swiss tournament for games that are played rather than reviewed.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import NamedTuple

import numpy as np

from arena.contract.errors import ArenaError

from .bradley_terry import ELO_SCALE

RULES = ("full", "uniform", "interval", "elimination", "default")
Z = 1.959963984540054  # a 95% interval: estimate ± Z standard errors
DELTA = 0.05  # elimination's risk: the chance that any settled place is wrong (Borda intervals, see borda())
PRIOR = 0.5  # virtual comparisons, half won each way, between every two contestants: keeps strengths finite


class PolicyError(ArenaError, ValueError):
    """Input an adaptive rule cannot decide on: an unknown rule, a pair in the wrong order, a score out of range."""


class Comparison(NamedTuple):
    """One question asked of one judge about one pair, in both presentation orders. The pair is
    unordered, so it is written sorted (``first < second``): use ``comparison()`` to build one from
    any two names."""

    case: str
    first: str
    second: str
    judge: str


class Outcome(NamedTuple):
    comparison: Comparison
    score: float  # the verdict over both orders, in [-1, 1]: -1 first better, +1 second better, 0 a tie


def comparison(case: str, a: str, b: str, judge: str) -> Comparison:
    """The comparison of ``a`` and ``b``, in whichever order they were given."""
    if a == b:
        raise PolicyError(f"a comparison needs two different contestants, got {a!r} twice (question {case!r})")
    first, second = sorted((a, b))
    return Comparison(case, first, second, judge)


def design(cases: Iterable[str], contestants: Iterable[str], judges: Iterable[str]) -> list[Comparison]:
    """The full design: every pair of contestants on every question by every judge, sorted."""
    names, judges = sorted(set(contestants)), sorted(set(judges))
    return [Comparison(case, a, b, judge) for case in sorted(set(cases)) for i, a in enumerate(names)
            for b in names[i + 1:] for judge in judges]


def flipped(a: str, b: str, score: float) -> float:
    """A score given with ``a`` as the first answer, turned into the sorted pair's frame."""
    return score if a < b else -score


class _Checked(list):
    """A list already checked and sorted here: the helpers one call runs hand it on without
    checking and sorting it again."""


def _checked(candidates: Iterable[Comparison]) -> list[Comparison]:
    if isinstance(candidates, _Checked):
        return candidates
    given = set(candidates)
    if not all(type(c) is Comparison for c in given):
        given = {_as_comparison(c) for c in given}
    out = _Checked(sorted(given))
    for c in out:
        if not c.first < c.second:
            raise PolicyError(f"comparison {tuple(c)} names its pair out of order: the first contestant must sort "
                              f"before the second ({c.first!r} < {c.second!r}); build it with comparison()")
    return out


def _as_comparison(c) -> Comparison:
    """A comparison given as a plain (case, first, second, judge) tuple, read as one."""
    if isinstance(c, tuple) and len(c) == 4 and all(isinstance(part, str) for part in c):
        return Comparison(*c)
    raise PolicyError(f"{c!r} is not a comparison: give (case, first, second, judge), four names")


def _checked_outcomes(outcomes: Iterable[Outcome]) -> list[Outcome]:
    if isinstance(outcomes, _Checked):
        return outcomes
    out = _Checked(outcomes)
    try:  # one pass that says only whether all is well, as a run hands in thousands
        fine = all(type(o) is Outcome and type(o.comparison) is Comparison and o.comparison.first < o.comparison.second
                   and -1 <= o.score <= 1 for o in out)  # NaN fails
    except TypeError:  # a score that is no number
        fine = False
    if not fine:
        out = _Checked(_as_outcome(o) for o in out)
    # not sorted (a sort of every outcome per block cost more than the rest): every sum over them
    # is taken with math.fsum, exactly rounded, so it comes out bit for bit the same in any order
    return out


def _as_outcome(o) -> Outcome:
    if not (isinstance(o, tuple) and len(o) == 2):
        raise PolicyError(f"{o!r} is not an outcome: give (comparison, score)")
    c = o[0] if type(o[0]) is Comparison else _as_comparison(o[0])
    if not c.first < c.second:
        _checked([c])  # raises, with the message
    score = o[1]
    if not (isinstance(score, (int, float)) and not isinstance(score, bool) and -1 <= score <= 1):
        raise PolicyError(f"the outcome of {tuple(c)} has score {score!r}; a score is a number "
                          "from -1 (first better) to 1 (second better)")
    return Outcome(c, score)


def _rng(seed: int, block: int) -> np.random.Generator:
    return np.random.default_rng([int(seed) & 0xFFFFFFFF, int(block) & 0xFFFFFFFF])


# --- the estimate every rule looks at -------------------------------------------------------------

class Ratings(NamedTuple):
    names: list[str]  # sorted
    scores: np.ndarray  # Bradley–Terry strengths on the Elo scale (mean 1000, 400 per factor of 10 in odds)
    lower: np.ndarray  # 95% interval of each strength
    upper: np.ndarray
    covariance: np.ndarray  # of the log-strengths, for the intervals of differences


def _scores_by_pair(outcomes: Sequence[Outcome], contestants: Iterable[str]
                    ) -> tuple[dict[tuple[str, str], list[float]], list[str], dict[str, int]]:
    """The checked outcomes' scores grouped by (sorted) pair, every name (the outcomes' and the
    ``contestants`` given) sorted, and each name's place in that list: where both estimates start."""
    by_pair = defaultdict(list)
    for o in _checked_outcomes(outcomes):
        by_pair[o.comparison.first, o.comparison.second].append(o.score)
    names = sorted(set(contestants) | {n for pair in by_pair for n in pair})
    return by_pair, names, {n: i for i, n in enumerate(names)}


def ratings(outcomes: Sequence[Outcome], contestants: Iterable[str] = ()) -> Ratings:
    """Bradley–Terry fitted to the outcomes taken as fractional wins (a score s gives the first
    contestant (1 - s)/2 of a win), with ``PRIOR`` virtual even comparisons between every two
    contestants; intervals from the curvature of the likelihood (the Fisher information), which
    needs no resampling and so costs a millisecond per block. ``contestants`` adds names that have
    not played yet."""
    by_pair, names, index = _scores_by_pair(outcomes, contestants)
    C = len(names)
    if C == 0:
        empty = np.zeros(0)
        return Ratings([], empty, empty, empty, np.zeros((0, 0)))
    wins = np.full((C, C), PRIOR / 2) * (1 - np.eye(C))  # wins[i, j]: what i won from j
    for (a, b), scores in by_pair.items():
        i, j, total = index[a], index[b], math.fsum(scores)
        wins[i, j] += (len(scores) - total) / 2  # each outcome s gives the first (1 - s)/2
        wins[j, i] += (len(scores) + total) / 2
    theta, covariance = _fit(wins)
    se = np.sqrt(np.maximum(np.diag(covariance), 0))
    scores = 1000 + ELO_SCALE * theta
    return Ratings(names, scores, scores - Z * ELO_SCALE * se, scores + Z * ELO_SCALE * se, covariance)


def _fit(wins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Bradley–Terry log-strengths (centred) by Newton's method, and their covariance, the
    inverse of the Fisher information on the sum-zero subspace (strengths are fixed only up to a
    shift). The prior makes the likelihood strictly concave there, so Newton converges in a few
    steps, where the MM iteration the leaderboard uses takes hundreds."""
    C = wins.shape[0]
    games = wins + wins.T
    total = wins.sum(axis=1)
    ones = np.ones((C, C)) / C  # adding it makes the information invertible without moving the answer
    theta = np.zeros(C)
    for _ in range(100):
        p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))  # p[i, j]: chance that i beats j
        gradient = total - (games * p).sum(axis=1)
        info = -games * p * p.T
        np.fill_diagonal(info, 0)
        np.fill_diagonal(info, -info.sum(axis=1))
        step = np.linalg.solve(info + ones, gradient)
        step *= min(1.0, 2.0 / max(np.max(np.abs(step)), 1e-300))  # no leap past where the quadratic holds
        theta = theta + step
        theta -= theta.mean()
        if np.max(np.abs(step)) < 1e-10:
            break
    p = 1 / (1 + np.exp(theta[None, :] - theta[:, None]))
    info = -games * p * p.T
    np.fill_diagonal(info, 0)
    np.fill_diagonal(info, -info.sum(axis=1))
    covariance = np.linalg.inv(info + ones) - ones
    return theta, covariance


class Borda(NamedTuple):
    names: list[str]  # sorted
    scores: np.ndarray  # estimated chance to beat an opponent drawn at random, in [0, 1]
    lower: np.ndarray  # an interval that holds for every contestant at every check with probability 1 - DELTA
    upper: np.ndarray


def borda(outcomes: Sequence[Outcome], contestants: Iterable[str] = (), delta: float = DELTA) -> Borda:
    """Each contestant's Borda score (Heckel et al., 2019): its share of wins, averaged over its
    opponents, so that every opponent counts the same however often it was met. An outcome s gives
    the pair's first contestant (1 - s)/2 of a win.

    The interval is Hoeffding's for a weighted mean of outcomes in [0, 1]: the estimate of
    contestant i is sum_j p_ij / (C - 1) with p_ij the mean of its n_ij outcomes against j, so each
    outcome weighs 1 / ((C - 1) n_ij), and the half-width is sqrt(log(2 / d) * sum_j (1 / n_ij) /
    (2 (C - 1)^2)). An opponent never met adds its whole possible range, 1 / (2 (C - 1)) each way,
    around an even 1/2. ``d = delta / (C m (m + 1))`` for a contestant with m outcomes: a union bound
    over the C contestants and over every number of outcomes a contestant can have when its
    interval is looked at (the sum of 1 / (m (m + 1)) is 1), so that looking after every block
    costs no confidence. The bound takes each n_ij as fixed; the elimination rule's pairing (the
    opponent met least) depends on the outcomes only through who is settled, so it nearly is."""
    by_pair, names, index = _scores_by_pair(outcomes, contestants)
    C = len(names)
    if C < 2:  # nobody to beat: the score means nothing and nothing can be settled
        return Borda(names, np.full(C, 0.5), np.zeros(C), np.ones(C))
    share = np.full((C, C), 0.5)  # share[i, j]: i's mean share of wins against j (an even 1/2 unmet)
    count = np.zeros((C, C))
    for (a, b), scores in by_pair.items():
        i, j, n, total = index[a], index[b], len(scores), math.fsum(scores)
        share[i, j], share[j, i] = (n - total) / (2 * n), (n + total) / (2 * n)
        count[i, j] = count[j, i] = n
    off = ~np.eye(C, dtype=bool)
    scores = np.where(off, share, 0).sum(axis=1) / (C - 1)
    met = count > 0
    inverse = np.where(met, 1 / np.where(met, count, 1), 0).sum(axis=1)
    unmet = (off & ~met).sum(axis=1)
    m = count.sum(axis=1)
    log_term = np.log(2 * C * np.maximum(m, 1) * (m + 1) / delta)
    half = np.sqrt(log_term * inverse / (2 * (C - 1) ** 2)) + unmet / (2 * (C - 1))
    return Borda(names, scores, np.clip(scores - half, 0, 1), np.clip(scores + half, 0, 1))


def settled_places(outcomes: Sequence[Outcome], contestants: Iterable[str] = (), delta: float = DELTA
                   ) -> dict[str, int]:
    """The contestants whose place is settled, with that place (1: best): those whose Borda
    interval clears every other contestant's, so that the ones above and below them are known.
    A contestant that has not played is never settled."""
    b = borda(outcomes, contestants, delta)
    out = {}
    for i, name in enumerate(b.names):
        others = np.arange(len(b.names)) != i
        above = b.lower[others] > b.upper[i]
        below = b.upper[others] < b.lower[i]
        if len(b.names) > 1 and np.all(above | below):
            out[name] = 1 + int(above.sum())
    return out


def settled(outcomes: Sequence[Outcome], contestants: Iterable[str] = (), delta: float = DELTA) -> set[str]:
    """The names of ``settled_places``."""
    return set(settled_places(outcomes, contestants, delta))


# --- the opening block ------------------------------------------------------------------------------

def seed_block(candidates: Sequence[Comparison], contestants: Iterable[str], per_contestant: int,
               seed: int) -> list[Comparison]:
    """The opening block: comparisons until every contestant is in at least ``per_contestant`` of
    them (or has no candidate left), each new one taken for the contestant that has the fewest so
    far, against the opponent with the fewest, on the question and judge used least so far; the
    remaining ties are broken by a draw seeded with ``seed``. Spreading over opponents, questions
    and judges makes the first estimate as little hostage to one of them as it can be."""
    pool = _checked(candidates)
    names = sorted(set(contestants))
    rng = _rng(seed, -1)
    key = dict(zip(pool, rng.permutation(len(pool)).tolist()))  # the seeded tie-break
    involving = defaultdict(list)
    for c in pool:
        involving[c.first].append(c)
        involving[c.second].append(c)
    count = Counter({n: 0 for n in names})
    met, cases, judges = Counter(), Counter(), Counter()
    chosen: set[Comparison] = set()
    out: list[Comparison] = []
    while True:
        short = [n for n in names if count[n] < per_contestant and any(c not in chosen for c in involving[n])]
        if not short:
            return out
        name = min(short, key=lambda n: (count[n], n))
        best = min((c for c in involving[name] if c not in chosen),
                   key=lambda c: (count[c.second if c.first == name else c.first], met[c.first, c.second],
                                  cases[c.case], judges[c.judge], key[c]))
        chosen.add(best)
        out.append(best)
        count[best.first] += 1
        count[best.second] += 1
        met[best.first, best.second] += 1
        cases[best.case] += 1
        judges[best.judge] += 1


# --- the next block ---------------------------------------------------------------------------------

def choose(rule: str, candidates: Sequence[Comparison], outcomes: Sequence[Outcome], size: int, seed: int,
           block: int, settled_before: Iterable[str] = ()) -> list[Comparison]:
    """The next ``size`` comparisons by ``rule``, among the candidates not played yet (fewer when
    fewer are left). A comparison counts as played when an outcome names it. ``settled_before``
    (elimination only): the contestants ``settled`` named after earlier blocks, which the caller
    keeps, as a run keeps its checks. They stay settled: a neighbour's interval that later grows
    back over one of them (a neighbour's estimate moves as it plays on) does not bring it back."""
    if rule not in RULES:
        raise PolicyError(f"unknown adaptive rule {rule!r}; the rules are {', '.join(RULES)}")
    if size < 0:
        raise PolicyError(f"a block holds zero or more comparisons, not {size}")
    pool = _checked(candidates)
    outcomes = _checked_outcomes(outcomes)
    played = {o.comparison for o in outcomes}
    open_ = [c for c in pool if c not in played]
    if size == 0 or not open_:
        return []
    rng = _rng(seed, block)
    if rule == "elimination":  # it leaves out settled contestants even when few comparisons are left
        return _elimination(open_, outcomes, size, rng, set(settled_before))
    if len(open_) <= size:
        return open_
    if rule == "full":
        return open_[:size]
    if rule == "uniform":
        return [open_[i] for i in sorted(rng.choice(len(open_), size, replace=False).tolist())]
    if rule == "interval":
        return _interval(open_, outcomes, size, rng)
    return _default(open_, outcomes, size, rng)


def _by_pair(open_: list[Comparison]) -> dict[tuple[str, str], list[Comparison]]:
    out = defaultdict(list)
    for c in open_:
        out[c.first, c.second].append(c)
    return dict(sorted(out.items()))


def _draw_pairs(weights: dict[tuple[str, str], float], left: dict[tuple[str, str], int], size: int,
                rng: np.random.Generator) -> list[tuple[str, str]]:
    """``size`` pair draws, each with probability proportional to its weight, never more of a
    pair than it has comparisons left; pairs of weight zero only once the others run out."""
    pairs = sorted(left)
    w = np.array([max(weights.get(p, 0.0), 0.0) for p in pairs])
    room = np.array([left[p] for p in pairs])
    out = []
    for _ in range(size):
        live = room > 0
        if not live.any():
            break
        p = np.where(live, w, 0.0)
        if p.sum() <= 0:
            p = live.astype(float)
        k = int(rng.choice(len(pairs), p=p / p.sum()))
        room[k] -= 1
        out.append(pairs[k])
    return out


def _interval(open_, outcomes, size, rng):
    """Chatbot Arena's rule: weight a pair by sqrt(v/n) - sqrt(v/(n+1)), the narrowing of its
    win rate's standard error that one more outcome buys, v being the variance of the pair's
    outcomes (a fair coin's 1/4 until it has two); a pair never played gets sqrt(v), more than one
    more outcome can buy any played pair."""
    by_pair = _by_pair(open_)
    scores = defaultdict(list)
    for o in outcomes:
        scores[o.comparison.first, o.comparison.second].append((1 + o.score) / 2)
    weights = {}
    for pair in by_pair:
        s = sorted(scores.get(pair, []))  # sorted: the variance's rounding must not depend on order
        n = len(s)
        v = float(np.var(s, ddof=1)) if n >= 2 else 0.25
        v = max(v, 1e-3)  # a pair with identical outcomes so far is not certain yet
        weights[pair] = math.sqrt(v) if n == 0 else math.sqrt(v / n) - math.sqrt(v / (n + 1))
    return _fill(by_pair, _draw_pairs(weights, {p: len(cs) for p, cs in by_pair.items()}, size, rng), rng)


def _fill(by_pair, draws, rng):
    """For each drawn pair, one of its open comparisons, uniformly."""
    taken = {p: list(cs) for p, cs in by_pair.items()}
    return sorted(taken[pair].pop(int(rng.integers(len(taken[pair])))) for pair in draws)


def _elimination(open_, outcomes, size, rng, settled_before):
    """Rounds over the unsettled contestants, in an order drawn for each round: each gets one
    comparison against the unsettled opponent it has met least (ties drawn), on a question and
    judge drawn from that pair's open ones. Settled contestants are not compared again, not even
    as opponents (where the paper still draws them): their place is known, and the comparisons
    among the others are what can still change the ranking."""
    names = {n for c in open_ for n in (c.first, c.second)} | {n for o in outcomes for n in o.comparison[1:3]}
    done = settled(outcomes, names) | settled_before
    by_pair = {pair: cs for pair, cs in _by_pair(open_).items() if pair[0] not in done and pair[1] not in done}
    active = sorted({n for pair in by_pair for n in pair})
    met = Counter((o.comparison.first, o.comparison.second) for o in outcomes)
    tie_break = dict(zip(active, rng.permutation(len(active)).tolist()))
    taken = {p: list(cs) for p, cs in by_pair.items()}
    out = []
    while len(out) < size and any(taken.values()):
        for i in [active[k] for k in rng.permutation(len(active)).tolist()]:
            pairs = [p for p in taken if i in p and taken[p]]
            if not pairs or len(out) == size:
                continue
            pair = min(pairs, key=lambda p: (met[p], tie_break[p[0] if p[1] == i else p[1]]))
            out.append(taken[pair].pop(int(rng.integers(len(taken[pair])))))
            met[pair] += 1
    return sorted(out)


def judge_agreement(outcomes: Sequence[Outcome], r: Ratings | None = None) -> dict[str, float]:
    """How well each judge's verdicts follow the consensus: the mean of score × the sign the
    current ratings give the pair (+1 when ``second`` rates higher), over its outcomes. Near 1 for a
    judge that sees what the panel sees, near 0 for one whose verdicts carry little (a judge that
    favours whichever answer it reads first cancels itself out over the two orders)."""
    outcomes = _checked_outcomes(outcomes)
    r = r or ratings(outcomes)
    index = {n: i for i, n in enumerate(r.names)}
    sign = np.sign(r.scores[None, :] - r.scores[:, None])  # sign[i, j]: +1 when j rates above i
    agree = defaultdict(list)
    for o in outcomes:
        agree[o.comparison.judge].append(o.score * sign[index[o.comparison.first], index[o.comparison.second]])
    return {j: math.fsum(agree[j]) / len(agree[j]) for j in sorted(agree)}


def _default(open_, outcomes, size, rng):
    """Arena's rule.

    What decides Kendall's tau is which pairs stand in the wrong order, and in a ranking those are
    neighbours whose intervals overlap; far-apart pairs are settled after a few comparisons and each
    one more is wasted. So a pair is drawn with probability proportional to the chance that the
    estimate has it backwards, Phi(-|d|/se) (d the strength difference, se its standard error),
    which is nearly all on adjacent, overlapping places and still gives a pair a chance when its
    standard error is large.

    Each drawn pair gets a question it has been asked least, because questions differ (one suits
    one contestant, the next another) and a new question averages that out where a second judge on
    the same question does not. Among the open comparisons on that question, the judge that agrees
    best with the consensus: its outcome moves the estimate the most, and a judge that favours the
    first answer it reads, whose two orders cancel into ties, is asked least. A judge with fewer than
    ``TRIAL`` outcomes when the block starts is preferred to the others, the least heard first, so
    that no judge is written off (or trusted) on the strength of a few verdicts.
    """
    by_pair = _by_pair(open_)
    r = ratings(outcomes, {n for pair in by_pair for n in pair})
    index = {n: i for i, n in enumerate(r.names)}
    weights = {}
    for a, b in by_pair:
        i, j = index[a], index[b]
        d = (r.scores[i] - r.scores[j]) / ELO_SCALE
        var = r.covariance[i, i] + r.covariance[j, j] - 2 * r.covariance[i, j]
        se = math.sqrt(max(var, 1e-12))
        weights[a, b] = 0.5 * math.erfc(abs(d) / se / math.sqrt(2))  # Phi(-|d|/se)
    agreement = judge_agreement(outcomes, r)
    heard = Counter(o.comparison.judge for o in outcomes)
    asked = Counter((o.comparison.first, o.comparison.second, o.comparison.case) for o in outcomes)
    order = dict(zip(open_, rng.permutation(len(open_)).tolist()))  # the seeded tie-break

    def preference(c):  # the judge's side of the choice, fixed for the block
        if heard[c.judge] < TRIAL:  # still on trial: its agreement is noise yet, so spread the trials
            return (0, heard[c.judge], order[c])
        return (1, -agreement.get(c.judge, 0.0), order[c])

    ranked: dict[tuple[str, str], list[Comparison]] = {}
    out = []
    for pair in _draw_pairs(weights, {p: len(cs) for p, cs in by_pair.items()}, size, rng):
        if pair not in ranked:
            ranked[pair] = sorted(by_pair[pair], key=preference)
        options = ranked[pair]
        best, fewest = None, math.inf
        for k, c in enumerate(options):  # the preferred option on a question this pair was asked least
            n = asked[pair[0], pair[1], c.case]
            if n < fewest:
                best, fewest = k, n
                if n == 0:
                    break
        c = options.pop(best)
        asked[pair[0], pair[1], c.case] += 1
        out.append(c)
    return sorted(out)


TRIAL = 10  # outcomes a judge gives before the default rule goes by its agreement


# --- Swiss tournaments ------------------------------------------------------------------------------

def swiss_rounds(n: int) -> int:
    """Rounds of a Swiss tournament of ``n`` contestants: ceil(log2 n), enough for one winner to
    emerge from pairings of equals."""
    if n < 1:
        raise PolicyError(f"a Swiss tournament needs contestants, got {n}")
    return max(0, math.ceil(math.log2(n)))


def swiss_pairs(standings: Mapping[str, float], played: set[frozenset[str]], seed: int,
                round: int) -> list[tuple[str, str]]:
    """One round's pairs. Contestants are sorted by standing, best first (equal standings in an
    order drawn with ``(seed, round)``), and each is paired with the nearest one below it that it has
    not met yet; when no such pairing of everyone exists, with the nearest one below, rematch or not.

    With an odd count one contestant has a bye: the lowest-standing one that has not had a bye yet
    (a bye is written in ``played`` as a one-name frozenset, ``frozenset({name})``). It is the one
    name of ``standings`` that no returned pair holds. Each pair is written best first."""
    for name, value in standings.items():
        if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value):
            raise PolicyError(f"the standing of {name!r} is {value!r}; a standing is a number (points so far)")
    rng = _rng(seed, round)
    names = sorted(standings)
    draw = dict(zip(names, rng.permutation(len(names)).tolist()))
    order = sorted(names, key=lambda n: (-standings[n], draw[n]))
    if len(order) % 2:
        had_bye = [n for n in reversed(order) if frozenset({n}) not in played]
        bye = had_bye[0] if had_bye else order[-1]
        order.remove(bye)
    pairs = _pair_without_rematch(order, played)
    if pairs is None:
        pairs = [(order[k], order[k + 1]) for k in range(0, len(order), 2)]
    return pairs


def _pair_without_rematch(order: list[str], played: set[frozenset[str]], budget: list[int] | None = None
                          ) -> list[tuple[str, str]] | None:
    """Neighbours first, backtracking on rematches; gives up (None) after a bounded search."""
    budget = budget if budget is not None else [10_000]
    if not order:
        return []
    head, rest = order[0], order[1:]
    for k, other in enumerate(rest):
        budget[0] -= 1
        if budget[0] < 0:
            return None
        if frozenset({head, other}) in played:
            continue
        tail = _pair_without_rematch(rest[:k] + rest[k + 1:], played, budget)
        if tail is not None:
            return [(head, other), *tail]
    return None
