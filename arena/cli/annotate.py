"""Human in the loop (FairEval's HITLC): the judge's least certain verdicts go to people,
at the terminal (`arena annotate ask RUN_DIR --beta 0.2`) or through a file:

`arena annotate export RUN_DIR --beta 0.2 -o todo.csv` writes the top-β of a run's calibrated
pairwise verdicts by BPDE (the entropy of a judge's 2k results for a pair: high when its verdicts
disagree with themselves), with the question and both answers, for annotators to fill in the
``human_verdict`` column (1, 2 or tie). `arena annotate import RUN_DIR todo.csv` brings the
filled rows back: each human verdict replaces that judge's verdicts on that pair, in the run's
review tuples, so `arena rank RUN_DIR` uses it.
"""

from __future__ import annotations

import csv
import math
from pathlib import Path

from arena.store import RunStore, StoreError

COLUMNS = ["match", "question_id", "judge", "a", "b", "question", "answer_a", "answer_b", "model_verdict", "bpde",
           "human_verdict"]
_VERDICT = {"1": -1, "2": 1, "tie": 0}


def uncertain(store: RunStore, beta: float) -> list[dict]:
    """The top-β (a share, 0 to 1) of calibrated verdicts by BPDE, most uncertain first; ties broken by key."""
    items = []
    for record in store.records():
        agent = {s.label: s.agent for s in record.seats}
        for message in record.messages:
            data = message.data or {}
            if message.kind != "notice" or "verdicts" not in data:
                continue
            answers = {m.sender: m.content for m in record.messages if m.kind == "reply" and m.round == 1}
            for item in data["verdicts"]:
                if item["bpde"] is None:
                    continue
                a, b = item["pair"]
                items.append({
                    "match": record.key, "question_id": data["question"], "judge": agent[item["judge"]],
                    "a": agent[a], "b": agent[b], "question": data.get("question_text", ""), "answer_a": answers.get(a, ""),
                    "answer_b": answers.get(b, ""), "model_verdict": {-1: "1", 0: "tie", 1: "2"}.get(item["verdict"], ""),
                    "bpde": round(item["bpde"], 6), "human_verdict": "",
                })
    items.sort(key=lambda i: (-i["bpde"], i["match"], i["judge"], i["a"], i["b"]))
    return items[: math.ceil(beta * len(items) - 1e-9)]


def export(run_dir: str | Path, beta: float, output: str | Path) -> int:
    if not 0 < beta <= 1:
        raise StoreError(f"--beta must be a share between 0 and 1, not {beta}")
    store = RunStore.open(run_dir)
    items = uncertain(store, beta)
    with Path(output).open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=COLUMNS)
        writer.writeheader()
        writer.writerows(items)
    return len(items)


def ask(run_dir: str | Path, beta: float, read=input, write=print) -> int:
    """The same top-β, asked of a person at the terminal, one at a time; each answer is kept at once."""
    store = RunStore.open(run_dir)
    items = uncertain(store, beta)
    done = 0
    for n, item in enumerate(items, start=1):
        write(f"\n── {n} of {len(items)} · {item['match']} · judge {item['judge']} (verdict {item['model_verdict']}, "
              f"BPDE {item['bpde']:.3f})")
        write(f"[Question]\n{item['question']}\n\n[Answer 1: {item['a']}]\n{item['answer_a']}\n\n"
              f"[Answer 2: {item['b']}]\n{item['answer_b']}")
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
            store.override_review(item["match"], item["judge"], item["a"], item["b"], item["question_id"], _VERDICT[answer])
            done += 1
    store.close()
    return done


def import_(run_dir: str | Path, path: str | Path) -> int:
    store = RunStore.open(run_dir)
    done = 0
    with Path(path).open(newline="", encoding="utf-8") as handle:
        for number, row in enumerate(csv.DictReader(handle), start=2):
            verdict = (row.get("human_verdict") or "").strip().lower()
            if not verdict:
                continue
            if verdict not in _VERDICT:
                raise StoreError(f"{path}, line {number}: human_verdict must be 1, 2 or tie, not {verdict!r}")
            if not store.override_review(row["match"], row["judge"], row["a"], row["b"], row["question_id"], _VERDICT[verdict]):
                raise StoreError(f"{path}, line {number}: no verdict of {row['judge']!r} on {row['a']!r} and {row['b']!r} "
                                 f"in match {row['match']!r} of {run_dir}")
            done += 1
    store.close()
    return done
