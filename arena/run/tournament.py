"""Which matches a scenario plays: tables, seat orders, role swaps and repeats."""

from __future__ import annotations

from itertools import combinations

from arena.contract import plugins
from arena.contract import seeding
from arena.contract.records import MatchSpec
from arena.run.scenario import GameEntry, Scenario, Tournament, UntilStable, table_size


def rotate(order: tuple[str, ...], k: int) -> tuple[str, ...]:
    k %= len(order)
    return order[k:] + order[:k]


def is_asymmetric(scenario: Scenario, entry: GameEntry) -> bool:
    game = plugins.load("game", entry.game)
    params = game.Params.model_validate(entry.params)
    return len(set(game.seat_roles(params, table_size(scenario, entry)))) > 1


def tables(scenario: Scenario, entry: GameEntry) -> list[tuple[str, ...]]:
    players = tuple(scenario.agents_for(entry))
    if scenario.tournament_for(entry).format == "fixed":
        return [players]
    return list(combinations(players, table_size(scenario, entry)))


def seat_orders(table: tuple[str, ...], repeat: int, asymmetric: bool, tournament: Tournament) -> list[tuple[tuple[str, ...], bool]]:
    """The seat orders one table is played in for one repeat, each with whether the
    match itself should shuffle seats from its seed."""
    if asymmetric:
        if tournament.role_swap:
            return [(rotate(table, k), False) for k in range(len(table))]  # every agent in every role
        return [(table, False)]  # agents keep the seats, and so the roles, in the order they are listed
    if tournament.seating == "rotate":
        return [(rotate(table, repeat - 1), False)]
    return [(table, True)]


def plan_entry(scenario: Scenario, entry: GameEntry, first: int, last: int) -> list[MatchSpec]:
    """Matches for repeats ``first..last`` of one game entry, repeat by repeat, and within a
    repeat case by case (a game's questions or problems, when it has them).

    A match's key names the entry, the repeat and the seat order; its seed is
    derived from the scenario seed and the key alone, so neither the order of
    play, nor concurrency, nor a resume changes what a match is. The orders of a
    role swap are one comparison played with the roles exchanged: they share the
    seed of their table (the key with its agents in name order), so whatever a
    game draws from it (idiom solitaire's starting idiom) is the same in each.
    """
    tournament = scenario.tournament_for(entry)
    asymmetric = is_asymmetric(scenario, entry)
    game = plugins.load("game", entry.game)
    cases = game.cases(game.Params.model_validate(entry.params)) or [None]
    scrub_terms = scenario.scrub_terms()
    replacement = scenario.anonymity.replacement if scenario.anonymity else "[name withheld]"
    specs = []
    for repeat in range(first, last + 1):
        for case in cases:
            for table in tables(scenario, entry):
                for order, shuffle in seat_orders(table, repeat, asymmetric, tournament):
                    where = entry.name if case is None else f"{entry.name}/{case}"
                    key = f"{where}#{repeat}:{'+'.join(order)}"
                    seed = seeding.derive(scenario.seed, shared_seed_key(scenario, entry, where, repeat, table) or key)
                    params = entry.params if case is None else {**entry.params, "case": case}
                    specs.append(
                        MatchSpec(
                            key=key, group=entry.name, repeat=repeat, game=entry.game, params=params, agents=order,
                            seed=seed, shuffle_seats=shuffle,
                            referees=tuple(entry.referee or ()), settings=scenario.match, scrub=scrub_terms,
                            scrub_replacement=replacement,
                        )
                    )
    return specs


def first_repeats(scenario: Scenario, entry: GameEntry) -> int:
    """Repeats played before anything is judged: all of them, or until_stable's minimum."""
    rule = scenario.tournament_for(entry).repeats
    if isinstance(rule, UntilStable):
        return min(rule.max, max(rule.block, rule.min))
    return rule


def shared_seed_key(scenario: Scenario, entry: GameEntry, where: str, repeat: int, table: tuple[str, ...]) -> str | None:
    """What the orders of a role swap derive their one seed from (the key with its agents in name
    order), or None when the entry plays no role swap."""
    game = plugins.load("game", entry.game)
    roles = game.seat_roles(game.Params.model_validate(entry.params), len(table))
    if not scenario.tournament_for(entry).role_swap or len(set(roles)) < 2:
        return None
    return f"{where}#{repeat}:{'+'.join(sorted(table))}"


def plan(scenario: Scenario) -> list[MatchSpec]:
    """Every match known before play: all of fixed-repeat entries, the first repeats of until_stable ones."""
    specs = []
    for entry in scenario.games:
        specs += plan_entry(scenario, entry, 1, first_repeats(scenario, entry))
    return specs
