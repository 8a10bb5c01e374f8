"""An adaptive schedule in the runner: an entry whose game reports reviews asks for a seed block of
comparisons, then, block by block, for those that say most about the ranking, until the ranking is
stable, the budget is spent or nothing is left to ask.

A comparison is (case, pair of answers, judge), played as one match that seats the judge alone and
shows it the pair in both orders (the game's ``PlaysComparisons``), so each comparison's outcome is
calibrated for position whatever else is asked. Which comparisons come next is a pure function of
the scenario, its seed and the outcomes so far (``arena.rank.adaptive``); outcomes are read from the
reviews of finished matches, whether this session played them or an earlier one did, so a resumed
run chooses what an uninterrupted one would have.

With live contestants (the game's ``AnswersOnce``), a comparison needs two answers no file holds.
Before a block's comparisons, the answers they need and the run does not hold yet are asked for, each
in an answer match of its own that seats the contestant alone (``...:Contestant=P``); the comparisons
then show their judge the kept texts. So each contestant answers each case at most once in a run, and
only when some comparison first needs it. Kept answers are read back from the store on a resume, as
outcomes are. A comparison whose answer could not be had is not played; the stop note counts them."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import combinations

from pydantic import BaseModel

from arena.contract import plugins, seeding
from arena.contract.capabilities import Review
from arena.contract.records import MatchIdentity, MatchRecord, MatchSpec
from arena.contract.runs import MatchRow
from arena.contract.summaries import FinalNotice
from arena.engine.anonymity import scrub
from arena.rank.adaptive import Comparison, Outcome, choose, ratings, seed_block, settled
from arena.run.scenario import GameEntry, Scenario, entry_cases, entry_roles, live_sides
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


def _compared(scenario: Scenario, entry: GameEntry) -> list[str]:
    """What the entry compares, in the game's order: the sources of fixed answers, or the live contestants."""
    live = live_sides(scenario, entry)
    if live is not None:
        return list(live[0])
    game = plugins.load("game", entry.game)
    return list(game.compared(game.Params.model_validate(entry.params)) or [])


def _judges(scenario: Scenario, entry: GameEntry) -> list[str]:
    live = live_sides(scenario, entry)
    return scenario.agents_for(entry) if live is None else list(live[1])


def candidates(scenario: Scenario, entry: GameEntry) -> list[Comparison]:
    """Every comparison the entry could ask for: each case, each pair of answers (named in order), each judge."""
    pairs = list(combinations(sorted(_compared(scenario, entry)), 2))
    judges = _judges(scenario, entry)
    return [Comparison("" if case is None else str(case), first, second, judge)
            for case in entry_cases(entry) for first, second in pairs for judge in judges]


def _seed(scenario: Scenario, entry: GameEntry) -> int:
    """The schedule's own seed: the scenario's and the entry's, so two entries draw differently."""
    return seeding.derive(scenario.seed, "schedule", entry.name)


class Specs:
    """The matches that play an entry's comparisons. A match's key names the case, the judge's place
    among the entry's agents and the answers' places among the game's compared ones; its seed derives
    from that key as every match's does. With live contestants, an answer match's key names the case
    and the contestant's place among the entry's agents, in its role (``pr/q1#1:Contestant=3``)."""

    def __init__(self, scenario: Scenario, entry: GameEntry):
        self.scenario, self.entry = scenario, entry
        self.game = plugins.load("game", entry.game)
        self.params = self.game.Params.model_validate(entry.params)
        self.live = live_sides(scenario, entry) is not None
        self.places = {name: i for i, name in enumerate(_compared(scenario, entry))}
        self.agents = {name: i for i, name in enumerate(scenario.agents_for(entry))}
        self.roles = entry_roles(scenario, entry)
        if self.live:  # the seats' roles in the two kinds of match, as the game names them
            self.answering = self.game.answer_only(self.params)
            self.answer_roles = self.game.seat_roles(self.game.Params.model_validate({**entry.params, **self.answering}), 1)
            first, second = list(self.places)[:2]
            shown = self.game.comparing(self.params, first, second, {first: "", second: ""})
            self.roles = self.game.seat_roles(self.game.Params.model_validate({**entry.params, **shown}), 1)
        self.scrub = scenario.scrub_terms()

    def key(self, comparison: Comparison) -> str:
        identity = MatchIdentity.seated(self.entry.name, comparison.case or None, 1, self.roles,
                                        (self.agents[comparison.judge],))
        compared = (self.places[comparison.first], self.places[comparison.second])
        return identity.model_copy(update={"compared": compared}).key

    def answer_key(self, case: str, contestant: str) -> str:
        return MatchIdentity.seated(self.entry.name, case or None, 1, self.answer_roles,
                                    (self.agents[contestant],)).key

    def _spec(self, key: str, params: dict, agent: str) -> MatchSpec:
        scenario, entry, anonymity = self.scenario, self.entry, self.scenario.anonymity
        return MatchSpec(key=key, group=entry.name, repeat=1, game=entry.game, params=params,
                         agents=(agent,), seed=seeding.derive(scenario.seed, key), shuffle_seats=False,
                         referees=tuple(entry.referee or ()), settings=scenario.match, scrub=self.scrub,
                         scrub_replacement=anonymity.replacement, scrub_allow=tuple(anonymity.allow),
                         scrub_material=anonymity.material)

    def spec(self, comparison: Comparison, texts: dict[tuple[str, str], str] | None = None) -> MatchSpec:
        """The match of a comparison; with live contestants, ``texts`` holds their kept answers by (case, name)."""
        case, first, second = comparison.case, comparison.first, comparison.second
        if self.live:
            anonymity = self.scenario.anonymity  # the judge reads them as it would read what another seat wrote
            shown = {name: scrub(texts[case, name], self.scrub, anonymity.replacement, tuple(anonymity.allow))[0]
                     for name in (first, second)}
            made = self.game.comparing(self.params, first, second, shown)
        else:
            made = self.game.comparison(self.params, first, second)
        chosen = {**self.entry.params, **({"case": case} if case else {}), **made}
        return self._spec(self.key(comparison), chosen, comparison.judge)

    def answer_spec(self, case: str, contestant: str) -> MatchSpec:
        """The match that asks ``contestant`` the case alone, and keeps its answer."""
        chosen = {**self.entry.params, **({"case": case} if case else {}), **self.answering}
        return self._spec(self.answer_key(case, contestant), chosen, contestant)


def first_block(scenario: Scenario, entry: GameEntry) -> list[Comparison]:
    """The seed block: every contestant in ``seed_block`` comparisons, within the budget."""
    schedule = scenario.tournament_for(entry).schedule
    every = candidates(scenario, entry)
    chosen = seed_block(every, sorted(_compared(scenario, entry)), schedule.seed_block, _seed(scenario, entry))
    return list(chosen)[:schedule.budget or len(every)]


def needed(comparisons: Iterable[Comparison]) -> list[tuple[str, str]]:
    """The (case, contestant) answers some of ``comparisons`` show, each once, in the order first needed."""
    return list(dict.fromkeys(need for c in comparisons for need in ((c.case, c.first), (c.case, c.second))))


def sample_comparisons(scenario: Scenario, entry: GameEntry, text: str) -> list[MatchSpec]:
    """The seed block's comparisons with every kept answer taken to be ``text``: for a dry run."""
    specs, block = Specs(scenario, entry), first_block(scenario, entry)
    return [specs.spec(c, {need: text for need in needed([c])}) for c in block]


def first_wave(scenario: Scenario, entry: GameEntry) -> list[MatchSpec]:
    """The matches an adaptive entry starts with: its seed block's comparisons, or, with live
    contestants, the answer matches they need (the comparisons follow once those are in)."""
    specs, block = Specs(scenario, entry), first_block(scenario, entry)
    if specs.live:
        return [specs.answer_spec(case, name) for case, name in needed(block)]
    return [specs.spec(c) for c in block]


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
        self.contestants = sorted(_compared(scenario, entry))
        self.specs = Specs(scenario, entry)
        self.live = self.specs.live
        self.by_key = {self.specs.key(c): c for c in candidates(scenario, entry)}
        self.asked: list[Comparison] = first_block(scenario, entry)
        self.outcomes: dict[Comparison, Outcome] = {}
        self.checks: list[AdaptiveCheck] = []
        self.previous: dict[str, float] | None = None
        self.silent: list[str] = []  # judges left out: they gave no verdict in their first SILENT comparisons
        self.settled: set[str] = set()  # elimination: contestants whose place was settled after a block
        # live contestants: answers kept and answers that could not be had, by (case, contestant)
        self.texts: dict[tuple[str, str], str] = {}
        self.missing: set[tuple[str, str]] = set()
        self.unplayed = 0  # comparisons chosen but not played: an answer they need is missing
        self.answer_keys: dict[str, tuple[str, str]] = {}
        if self.live:
            self.answer_keys = {self.specs.answer_key(case, name): (case, name)
                                for case in {c.case for c in self.by_key.values()} for name in self.contestants}
        self.waiting: list[Comparison] = list(self.asked) if self.live else []  # chosen, their answers asked for

    @property
    def budget(self) -> int:
        return self.schedule.budget or len(self.by_key)

    def finished(self, key: str, reviews: Iterable[Review]) -> None:
        comparison = self.by_key.get(key)
        found = None if comparison is None else outcome(comparison, reviews)
        if found is not None:
            self.outcomes[comparison] = found

    def answered(self, key: str, text: str | None) -> None:
        """An answer match is over: its answer kept, or (None) none to be had."""
        need = self.answer_keys[key]
        if text:
            self.texts[need] = text
            self.missing.discard(need)
        else:
            self.missing.add(need)

    def advance(self) -> list[MatchSpec]:
        """The next matches: the comparisons whose answers have come in, or the next block (or the
        answer matches it needs first); empty once the entry stops."""
        fresh = True  # a new check of the ranking is due (not when a block fell through for want of answers)
        while True:
            if self.waiting:
                ready = [c for c in self.waiting if self._held(c)]
                dropped = [c for c in self.waiting if not self._held(c)]
                self.missing |= {need for need in needed(dropped) if need not in self.texts}
                self.asked = [c for c in self.asked if c not in dropped]  # not played: they spend no budget
                self.unplayed += len(dropped)
                self.waiting = []
                if ready:
                    return [self.specs.spec(c, self.texts) for c in ready]
                fresh = not self.checks  # nothing of the block can be played: choose again on the same check
            chosen = self.next_block() if fresh else self._choose(sorted(self.outcomes.values()))
            if not chosen:
                return []
            if not self.live:
                return [self.specs.spec(c) for c in chosen]
            self.waiting = chosen
            asking = [need for need in needed(chosen) if need not in self.texts and need not in self.missing]
            if asking:
                return [self.specs.answer_spec(case, name) for case, name in asking]
            fresh = False

    def _held(self, comparison: Comparison) -> bool:
        return (comparison.case, comparison.first) in self.texts and (comparison.case, comparison.second) in self.texts

    def _playable(self, comparison: Comparison) -> bool:
        """Whether an answer the comparison needs is known to be missing (only with live contestants)."""
        return not self.missing or ((comparison.case, comparison.first) not in self.missing
                                    and (comparison.case, comparison.second) not in self.missing)

    def _ranked(self) -> list[str]:
        """The contestants ranked: with live contestants, those with an answer kept or none asked yet
        (one whose every answer failed has nothing to be ranked on, and would keep any interval wide)."""
        lost = {name for _, name in self.missing} - {name for _, name in self.texts}
        return [name for name in self.contestants if name not in lost]

    def next_block(self) -> list[Comparison]:
        """After a block: the check of the ranking, and the next block (empty once the entry stops)."""
        ordered = sorted(self.outcomes.values())  # by comparison: the order matches finished in does not matter
        means, max_width = standing(self._ranked(), ordered)
        tau = None if self.previous is None else kendall_tau(self.previous, means)
        self.previous = means
        heard = {c.judge for c in self.outcomes}
        tried: dict[str, int] = defaultdict(int)
        for c in self.asked:
            tried[c.judge] += 1
        # a judge that never says anything valid would otherwise look untried to a rule, and be asked first forever
        self.silent += sorted(j for j, n in tried.items() if n >= SILENT and j not in heard and j not in self.silent)
        stopped = None
        if tau is not None and tau >= self.schedule.tau and max_width <= self.schedule.width:
            stopped = STABLE
        elif not self._left():
            stopped = EXHAUSTED
        elif len(self.asked) >= self.budget:
            stopped = BUDGET
        self.checks.append(AdaptiveCheck(group=self.entry.name, block=len(self.checks), comparisons=len(self.asked),
                                         tau=tau, max_width=max_width, stopped=stopped, means=means))
        return [] if stopped else self._choose(ordered)

    def _left(self) -> list[Comparison]:
        asked = set(self.asked)
        return [c for c in self.by_key.values()
                if c not in asked and c.judge not in self.silent and self._playable(c)]

    def _choose(self, ordered: list[Outcome]) -> list[Comparison]:
        """The next block by the rule, within the budget; the last check says why when nothing is left."""
        asked, left = set(self.asked), self._left()
        size = min(self.schedule.block, self.budget - len(self.asked))
        if self.schedule.rule == "elimination":  # a contestant once settled stays settled
            self.settled |= settled(ordered, self.contestants)
        chosen = [] if size <= 0 or not left else \
            [c for c in choose(self.schedule.rule, left, ordered, size, _seed(self.scenario, self.entry),
                               len(self.checks) - 1, self.settled) if c not in asked][:size]
        if not chosen:
            last = self.checks[-1]
            last.stopped = BUDGET if left and size <= 0 else EXHAUSTED
            last.comparisons = len(self.asked)
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
        if self.settled:  # elimination: who left the comparisons, so "none left" reads right
            silent += f"; {len(self.settled)} of {len(self.contestants)} contestants' places were settled"
        answers = ""
        if self.live:
            by_whom = defaultdict(int)
            for _, who in self.missing:
                by_whom[who] += 1
            answers = f"; {len(self.texts):,} answers asked and kept (each once)"
            if self.missing:
                answers += (f", {len(self.missing):,} missing ({', '.join(f'{who} {n}' for who, n in sorted(by_whom.items()))}: "
                            f"no answer after the match's retries), so {self.unplayed:,} comparisons were not played "
                            "and the comparisons needing those answers are not scored")
        return (f"the adaptive schedule ({rule}) stopped after {last.comparisons:,} of {len(self.by_key):,} "
                f"comparisons in {last.block + 1} blocks: {why[last.stopped]}{silent}{answers}")


class AdaptiveRun:
    """The adaptive entries of a run, for the runner's wave loop: it hands each finished match here
    (``finished``), and asks for the next blocks once a wave is over (``next_wave``)."""

    def __init__(self, scenario: Scenario, store=None):
        self.scenario, self.store = scenario, store
        self.entries = {entry.name: AdaptiveEntry(scenario, entry) for entry in adaptive_entries(scenario)}
        self._stored: dict[str, list[Review]] | None = None  # reviews of matches an earlier session finished
        self._kept: dict[str, FinalNotice] | None = None  # last notices of answer matches an earlier session finished
        self.done: list[AdaptiveEntry] = []

    def _reviews_of_earlier(self, key: str) -> list[Review]:
        if self._stored is None:
            self._stored = defaultdict(list)
            for review in self.store.read.review_rows():
                self._stored[review.match].append(review)
        return self._stored.get(key, [])

    def _notice_of_earlier(self, key: str, game: str, field: str) -> FinalNotice | None:
        if self._kept is None:
            self._kept = {n.key: n for n in self.store.read.final_notices((field,), game)}
        return self._kept.get(key)

    def finished(self, match: MatchRecord | MatchRow) -> None:
        entry = self.entries.get(match.group)
        if entry is None:
            return
        if match.key in entry.answer_keys:
            entry.answered(match.key, self._answer(entry, match))
            return
        if match.status != "finished":
            return
        reviews = match.reviews if isinstance(match, MatchRecord) else self._reviews_of_earlier(match.key)
        entry.finished(match.key, reviews)

    def _answer(self, entry: AdaptiveEntry, match: MatchRecord | MatchRow) -> str | None:
        """The answer an answer match kept (the game's ``answers_field`` of its last notice, by seat), if any."""
        if match.status != "finished":
            return None
        field = getattr(entry.specs.game, "answers_field", None) or "answers"
        notice = FinalNotice.of(match) if isinstance(match, MatchRecord) else \
            self._notice_of_earlier(match.key, match.game, field)
        kept = {} if notice is None else notice.data.get(field)
        if not isinstance(kept, dict):
            return None
        text = next(iter(kept.values()), None)
        return None if text is None else str(text)

    def next_wave(self, say) -> list[MatchSpec]:
        """The next block of every entry still going; ``say`` is told once why each one stopped."""
        wave = []
        for name, entry in list(self.entries.items()):
            wave += entry.advance()
            note = entry.stop_note()
            if note is not None:
                say(name, note)
                del self.entries[name]
                self.done.append(entry)
        return wave

    @property
    def checks(self) -> list[AdaptiveCheck]:
        return [c for entry in [*self.done, *self.entries.values()] for c in entry.checks]
