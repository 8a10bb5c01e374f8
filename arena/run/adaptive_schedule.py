"""An adaptive schedule in the runner: an entry whose game reports reviews asks for a seed block of
comparisons, then, block by block, for those that say most about the ranking, until the ranking is
stable, the budget is spent or nothing is left to ask.

A comparison is (case, pair of answers, judge), played as one match that seats the judge alone and
shows it the pair in both orders (the game's ``PlaysComparisons``), so each comparison's outcome is
calibrated for position whatever else is asked. Which comparisons come next is a pure function of
the scenario, its seed and the outcomes so far (``arena.rank.adaptive``); outcomes are read from the
reviews of finished matches, whether this session played them or an earlier one did, so a resumed
run chooses what an uninterrupted one would have."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations

from pydantic import BaseModel

from arena.contract import plugins, seeding
from arena.contract.capabilities import Review
from arena.contract.records import MatchIdentity, MatchRecord, MatchSpec
from arena.contract.runs import MatchRow
from arena.rank.adaptive import Comparison, Outcome, choose, ratings, seed_block, settled
from arena.run.scenario import GameEntry, Scenario, entry_cases, entry_roles
from arena.run.stability import kendall_tau

STABLE, BUDGET, EXHAUSTED = "stable", "budget", "exhausted"
SILENT = 5  # comparisons a judge may leave without any valid verdict before the schedule stops asking it


class AdaptiveCheck(BaseModel):
    """Where an adaptive entry stood after a block: what the run reports, and why it stopped."""

    group: str
    block: int  # 0: the seed block
    comparisons: int  # asked so far, this block's included
    tau: float | None  # Kendall's tau against the ranking before this block; None after the seed block
    max_width: float  # the widest 95% interval of a contestant's rating (Elo points)
    stopped: str | None = None  # stable, budget or exhausted; None: another block follows
    means: dict[str, float] = {}


def adaptive_entries(scenario: Scenario) -> list[GameEntry]:
    return [entry for entry in scenario.games if scenario.tournament_for(entry).schedule is not None]


def _compared(entry: GameEntry) -> list[str]:
    game = plugins.load("game", entry.game)
    return list(game.compared(game.Params.model_validate(entry.params)) or [])


def candidates(scenario: Scenario, entry: GameEntry) -> list[Comparison]:
    """Every comparison the entry could ask for: each case, each pair of answers (named in order), each judge."""
    pairs = list(combinations(sorted(_compared(entry)), 2))
    judges = scenario.agents_for(entry)
    return [Comparison("" if case is None else str(case), first, second, judge)
            for case in entry_cases(entry) for first, second in pairs for judge in judges]


def _seed(scenario: Scenario, entry: GameEntry) -> int:
    """The schedule's own seed: the scenario's and the entry's, so two entries draw differently."""
    return seeding.derive(scenario.seed, "schedule", entry.name)


class Specs:
    """The matches that play an entry's comparisons. A match's key names the case, the judge's place
    among the entry's agents and the answers' places among the game's compared ones; its seed derives
    from that key as every match's does."""

    def __init__(self, scenario: Scenario, entry: GameEntry):
        self.scenario, self.entry = scenario, entry
        self.game = plugins.load("game", entry.game)
        self.params = self.game.Params.model_validate(entry.params)
        self.places = {name: i for i, name in enumerate(self.game.compared(self.params) or [])}
        self.judges = {name: i for i, name in enumerate(scenario.agents_for(entry))}
        self.roles = entry_roles(scenario, entry)
        self.scrub = scenario.scrub_terms()

    def key(self, comparison: Comparison) -> str:
        identity = MatchIdentity.seated(self.entry.name, comparison.case or None, 1, self.roles,
                                        (self.judges[comparison.judge],))
        compared = (self.places[comparison.first], self.places[comparison.second])
        return identity.model_copy(update={"compared": compared}).key

    def spec(self, comparison: Comparison) -> MatchSpec:
        scenario, entry, key = self.scenario, self.entry, self.key(comparison)
        chosen = {**entry.params, **({"case": comparison.case} if comparison.case else {}),
                  **self.game.comparison(self.params, comparison.first, comparison.second)}
        anonymity = scenario.anonymity
        return MatchSpec(key=key, group=entry.name, repeat=1, game=entry.game, params=chosen,
                         agents=(comparison.judge,), seed=seeding.derive(scenario.seed, key), shuffle_seats=False,
                         referees=tuple(entry.referee or ()), settings=scenario.match, scrub=self.scrub,
                         scrub_replacement=anonymity.replacement, scrub_allow=tuple(anonymity.allow),
                         scrub_material=anonymity.material)


def first_block(scenario: Scenario, entry: GameEntry) -> list[Comparison]:
    """The seed block: every contestant in ``seed_block`` comparisons, within the budget."""
    schedule = scenario.tournament_for(entry).schedule
    every = candidates(scenario, entry)
    chosen = seed_block(every, sorted(_compared(entry)), schedule.seed_block, _seed(scenario, entry))
    return list(chosen)[:schedule.budget or len(every)]


def outcome(comparison: Comparison, reviews: Iterable[Review]) -> Outcome | None:
    """A comparison's outcome from the reviews of its match: per order, the mean of the verdicts
    (from the first answer's side, -1 first better) over the samples; then the mean of the orders,
    so that a judge's lean to one position cancels. None when no verdict was valid."""
    by_order: dict[int, list[float]] = defaultdict(list)
    for review in reviews:
        if (review.a, review.b) == (comparison.first, comparison.second):
            by_order[review.order].append(float(review.score))
        elif (review.a, review.b) == (comparison.second, comparison.first):
            by_order[review.order].append(-float(review.score))
    if not by_order:
        return None
    return Outcome(comparison, sum(sum(v) / len(v) for v in by_order.values()) / len(by_order))


def standing(contestants: list[str], outcomes: list[Outcome]) -> tuple[dict[str, float], float]:
    """Each contestant's Bradley–Terry rating (Elo scale) from the outcomes so far, and the widest
    95% interval among them: ratings rather than shares won, because an adaptive schedule meets
    strong contestants with strong ones more often, which a share won would count against them."""
    found = ratings(outcomes, contestants)
    widths = found.upper - found.lower
    return ({name: float(score) for name, score in zip(found.names, found.scores)},
            float(widths.max()) if len(widths) else 0.0)


class AdaptiveEntry:
    """One adaptive entry's state in a run: what it asked, what came back, and whether it goes on."""

    def __init__(self, scenario: Scenario, entry: GameEntry):
        self.scenario, self.entry = scenario, entry
        self.schedule = scenario.tournament_for(entry).schedule
        self.contestants = sorted(_compared(entry))
        self.specs = Specs(scenario, entry)
        self.by_key = {self.specs.key(c): c for c in candidates(scenario, entry)}
        self.asked: list[Comparison] = first_block(scenario, entry)
        self.outcomes: dict[Comparison, Outcome] = {}
        self.checks: list[AdaptiveCheck] = []
        self.previous: dict[str, float] | None = None
        self.silent: list[str] = []  # judges left out: they gave no verdict in their first SILENT comparisons
        self.settled: set[str] = set()  # elimination: contestants whose place was settled after a block

    @property
    def budget(self) -> int:
        return self.schedule.budget or len(self.by_key)

    def finished(self, key: str, reviews: Iterable[Review]) -> None:
        comparison = self.by_key.get(key)
        found = None if comparison is None else outcome(comparison, reviews)
        if found is not None:
            self.outcomes[comparison] = found

    def next_block(self) -> list[Comparison]:
        """After a block: the check of the ranking, and the next block (empty once the entry stops)."""
        ordered = sorted(self.outcomes.values())  # by comparison: the order matches finished in does not matter
        means, max_width = standing(self.contestants, ordered)
        tau = None if self.previous is None else kendall_tau(self.previous, means)
        self.previous = means
        stopped = None
        asked = set(self.asked)
        heard = {c.judge for c in self.outcomes}
        tried: dict[str, int] = defaultdict(int)
        for c in self.asked:
            tried[c.judge] += 1
        # a judge that never says anything valid would otherwise look untried to a rule, and be asked first forever
        self.silent += sorted(j for j, n in tried.items() if n >= SILENT and j not in heard and j not in self.silent)
        left = [c for c in self.by_key.values() if c not in asked and c.judge not in self.silent]
        if tau is not None and tau >= self.schedule.tau and max_width <= self.schedule.width:
            stopped = STABLE
        elif not left:
            stopped = EXHAUSTED
        elif len(self.asked) >= self.budget:
            stopped = BUDGET
        chosen: list[Comparison] = []
        if stopped is None:
            size = min(self.schedule.block, self.budget - len(self.asked))
            if self.schedule.rule == "elimination":  # a contestant once settled stays settled
                self.settled |= settled(ordered, self.contestants)
            chosen = [c for c in choose(self.schedule.rule, left, ordered, size, _seed(self.scenario, self.entry),
                                        len(self.checks), self.settled) if c not in asked][:size]
            stopped = None if chosen else EXHAUSTED
        self.checks.append(AdaptiveCheck(group=self.entry.name, block=len(self.checks), comparisons=len(self.asked),
                                         tau=tau, max_width=max_width, stopped=stopped, means=means))
        self.asked += chosen
        return chosen

    def stop_note(self) -> str | None:
        """What stopped the entry, in a sentence; None while it goes on."""
        last = self.checks[-1] if self.checks else None
        if last is None or last.stopped is None:
            return None
        rule = self.schedule.rule  # the entry's name is not in it: the note is kept under that name
        tau = "—" if last.tau is None else f"{last.tau:.2f}"
        why = {STABLE: f"the ranking is stable (Kendall tau {tau} ≥ {self.schedule.tau}, widest interval "
                       f"{last.max_width:.2f} ≤ {self.schedule.width})",
               BUDGET: f"its budget of {self.budget:,} comparisons is spent (Kendall tau {tau}, widest interval "
                       f"{last.max_width:.2f})",
               EXHAUSTED: f"no comparison is left to ask (Kendall tau {tau}, widest interval {last.max_width:.2f})"}
        silent = (f"; {', '.join(self.silent)} gave no valid verdict in {SILENT} comparisons and {'was' if len(self.silent) == 1 else 'were'} "
                  "asked no more" if self.silent else "")
        return (f"the adaptive schedule ({rule}) stopped after {last.comparisons:,} of {len(self.by_key):,} "
                f"comparisons in {last.block + 1} blocks: {why[last.stopped]}{silent}")


class AdaptiveRun:
    """The adaptive entries of a run, for the runner's wave loop: it hands each finished match here
    (``finished``), and asks for the next blocks once a wave is over (``next_wave``)."""

    def __init__(self, scenario: Scenario, store=None):
        self.scenario, self.store = scenario, store
        self.entries = {entry.name: AdaptiveEntry(scenario, entry) for entry in adaptive_entries(scenario)}
        self._stored: dict[str, list[Review]] | None = None  # reviews of matches an earlier session finished
        self.done: list[AdaptiveEntry] = []

    def _reviews_of_earlier(self, key: str) -> list[Review]:
        if self._stored is None:
            self._stored = defaultdict(list)
            for review in self.store.read.review_rows():
                self._stored[review.match].append(review)
        return self._stored.get(key, [])

    def finished(self, match: MatchRecord | MatchRow) -> None:
        entry = self.entries.get(match.group)
        if entry is None or match.status != "finished":
            return
        reviews = match.reviews if isinstance(match, MatchRecord) else self._reviews_of_earlier(match.key)
        entry.finished(match.key, reviews)

    def next_wave(self, say) -> list[MatchSpec]:
        """The next block of every entry still going; ``say`` is told once why each one stopped."""
        wave = []
        for name, entry in list(self.entries.items()):
            chosen = entry.next_block()
            wave += [entry.specs.spec(c) for c in chosen]
            note = entry.stop_note()
            if note is not None:
                say(name, note)
                del self.entries[name]
                self.done.append(entry)
        return wave

    @property
    def checks(self) -> list[AdaptiveCheck]:
        return [c for entry in [*self.done, *self.entries.values()] for c in entry.checks]

