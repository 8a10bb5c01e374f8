"""Which matches a scenario plays: tables, seat orders, role swaps and repeats."""

from __future__ import annotations

from itertools import combinations

from arena.contract import plugins
from arena.contract import seeding
from arena.contract.records import KEY_SCHEME, KeyScheme, MatchIdentity, MatchSpec
from arena.run.scenario import (GameEntry, Scenario, entry_cases, entry_matches, entry_roles, first_repeats, live_sides, most_repeats,
                                table_size)
from arena.run import adaptive_schedule, swiss
from arena.run.seating import seat_orders, swaps_roles


def tables(scenario: Scenario, entry: GameEntry) -> list[tuple[int, ...]]:
    """The tables an entry sets, each as places (0-based) in its agent list. A Swiss round's tables
    are chosen as it comes (``arena.run.swiss``); here, as many of them as a round sets, for counting."""
    places = tuple(range(len(scenario.agents_for(entry))))
    if scenario.tournament_for(entry).format == "fixed":
        return [places]
    if scenario.tournament_for(entry).format == "swiss":
        return [places[k:k + 2] for k in range(0, len(places) - 1, 2)]
    return list(combinations(places, table_size(scenario, entry)))


def plan_entry(scenario: Scenario, entry: GameEntry, first: int, last: int,
               scheme: KeyScheme = KEY_SCHEME, chosen: list[tuple[int, ...]] | None = None) -> list[MatchSpec]:
    """Matches for repeats ``first..last`` of one game entry, repeat by repeat, and within a
    repeat case by case (a game's questions or problems, when it has them).

    A match's key (``MatchIdentity``) names the entry, the case, the repeat and the seating by
    role; its seed is derived from the scenario seed and the key alone, so neither the order of
    play, nor concurrency, nor a resume changes what a match is. The orders of a role swap are
    one comparison played with the roles exchanged: they share the seed of their table
    (``MatchIdentity.table``), so whatever a game draws from it (idiom solitaire's starting
    idiom) is the same in each. ``scheme``: how the keys name the seating; a run resumed from a
    store of the older scheme keeps its keys, and so its seeds. ``chosen``: these tables rather than
    the entry's (a Swiss round's pairs).
    """
    tournament = scenario.tournament_for(entry)
    rotating_roles = plugins.load("game", entry.game).rotating_roles
    roles = entry_roles(scenario, entry)
    shared_seed = swaps_roles(roles, tournament.role_swap)
    players = scenario.agents_for(entry)
    cases = entry_cases(entry)
    scrub_terms = scenario.scrub_terms()
    anonymity = scenario.anonymity
    every_table = tables(scenario, entry) if chosen is None else chosen
    specs = []
    for repeat in range(first, last + 1):
        for case in cases:
            for table in every_table:
                for order, shuffle in seat_orders(table, repeat, roles, rotating_roles, tournament.role_swap,
                                                  tournament.seating):
                    agents = tuple(players[place] for place in order)
                    identity = MatchIdentity.seated(entry.name, None if case is None else str(case), repeat, roles, order)
                    if scheme == "agents":
                        identity = identity.model_copy(update={"seating": (), "names": agents})
                    seed = seeding.derive(scenario.seed, identity.table if shared_seed else identity.key)
                    params = entry.params if case is None else {**entry.params, "case": case}
                    specs.append(
                        MatchSpec(
                            key=identity.key, group=entry.name, repeat=repeat, game=entry.game, params=params,
                            agents=agents, seed=seed, shuffle_seats=shuffle,
                            referees=tuple(entry.referee or ()), settings=scenario.match, scrub=scrub_terms,
                            scrub_replacement=anonymity.replacement, scrub_allow=tuple(anonymity.allow),
                            scrub_material=anonymity.material,
                        )
                    )
    return specs


def plan(scenario: Scenario, scheme: KeyScheme = KEY_SCHEME) -> list[MatchSpec]:
    """Every match known before play: all of fixed-repeat entries, the first repeats of until_stable ones,
    the seed blocks of adaptive ones (with live contestants: the answer matches the seed block needs)."""
    specs = []
    for entry in scenario.games:
        if scenario.tournament_for(entry).schedule is not None:
            specs += adaptive_schedule.first_wave(scenario, entry)
        elif scenario.tournament_for(entry).format == "swiss":
            specs += plan_entry(scenario, entry, 1, 1, scheme, chosen=swiss.SwissEntry(scenario, entry).next_round())
        else:
            specs += plan_entry(scenario, entry, 1, first_repeats(scenario, entry), scheme)
    return specs


def count(scenario: Scenario) -> int:
    """``len(plan(scenario))``, by arithmetic where it can be: nothing is built but adaptive seed blocks."""
    return sum(len(adaptive_schedule.first_wave(scenario, entry)) if scenario.tournament_for(entry).schedule
               else entry_matches(scenario, entry, first_repeats(scenario, entry)) for entry in scenario.games)


def growth_note(scenario: Scenario, entry: GameEntry) -> str | None:
    """How an adaptive or Swiss entry grows past the matches planned at the start, for validate to say."""
    tournament = scenario.tournament_for(entry)
    if tournament.schedule is not None:
        s = tournament.schedule
        full = len(adaptive_schedule.candidates(scenario, entry))
        most = min(full, s.budget or full)
        seed = adaptive_schedule.first_block(scenario, entry)
        note = (f"adaptive schedule ({s.rule}): {len(seed)} comparisons in its seed block, then blocks of {s.block} "
                f"chosen by the results, up to {most:,} ({'its budget' if most < full else 'every comparison'}), until "
                "the ranking is stable")
        live = live_sides(scenario, entry)
        if live is not None:
            note += (f"; the live contestants ({', '.join(live[0])}; judged by {', '.join(live[1])}) answer first: "
                     f"{len(adaptive_schedule.needed(seed))} answers for the seed "
                     f"block, at most {len(live[0]) * len(entry_cases(entry)):,} in all (each contestant asked each "
                     "question at most once, when a comparison first needs it)")
        return note
    if tournament.format == "swiss":
        return (f"Swiss: round 1 of {most_repeats(scenario, entry)} planned; each next round is paired by the "
                "standings" + (" until the ranking is stable" if not isinstance(tournament.repeats, int) else ""))
    return None


def role_swap_note(scenario: Scenario, entry: GameEntry) -> str | None:
    """What a role swap does in an entry whose game keeps some roles in place, for validate to say."""
    tournament = scenario.tournament_for(entry)
    game = plugins.load("game", entry.game)
    roles = entry_roles(scenario, entry)
    if game.rotating_roles is None or len(set(roles)) < 2:
        return None
    kept = sorted({r for r in roles if r not in game.rotating_roles})
    moving = sorted({r for r in roles if r in game.rotating_roles})
    if not tournament.role_swap or not kept:
        return None
    players = scenario.agents_for(entry)
    listed = ", ".join(f"{agent} as {role}" for agent, role in zip(players, roles) if role in kept)
    where = f" ({listed})" if tournament.format == "fixed" else ""
    return (f"role_swap passes agents through the {' and '.join(moving) or 'no'} seats only; {entry.game} keeps "
            f"{' and '.join(kept)} seats for the agents listed there{where}")
