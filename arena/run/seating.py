"""Who sits where: the seat orders a table is played in, and how many there are.

Pure functions of the table, the seat roles and the tournament's rules, shared by the plan
(which builds the orders) and by validation (which only counts them, so that a scenario of a
billion matches is refused without building one).
"""

from __future__ import annotations

from collections.abc import Sequence
from math import comb


def rotate(order: tuple[str, ...], k: int) -> tuple[str, ...]:
    k %= len(order)
    return order[k:] + order[:k]


def rotating_seats(roles: Sequence[str], rotating_roles: Sequence[str] | None) -> list[int]:
    """Positions a role swap passes agents through: those of the game's rotating roles (every
    position when the game names none)."""
    if rotating_roles is None:
        return list(range(len(roles)))
    return [i for i, role in enumerate(roles) if role in rotating_roles]


def swaps_roles(roles: Sequence[str], role_swap: bool) -> bool:
    """Whether a role swap applies: the tournament asks for it and the seats differ in role."""
    return role_swap and len(set(roles)) > 1


def seat_orders(table: tuple[str, ...], repeat: int, roles: Sequence[str], rotating_roles: Sequence[str] | None,
                role_swap: bool, seating: str) -> list[tuple[tuple[str, ...], bool]]:
    """The seat orders one table is played in for one repeat, each with whether the match itself
    should shuffle seats from its seed.

    With a role swap, every rotation of the agents through the rotating seats (the others keep
    the agents listed for them); without one, agents keep the seats, and so the roles, in the
    order they are listed. Seats of one role rotate with the repeat, or are drawn from the seed.
    """
    if len(set(roles)) > 1:
        if not role_swap:
            return [(table, False)]
        seats = rotating_seats(roles, rotating_roles)
        orders = []
        for k in range(max(len(seats), 1)):
            order = list(table)
            for seat, agent in zip(seats, rotate(tuple(table[s] for s in seats), k) if seats else ()):
                order[seat] = agent
            orders.append((tuple(order), False))
        return orders
    if seating == "rotate":
        return [(rotate(table, repeat - 1), False)]
    return [(table, True)]


def orders_per_table(roles: Sequence[str], rotating_roles: Sequence[str] | None, role_swap: bool) -> int:
    """How many seat orders ``seat_orders`` gives each table, for any repeat."""
    if swaps_roles(roles, role_swap):
        return max(len(rotating_seats(roles, rotating_roles)), 1)
    return 1


def tables_count(players: int, seats: int, fixed: bool) -> int:
    """Tables a format sets: the listed agents at one, or every group of ``seats`` of them."""
    return 1 if fixed else comb(players, seats)
