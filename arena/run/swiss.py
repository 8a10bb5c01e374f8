"""A Swiss tournament in the runner (``format: swiss``): round by round, agents are paired at
two-seat tables by their standing so far (``arena.rank.adaptive.swiss_pairs``), for ceil(log2 N)
rounds, or, with ``repeats: until_stable``, until the ranking stops moving (a round per block).

A round is a repeat: its matches have the round's number as their repeat, and their keys and seeds
are made as every match's are, from the table and the repeat. The pairs of the next round depend
only on the scenario, its seed and the payoffs of the rounds before, read from the matches
whichever session finished them, so a resumed run pairs as an uninterrupted one."""

from __future__ import annotations

from collections import defaultdict

from arena.contract import seeding
from arena.contract.records import MatchRecord
from arena.contract.runs import MatchRow, ScoreRow
from arena.rank.adaptive import swiss_pairs
from arena.results.payoffs import summarize
from arena.run import stability
from arena.run.scenario import GameEntry, Scenario, UntilStable, most_repeats


def swiss_entries(scenario: Scenario) -> list[GameEntry]:
    return [entry for entry in scenario.games if scenario.tournament_for(entry).format == "swiss"]


class SwissEntry:
    """One Swiss entry's standings, pairings and rounds in a run."""

    def __init__(self, scenario: Scenario, entry: GameEntry):
        self.scenario, self.entry = scenario, entry
        self.players = scenario.agents_for(entry)
        self.rule = scenario.tournament_for(entry).repeats
        self.seed = seeding.derive(scenario.seed, "swiss", entry.name)
        self.round = 0
        self.played: set[frozenset[str]] = set()
        self.rows: list[ScoreRow] = []
        self.checks: list[stability.StabilityCheck] = []

    def standings(self) -> dict[str, float]:
        """Each agent's mean payoff per match so far (0 before its first)."""
        total, count = defaultdict(float), defaultdict(int)
        for row in self.rows:
            for seat in row.seats:
                if seat.label in row.scores:
                    total[seat.agent] += row.scores[seat.label]
                    count[seat.agent] += 1
        return {name: total[name] / count[name] if count[name] else 0.0 for name in self.players}

    def next_round(self) -> list[tuple[int, ...]]:
        """The next round's tables (places in the entry's agent list); ``tournament.plan_entry`` seats them."""
        self.round += 1
        pairs = swiss_pairs(self.standings(), self.played, self.seed, self.round)
        paired = {name for pair in pairs for name in pair}
        self.played |= {frozenset(pair) for pair in pairs}
        self.played |= {frozenset({name}) for name in self.players if name not in paired}  # a bye
        place = {name: i for i, name in enumerate(self.players)}
        return [tuple(sorted(place[name] for name in pair)) for pair in pairs]

    def finished(self, match: MatchRecord | MatchRow) -> None:
        if match.status == "finished":
            self.rows.append(ScoreRow.of(match))

    def done(self) -> bool:
        """After a round: over when the rounds are played, or when until_stable finds the ranking stable."""
        if not isinstance(self.rule, UntilStable):
            return self.round >= most_repeats(self.scenario, self.entry)
        name = self.entry.name
        check = stability.check(name, summarize([r for r in self.rows if r.repeat < self.round]), summarize(self.rows),
                                self.round, self.rule, stability.payoff_range(name, self.rows))
        self.checks.append(check)
        return check.done


class SwissRun:
    """The Swiss entries of a run, for the runner's wave loop, as ``AdaptiveRun`` is for adaptive ones."""

    def __init__(self, scenario: Scenario):
        self.entries = {entry.name: SwissEntry(scenario, entry) for entry in swiss_entries(scenario)}
        for swiss in self.entries.values():  # the first round: the plan's (``tournament.plan``), paired alike
            swiss.next_round()

    def finished(self, match: MatchRecord | MatchRow) -> None:
        if match.group in self.entries:
            self.entries[match.group].finished(match)

    def next_rounds(self, store, checks: list[stability.StabilityCheck]) -> list[tuple[GameEntry, int, list[tuple[int, ...]]]]:
        """The next round (entry, round, tables) of every entry still going; until_stable's checks go
        to ``checks`` and the store."""
        wave = []
        for name, swiss in list(self.entries.items()):
            over = swiss.done()
            if swiss.checks:
                c = swiss.checks[-1]
                checks.append(c)
                if store is not None:
                    store.record_stability(name, c.repeats, c.tau, c.max_width, c.stable, c.done, c.stopped, c.width_limit)
            if over:
                del self.entries[name]
            else:
                wave.append((swiss.entry, swiss.round + 1, swiss.next_round()))
        return wave
