"""How many judge calls each adaptive rule needs to find the true ranking, on synthetic
tournaments whose truth is known (issue 37, item 1). No engine: the rules of
``arena.rank.adaptive`` choose comparisons and a simulation answers them.

Each tournament: 12 contestants of evenly spaced quality (in an order unrelated to their names),
80 questions on which each contestant's answer is better or worse than its quality by a normal
draw, and 3 judges. Two judges read the better answer with a logistic error; the third does too,
but in a share of its calls it prefers whichever answer it reads first, whatever the answers. A
comparison asks one judge both orders (2 calls) and scores their mean, so the position-biased
judge's habit cancels into ties instead of pointing the wrong way.

Every rule but ``full`` opens with the same seed block (each contestant in 3 comparisons) and
then asks blocks of 100 comparisons (200 calls); ``full`` plays the whole design question by
question, as a run without adaptivity does (its total is 31,680 calls). After each block the
ratings (``arena.rank.adaptive.ratings``, the same estimate for every rule) are compared with the
truth by Kendall's tau. Printed, medians over 10 seeds:

- calls needed: the first budget from which tau stays >= 0.9 to the end of the run;
- tau at fixed budgets;
- the ratios full/default, uniform/default, interval/default and elimination/default;
- which contestants elimination settled, when, at which place, and whether that place is the true
  one, on this field and on a *spread* field (the same but for the best and the worst, which stand
  ``SPREAD_GAP`` from the ten between them), where uniform, elimination and default are played too.

    .venv/bin/python bench/adaptive.py            # 10 seeds, a few minutes on two busy cores
    .venv/bin/python bench/adaptive.py --quick    # 3 seeds, a shorter run

Exits with status 1 when the goal is missed.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
import time

import numpy as np

from arena.rank.adaptive import DELTA, RULES, Comparison, Outcome, choose, design, ratings, seed_block, settled_places
from arena.run.stability import kendall_tau

CONTESTANTS = 12
QUESTIONS = 80
JUDGES = ("judge-a", "judge-b", "judge-first")  # judge-first favours the answer it reads first
SHARPNESS = (1.5, 1.2, 1.5)  # logistic slope of each judge's reading of a quality difference
FIRST_SHARE = (0.0, 0.0, 0.6)  # share of calls in which a judge simply prefers the first answer
SPACING = 0.1  # quality between neighbours
QUESTION_NOISE = 0.25  # sd of an answer's quality around its contestant's
SEED_PER_CONTESTANT = 3
BLOCK = 100  # comparisons per block after the seed block (200 calls)
MAX_CALLS = 12_000  # where an adaptive run ends
BUDGETS = (500, 1000, 2000, 4000, 8000)
GOAL_TAU = 0.9
FIELDS = ("even", "spread")
SPREAD_GAP = 1.5  # in the spread field: how far the best and the worst stand from the ten between them
SPREAD_RULES = ("uniform", "elimination", "default")  # the rules played on the spread field too


class World:
    """One truth-known tournament; the outcome of a comparison is drawn once per world, so every
    rule that asks the same comparison sees the same answer."""

    def __init__(self, seed: int, field: str = "even"):
        rng = np.random.default_rng([seed, 37])
        self.names = [f"model-{k:02d}" for k in range(CONTESTANTS)]
        levels = SPACING * np.arange(CONTESTANTS)  # even: neighbours SPACING apart
        if field == "spread":  # the ten in the middle as close, the best and the worst far from them
            levels = np.r_[-SPREAD_GAP, SPACING * np.arange(CONTESTANTS - 2), SPACING * (CONTESTANTS - 3) + SPREAD_GAP]
        self.quality = dict(zip(self.names, levels[rng.permutation(CONTESTANTS)].tolist()))
        ranked = sorted(self.names, key=lambda n: -self.quality[n])
        self.place = {n: k + 1 for k, n in enumerate(ranked)}  # the true place, 1: best
        q = np.array([self.quality[n] for n in self.names])
        self.cases = [f"q{c:02d}" for c in range(QUESTIONS)]
        self.answer = q[:, None] + QUESTION_NOISE * rng.standard_normal((CONTESTANTS, QUESTIONS))
        # per (question, shown first, shown second, judge): the draws of that one call
        shape = (QUESTIONS, CONTESTANTS, CONTESTANTS, len(JUDGES))
        self.read = rng.random(shape)
        self.habit = rng.random(shape)
        self.index = {n: k for k, n in enumerate(self.names)}
        self.case_index = {c: k for k, c in enumerate(self.cases)}
        self.judge_index = {j: k for k, j in enumerate(JUDGES)}

    def candidates(self) -> list[Comparison]:
        return design(self.cases, self.names, JUDGES)

    def call(self, case: str, shown_first: str, shown_second: str, judge: str) -> int:
        """-1: the answer shown first is better, +1: the second."""
        c, f, s, j = self.case_index[case], self.index[shown_first], self.index[shown_second], self.judge_index[judge]
        if self.habit[c, f, s, j] < FIRST_SHARE[j]:
            return -1
        d = self.answer[s, c] - self.answer[f, c]
        return 1 if self.read[c, f, s, j] < 1 / (1 + math.exp(-SHARPNESS[j] * d)) else -1

    def outcome(self, x: Comparison) -> Outcome:
        forward = self.call(x.case, x.first, x.second, x.judge)
        backward = -self.call(x.case, x.second, x.first, x.judge)  # back in the pair's own frame
        return Outcome(x, (forward + backward) / 2)

    def tau(self, outcomes: list[Outcome]) -> float:
        r = ratings(outcomes, self.names)
        return kendall_tau(self.quality, dict(zip(r.names, r.scores.tolist())))


def play(rule: str, world: World, seed: int, max_calls: int, settles: list | None = None) -> list[tuple[int, float]]:
    """(calls so far, tau) after each block. ``settles`` (for elimination) gets (calls, name,
    place) each time a contestant is first settled, as the rule sees it before its next block."""
    candidates = world.candidates()
    outcomes: list[Outcome] = []
    trace = []
    if rule == "full":
        order = choose("full", candidates, [], len(candidates), seed, 0)  # the whole design, in its order
        for start in range(0, len(order), BLOCK):
            outcomes += [world.outcome(x) for x in order[start:start + BLOCK]]
            trace.append((2 * len(outcomes), world.tau(outcomes)))
        return trace
    block = seed_block(candidates, world.names, SEED_PER_CONTESTANT, seed)
    number = 0
    done: set[str] = set()  # settled so far (elimination): they stay settled
    while block:
        outcomes += [world.outcome(x) for x in block]
        trace.append((2 * len(outcomes), world.tau(outcomes)))
        if 2 * len(outcomes) >= max_calls:
            break
        number += 1
        if rule == "elimination":
            places = settled_places(outcomes, world.names)
            if settles is not None:
                settles += [(2 * len(outcomes), name, place) for name, place in sorted(places.items()) if name not in done]
            done |= set(places)
        block = choose(rule, candidates, outcomes, BLOCK, seed, number, done)
    return trace


def calls_needed(trace: list[tuple[int, float]]) -> float:
    """The first budget from which tau stays at the goal to the end; inf when the run ends below it."""
    needed = math.inf
    for calls, tau in reversed(trace):
        if tau < GOAL_TAU:
            break
        needed = calls
    return needed


def tau_at(trace: list[tuple[int, float]], budget: int) -> float:
    """Tau of the last estimate made within ``budget`` calls (the full run's last one past its end)."""
    within = [tau for calls, tau in trace if calls <= budget]
    return within[-1] if within else math.nan


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="3 seeds instead of 10")
    parser.add_argument("--seeds", type=int, default=None)
    args = parser.parse_args()
    seeds = args.seeds or (3 if args.quick else 10)
    with open("/proc/loadavg") as f:
        load = f.read().split()[:3]
    print(f"adaptive comparisons: {CONTESTANTS} contestants, {QUESTIONS} questions, {len(JUDGES)} judges "
          f"(one prefers the first answer in {FIRST_SHARE[-1]:.0%} of its calls), {seeds} seeds; "
          f"load {' '.join(load)}, {os.cpu_count()} cores")
    needed: dict[str, list[float]] = {rule: [] for rule in RULES}
    at: dict[str, list[list[float]]] = {rule: [] for rule in RULES}
    spent: dict[str, float] = {}
    settles: dict[str, list[list]] = {field: [] for field in FIELDS}  # per field, per seed: elimination's settles
    spread: dict[str, list[float]] = {rule: [] for rule in SPREAD_RULES}  # calls needed on the spread field
    for seed in range(seeds):
        world = World(seed)
        for rule in RULES:
            start = time.perf_counter()
            events = [] if rule == "elimination" else None
            trace = play(rule, world, seed, MAX_CALLS, events)
            spent[rule] = spent.get(rule, 0.0) + time.perf_counter() - start
            needed[rule].append(calls_needed(trace))
            at[rule].append([tau_at(trace, b) for b in BUDGETS])
            if events is not None:
                settles["even"].append([(calls, place, world.place[name]) for calls, name, place in events])
        print(f"seed {seed}: " + ", ".join(f"{rule} {needed[rule][-1]:.0f}" for rule in RULES), file=sys.stderr)
        world = World(seed, "spread")
        for rule in SPREAD_RULES:
            events = [] if rule == "elimination" else None
            spread[rule].append(calls_needed(play(rule, world, seed, MAX_CALLS, events)))
            if events is not None:
                settles["spread"].append([(calls, place, world.place[name]) for calls, name, place in events])
        print(f"seed {seed}, spread field: " + ", ".join(f"{rule} {spread[rule][-1]:.0f}" for rule in SPREAD_RULES)
              + f"; settled {settles['spread'][-1]}", file=sys.stderr)
    median = {rule: float(np.median(needed[rule])) for rule in RULES}
    full_total = 2 * len(World(0).candidates())
    print(f"\njudge calls until Kendall's tau with the truth stays >= {GOAL_TAU} "
          f"(median over seeds; adaptive runs end at {MAX_CALLS}, the full design at {full_total}):")
    print(f"{'rule':<12} {'median':>8} {'min':>8} {'max':>8}   tau at " + " ".join(f"{b:>6}" for b in BUDGETS)
          + "   seconds")
    for rule in RULES:
        taus = np.median(np.array(at[rule]), axis=0)
        print(f"{rule:<12} {median[rule]:>8.0f} {min(needed[rule]):>8.0f} {max(needed[rule]):>8.0f}   "
              + "       " + " ".join(f"{t:>6.3f}" for t in taus) + f"   {spent[rule]:7.1f}")
    print()
    base = median["default"]
    print(f"full design, all of it / default: {full_total / base:.2f}")
    for rule in ("full", "uniform", "interval", "elimination"):
        print(f"{rule} / default: {median[rule] / base:.2f}")
    print(f"\nelimination's settled contestants (Borda intervals, all right together with probability "
          f">= {1 - DELTA:.0%}); per seed: (calls when first settled, place given, true place)")
    for field in FIELDS:
        runs = settles[field]
        wrong = sum(any(place != true for _, place, true in run) for run in runs)
        first = [run[0][0] for run in runs if run]
        print(f"  {field} field: settled {sum(map(len, runs))} contestants in {sum(map(bool, runs))} of {len(runs)} "
              f"runs; first settled at {np.median(first) if first else math.nan:.0f} calls (median of those runs); "
              f"runs with a wrong place: {wrong} of {len(runs)}")
        for seed, run in enumerate(runs):
            print(f"    seed {seed}: {run}")
    print(f"spread field (the best and the worst {SPREAD_GAP} from the ten between them), calls until tau stays "
          f">= {GOAL_TAU}, median: " + ", ".join(f"{rule} {np.median(spread[rule]):.0f}" for rule in SPREAD_RULES))
    taus = {rule: np.median(np.array(at[rule]), axis=0) for rule in RULES}
    beaten = all(taus["default"][k] >= max(taus[r][k] for r in ("uniform", "interval")) for k in range(len(BUDGETS)))
    print(f"default's median tau at least uniform's and interval's at every budget: {beaten}")
    goal = (3 * base <= median["full"] and base < median["uniform"] and base < median["interval"] and beaten)
    print(f"goal (default >= 3x fewer calls than the full design in its order, fewer than uniform and interval, "
          f"tau at least theirs at every budget): {'met' if goal else 'NOT met'}")
    sys.exit(0 if goal else 1)


if __name__ == "__main__":
    main()
