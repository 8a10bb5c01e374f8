"""What each Ray worker asks the cluster for, and whether the cluster can give it.

A worker (a Ray actor) builds every agent of the scenario once and runs every referee of the
matches it plays: an embedded model is loaded in it, a sandbox runs its programs there. So what
one worker needs is what its agents and referees say they need (``resources:`` in an agent's or a
referee's block), added up, or what ``execution.resources`` says for the whole worker. Ray places
an actor only on a node that has all of it free, and waits for ever for one that never will (a GPU
on a cluster without any): the run checks the cluster's nodes first and says in a sentence what
cannot be met, before anything is played. Elsewhere (the run's own process, forked workers) the
resources are not asked for: the machine is what it is.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ByteSize, ConfigDict, Field

RESOURCES = "resources"  # the key an agent's or a referee's block asks with
CPU_DEFAULT = 1.0  # what a worker asks when nothing says otherwise: one core, as a forked worker takes


class Resources(BaseModel):
    """What an agent, a referee, or a whole worker asks the cluster for."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    cpus: float | None = Field(None, ge=0, description="CPU cores (fractions allowed).")
    gpus: float | None = Field(None, ge=0, description="GPUs (fractions allowed: several workers share one).")
    memory: ByteSize | None = Field(None, description="Memory the worker is given, e.g. 2GB or 512MiB.")


@dataclass(frozen=True)
class Need:
    """One worker's request, and who made it (for the sentence that refuses it)."""

    cpus: float = CPU_DEFAULT
    gpus: float = 0.0
    memory: int | None = None
    asked_by: str = "the default of one CPU per worker"

    def actor_options(self) -> dict[str, Any]:
        """Ray's options for the actor that is one worker."""
        options: dict[str, Any] = {"num_cpus": self.cpus, "num_gpus": self.gpus}
        if self.memory:
            options["memory"] = self.memory
        return options

    def describe(self) -> str:
        parts = [f"{_number(self.cpus)} CPU{'s' if self.cpus != 1 else ''}"]
        if self.gpus:
            parts.append(f"{_number(self.gpus)} GPU{'s' if self.gpus != 1 else ''}")
        if self.memory:
            parts.append(f"{_gigabytes(self.memory)} of memory")
        return ", ".join(parts)

    def _asks(self) -> dict[str, float]:
        """Ray's names of what is asked for, and how much (what is not asked for limits nothing)."""
        asks = {"CPU": self.cpus, "GPU": self.gpus, "memory": float(self.memory or 0)}
        return {name: amount for name, amount in asks.items() if amount > 0}


def need(asks: Iterable[tuple[str, Resources]], whole: Resources | None = None) -> Need:
    """A worker's request: ``whole`` (execution.resources) when given, else the sum of what each of
    ``asks`` (who, what) asks for; one CPU when no one says how many."""
    if whole is not None:
        return Need(whole.cpus if whole.cpus is not None else CPU_DEFAULT, whole.gpus or 0.0,
                    int(whole.memory) if whole.memory else None, "execution.resources")
    asks = list(asks)
    if not asks:
        return Need()
    cpus = [r.cpus for _, r in asks if r.cpus is not None]
    memory = sum(int(r.memory) for _, r in asks if r.memory)
    return Need(sum(cpus) if cpus else CPU_DEFAULT, sum(r.gpus or 0.0 for _, r in asks), memory or None,
                "the resources of " + ", ".join(who for who, _ in asks) + ", added up")


def workers_that_fit(nodes: Iterable[Mapping[str, Any]], request: Need, wanted: int | None) -> int:
    """How many workers the run places: ``wanted``, or as many as the cluster's live nodes hold (the
    default). Raise ``ValueError`` with a sentence when not one fits on any node, or fewer than wanted."""
    totals = [node.get("Resources", {}) for node in nodes if node.get("Alive", True)]
    asks = request._asks()
    room = 0
    for total in totals:
        room += min((math.floor(total.get(name, 0) / amount + 1e-9) for name, amount in asks.items()),
                    default=int(total.get("CPU", 0)))  # asking nothing: one worker per core, as before
    if room == 0:
        largest = {name: max((t.get(name, 0) for t in totals), default=0) for name in asks}
        short = [f"{_has(name, largest[name])}" for name, amount in asks.items() if largest[name] < amount]
        lacking = "; ".join(short) if short else "no node has all of it at once"
        raise ValueError(f"each Ray worker asks for {request.describe()} ({request.asked_by}), and no node of the "
                         f"cluster can give that: {lacking}. Ask for less, or add a node that has it; nothing was played")
    if wanted is not None and wanted > room:
        raise ValueError(f"{wanted} Ray workers were asked for, and the cluster has room for {room} (each asks for "
                         f"{request.describe()}, {request.asked_by}): ask for fewer")
    return wanted if wanted is not None else room


def _has(name: str, largest: float) -> str:
    if name == "memory":
        return f"the most memory a node has is {_gigabytes(largest)}"
    if largest == 0:
        return f"no node has a {name}"
    return f"the most {name}s a node has is {_number(largest)}"


def _number(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:g}"


def _gigabytes(size: float) -> str:
    return f"{round(size / 1e9, 1):g} GB"
