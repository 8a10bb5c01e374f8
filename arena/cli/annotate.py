"""Human in the loop (FairEval's HITLC): the judge's least certain verdicts go to people,
at the terminal (`arena annotate ask RUN_DIR --beta 0.2`) or through a file:

`arena annotate export RUN_DIR --beta 0.2 -o todo.csv` writes the top-β of a run's calibrated
pairwise verdicts by BPDE (the entropy of a judge's 2k results for a pair: high when its verdicts
disagree with themselves; among equal BPDE, the smaller margin first: see ``uncertain``), with the
question and both answers, for annotators to fill in the
``human_verdict`` column (1, 2 or tie). `arena annotate import RUN_DIR todo.csv` brings the
filled rows back: each human verdict replaces that judge's verdicts on that pair, in the run's
review tuples, so `arena rank RUN_DIR` uses it.

A person judging is a judge like any other: they are shown the two answers in an order drawn
from a seed (recorded in the file, with the order itself, so a verdict on "answer 1" is
credited to the right side), labelled by position and seat only, with the names of the run's
agents, their models and model vendors scrubbed from what the agents wrote, by the filter the match
uses (the question and answers read from a dataset stay as written, unless the scenario's
``anonymity: {material: true}`` asks). Nothing in the file names an agent: an item is known by an
id the run can look up.
"""

from __future__ import annotations

import csv
import hashlib
import math
import secrets
from dataclasses import dataclass
from pathlib import Path

import yaml

from arena.contract import seeding
from arena.contract.files import replacing
from arena.engine.anonymity import Filter, identity_names
from arena.contract.runs import RunReader, open_run
from arena.store import RunStore, StoreError

COLUMNS = ["item", "question_id", "judge", "first", "second", "question", "answer_1", "answer_2", "model_verdict", "bpde",
           "seed", "human_verdict"]
_VERDICT = {"1": -1, "2": 1, "tie": 0}  # from the side of the answer shown first
_SHOWN = {-1: "1", 0: "tie", 1: "2"}
WITHHELD = "[name withheld]"


@dataclass(frozen=True)
class Item:
    """One judge's calibrated verdict on one pair of one match, as the run keeps it."""

    id: str
    match: str
    question_id: str
    question: str
    judge: str  # a seat label
    pair: tuple[str, str]  # labels of the two answers: seats, or "Answers N" for the scenario's N-th fixed answers
    texts: tuple[str, str]
    sides: tuple[str, str]  # what the review tuples call them: agents, or fixed answers' sources
    judge_agent: str
    verdict: int | None  # from the pair's first side: -1 it is better, 0 a tie, 1 the second is
    bpde: float
    margin: float = 0.0  # how far the calibrated score difference the verdict is the sign of lies from a tie

    def swapped(self, seed: int) -> bool:
        """Whether the pair is shown second side first: drawn from the seed, item by item."""
        return seeding.rng(seed, "annotate", self.id).random() < 0.5


def item_id(match: str, judge: str, a: str, b: str) -> str:
    return hashlib.blake2b("\x1f".join((match, judge, a, b)).encode(), digest_size=6).hexdigest()


@dataclass(frozen=True)
class Anonymity:
    """What an annotator must not read: the run's own anonymity names, and whatever its settings, the
    names of its agents, their models and the model vendors; the run's allow-list and ``material``."""

    names: tuple[str, ...]
    allow: tuple[str, ...] = ()
    material: bool = False

    def filter(self) -> Filter:
        """A fresh filter for one item: what one item's agents wrote is no concern of another's."""
        return Filter(self.names, WITHHELD, self.allow, self.material)


def anonymity_of(store: RunReader) -> Anonymity:
    raw = yaml.safe_load(store.run_info().get("scenario") or "") or {}
    settings = raw.get("anonymity")
    settings = settings if isinstance(settings, dict) else {}
    allow = tuple(str(a) for a in settings.get("allow") or ())
    names = identity_names(raw.get("agents") or {}, [str(t) for t in settings.get("terms") or ()], True, allow)
    return Anonymity(names, allow, bool(settings.get("material")))


def items(store: RunReader) -> list[Item]:
    """Every calibrated verdict with a BPDE, in the run's order: read from the notices that carry
    verdicts, with the seats of their match, not from whole records."""
    found = []
    seats: dict[str, dict[str, str]] = {}  # of the match being read: verdict notices come match by match
    for key, message in store.messages("notice", with_data="verdicts"):
        if key not in seats:
            seats = {key: {s.label: s.agent for s in store.match(key).seats}}
        agent = seats[key]
        data = message.data
        # the answers judged: recorded with the verdicts; runs made before that kept them as round 1 replies only
        answers = data.get("answers") or {m.sender: m.content for _, m in store.messages("reply", round=1, key=key)}
        sources = list(answers)
        label = {side: side if side in agent else f"Answers {sources.index(side) + 1}" for side in sources}
        for verdict in data["verdicts"]:
            if verdict["bpde"] is None:
                continue
            a, b = verdict["pair"]
            found.append(Item(
                id=item_id(key, verdict["judge"], a, b), match=key, question_id=str(data["question"]),
                question=data.get("question_text", ""), judge=verdict["judge"], pair=(label[a], label[b]),
                texts=(answers.get(a, ""), answers.get(b, "")), sides=(agent.get(a, a), agent.get(b, b)),
                judge_agent=agent[verdict["judge"]], verdict=verdict["verdict"], bpde=verdict["bpde"],
                margin=margin(verdict["results"], verdict.get("orders")),
            ))
    return found


def margin(results: list[float | None], orders: list[int] | None) -> float:
    """The absolute calibrated score difference of a judge's results on a pair, as the game calibrates
    them: each presentation order's mean over its samples, then the mean of the orders' means (every
    result one order's when the orders were not recorded)."""
    by_order: dict[int, list[float]] = {}
    for value, order in zip(results, orders or [0] * len(results)):
        if value is not None:
            by_order.setdefault(order, []).append(value)
    if not by_order:
        return 0.0
    return abs(sum(sum(v) / len(v) for v in by_order.values()) / len(by_order))


def uncertain(store: RunReader, beta: float) -> list[Item]:
    """The top-β (a share, 0 to 1) of calibrated verdicts by BPDE, most uncertain first. BPDE takes a few
    values only (the entropy of 2k results over three outcomes), so many verdicts share one; among them
    the smaller margin (``margin``: the calibrated score difference nearest a tie, the verdict nearest to
    turning over) comes first, and what is equal in both goes by item id, a hash of match, judge and pair
    that no order of play changes."""
    if not 0 < beta <= 1:
        raise StoreError(f"--beta must be a share between 0 and 1, not {beta}")
    ranked = sorted(items(store), key=lambda i: (-i.bpde, i.margin, i.id))
    return ranked[: math.ceil(beta * len(ranked) - 1e-9)]


def shown(item: Item, seed: int, anonymity: Anonymity) -> dict[str, str]:
    """The item as an annotator gets it: in the seed's order, names scrubbed, by position and seat only.
    An answer a seat wrote is the agent's words; the question and a dataset's answers are the referee's."""
    order = (1, 0) if item.swapped(seed) else (0, 1)
    names = anonymity.filter()
    question, question_id = names.text(item.question)[0], names.text(item.question_id)[0]
    by_agent = [not label.startswith("Answers ") for label in item.pair]  # "Answers N": the scenario's fixed answers
    texts = [(names.said if by_agent[i] else names.text)(item.texts[i])[0] for i in (0, 1)]
    verdict = None if item.verdict is None else (-item.verdict if item.swapped(seed) else item.verdict)
    return {
        "item": item.id, "question_id": question_id, "judge": item.judge,
        "first": item.pair[order[0]], "second": item.pair[order[1]], "question": question,
        "answer_1": texts[order[0]], "answer_2": texts[order[1]],
        "model_verdict": _SHOWN.get(verdict, ""), "bpde": f"{item.bpde:.6f}", "seed": str(seed), "human_verdict": "",
    }


def new_seed() -> int:
    return secrets.randbelow(2**31)


def export(run_dir: str | Path, beta: float, output: str | Path, seed: int | None = None) -> tuple[int, int]:
    """Write the top-β for annotators; (how many, the seed their order was drawn with)."""
    seed = new_seed() if seed is None else seed
    store = open_run(run_dir)
    try:
        chosen, anonymity = uncertain(store, beta), anonymity_of(store)
    finally:
        store.close()
    with replacing(output) as partial, partial.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(shown(item, seed, anonymity) for item in chosen)
    return len(chosen), seed


def credit(store: RunStore, item: Item, first: str, verdict: str) -> bool:
    """Record a person's verdict, given on the pair shown ``first`` first, as that judge's on the pair."""
    a, b = item.sides if first == item.pair[0] else item.sides[::-1]
    return store.override_review(item.match, item.judge_agent, a, b, item.question_id, _VERDICT[verdict])


def ask(run_dir: str | Path, beta: float, seed: int | None = None, read=input, write=print) -> int:
    """The same top-β, asked of a person at the terminal, one at a time; each answer is kept at once."""
    seed = new_seed() if seed is None else seed
    store = RunStore.open(run_dir)
    try:
        chosen, anonymity = uncertain(store.read, beta), anonymity_of(store.read)
        write(f"{len(chosen)} verdicts to look at; the answers are shown in an order drawn with seed {seed}.")
        done = 0
        for n, item in enumerate(chosen, start=1):
            view = shown(item, seed, anonymity)
            write(f"\n── {n} of {len(chosen)} · item {item.id} · question {view['question_id']} · judge {item.judge} "
                  f"(its verdict {view['model_verdict'] or 'none'}, BPDE {item.bpde:.3f})")
            write(f"[Question]\n{view['question']}\n\n[Answer 1]\n{view['answer_1']}\n\n[Answer 2]\n{view['answer_2']}")
            while True:
                try:
                    answer = read("Which is better? 1, 2, tie; s to skip, q to stop: ").strip().lower()
                except EOFError:
                    answer = "q"
                if answer in _VERDICT or answer in ("s", "q"):
                    break
                write("Please type 1, 2, tie, s or q.")
            if answer == "q":
                break
            if answer != "s":
                credit(store, item, view["first"], answer)
                done += 1
    finally:
        store.close()
    return done


def import_(run_dir: str | Path, path: str | Path) -> int:
    """Bring back a filled-in export. Every row is checked before any verdict is kept, so a bad file changes nothing."""
    store = RunStore.open(run_dir)
    try:
        known = {item.id: item for item in items(store.read)}
        with Path(path).open(newline="", encoding="utf-8") as handle:
            reader = csv.DictReader(handle)
            lacking = [c for c in ("item", "first", "second", "human_verdict") if c not in (reader.fieldnames or [])]
            if lacking:
                raise StoreError(f"{path}: not a file written by `arena annotate export` (no column {', '.join(lacking)})")
            rows = list(enumerate(reader, start=2))
        todo = []
        for number, row in rows:
            verdict = (row.get("human_verdict") or "").strip().lower()
            if not verdict:
                continue
            if verdict not in _VERDICT:
                raise StoreError(f"{path}, line {number}: human_verdict must be 1, 2 or tie, not {verdict!r}")
            item = known.get((row.get("item") or "").strip())
            if item is None:
                raise StoreError(f"{path}, line {number}: no item {row.get('item')!r} among the verdicts of {run_dir}")
            if sorted((row["first"], row["second"])) != sorted(item.pair):
                raise StoreError(f"{path}, line {number}: item {item.id} compares {item.pair[0]} and {item.pair[1]}, "
                                 f"not {row['first']} and {row['second']}")
            todo.append((item, row["first"], verdict))
        for item, first, verdict in todo:
            credit(store, item, first, verdict)
    finally:
        store.close()
    return len(todo)
