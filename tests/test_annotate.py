"""Human in the loop (`arena annotate export|ask|import`): the top-β verdicts by BPDE go to people,
who are shown the two answers in an order drawn from a recorded seed, by position and seat only,
with every name scrubbed; their verdicts come back to the right side of the pair."""

from __future__ import annotations

import csv
import math
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
import yaml

from arena.cli import annotate
from arena.cli.annotate import WITHHELD, item_id
from arena.engine.anonymity import scrub
from arena.contract import open_run
from arena.store import RunStore, StoreError

from helpers import ROOT

QUESTIONS = ROOT / "scenarios" / "data" / "sample-questions.jsonl"
# each peer signs its answers with who it is; the run's own anonymity terms add a code name
PEERS = {"alice": ("Written by alice with GPT-4o from OpenAI.", 0.8), "bob": ("Claude 3 Opus (Anthropic) wrote this.", 0.5),
         "carol": ("Project Tulip, by carol.", 0.3)}
NAMES = ["alice", "bob", "carol", "gpt-4o", "openai", "claude", "anthropic", "project tulip"]


def arena(*args, cwd: Path, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, input=stdin,
                          capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> Path:
    home = tmp_path_factory.mktemp("hitlc")
    agents = {name: {"backend": "scripted", "strategy": "synthetic_judge",
                     "params": {"name": name, "quality": quality, "style": style, "skill": 0.15, "position_bias": 0.1}}
              for name, (style, quality) in PEERS.items()}
    raw = {"name": "hitlc", "seed": 3, "agents": agents,
           "games": [{"game": "pairwise_review", "params": {"questions": str(QUESTIONS), "contestants": 3, "peer": True}}],
           "tournament": {"role_swap": False}, "anonymity": {"terms": ["Project Tulip"]}}
    (home / "s.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = arena("run", "s.yaml", "--quiet", "--run-dir", "run", cwd=home)
    assert result.returncode == 0, result.stdout + result.stderr
    return home / "run"


@pytest.fixture
def run(played, tmp_path) -> Path:
    """A copy of the played run for one test to change."""
    return Path(shutil.copytree(played, tmp_path / "run"))


def verdicts(run: Path) -> dict[str, dict]:
    """Every calibrated verdict by item id, with the pair's seats, agents and answers as the store has them."""
    store = open_run(run)
    try:
        found = {}
        for record in store.records():
            agent = {s.label: s.agent for s in record.seats}
            for message in record.messages:
                if message.kind == "notice" and "verdicts" in (message.data or {}):
                    for v in message.data["verdicts"]:
                        a, b = v["pair"]
                        found[item_id(record.key, v["judge"], a, b)] = {
                            **v, "match": record.key, "agents": (agent[a], agent[b]), "judge_agent": agent[v["judge"]],
                            "answers": (message.data["answers"][a], message.data["answers"][b])}
        return found
    finally:
        store.close()


def review_rows(run: Path, match: str, judge: str, pair) -> list[tuple]:
    store = open_run(run)
    try:
        rows = store.db.execute("SELECT a, b, reviewer, score FROM reviews WHERE match_key = ?", (match,)).fetchall()
    finally:
        store.close()
    return [r for r in rows if r[2] == judge and {r[0], r[1]} == set(pair)]


def export(run: Path, out: Path, beta: float = 1.0, seed: int | None = 7) -> list[dict]:
    """What `arena annotate export` writes (called in the process: a command costs seconds on a loaded machine)."""
    annotate.export(run, beta, out, seed)
    return list(csv.DictReader(out.open(encoding="utf-8")))


def write_rows(path: Path, rows: list[dict]) -> None:
    with path.open("w", newline="", encoding="utf-8") as handle:
        writer = csv.DictWriter(handle, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)


def test_the_export_names_nobody_and_records_the_order_it_drew(run, tmp_path):
    result = arena("annotate", "export", run, "--beta", "1", "--seed", "7", "-o", "todo.csv", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "todo.csv: " in result.stdout and "answers in an order drawn with seed 7" in result.stdout
    rows = list(csv.DictReader((tmp_path / "todo.csv").open(encoding="utf-8")))
    known = verdicts(run)
    assert len(rows) == len([v for v in known.values() if v["bpde"] is not None]) > 20
    text = (tmp_path / "todo.csv").read_text(encoding="utf-8").lower()
    assert [name for name in NAMES if name in text] == [] and WITHHELD.lower() in text
    assert all(not key.startswith("hitlc") for key in text.split(","))  # no match key, which names the agents
    orders = Counter()
    terms = ("Project Tulip", "alice", "bob", "carol", "OpenAI", "GPT", "Anthropic", "Claude")
    for row in rows:
        v = known[row["item"]]
        pair = tuple(v["pair"])
        assert row["seed"] == "7" and row["judge"] == v["judge"] and {row["first"], row["second"]} == set(pair)
        swapped = row["first"] == pair[1]
        orders[swapped] += 1
        first, second = v["answers"][::-1] if swapped else v["answers"]
        assert row["answer_1"] == scrub(first, terms, WITHHELD)[0] and row["answer_2"] == scrub(second, terms, WITHHELD)[0]
        shown_verdict = -v["verdict"] if swapped else v["verdict"]
        assert row["model_verdict"] == {-1: "1", 0: "tie", 1: "2"}[shown_verdict]
    assert orders[True] > 5 and orders[False] > 5  # drawn, not fixed
    again = export(run, tmp_path / "again.csv", seed=7)
    assert again == rows  # the seed decides the order
    other = export(run, tmp_path / "other.csv", seed=8)
    assert [r["first"] for r in other] != [r["first"] for r in rows] and {r["item"] for r in other} == {r["item"] for r in rows}


def test_exactly_the_top_beta_by_bpde_is_sent(run, tmp_path):
    rows = export(run, tmp_path / "todo.csv", beta=0.15, seed=None)
    everything = sorted((v["bpde"] for v in verdicts(run).values() if v["bpde"] is not None), reverse=True)
    assert len(rows) == math.ceil(0.15 * len(everything))
    assert min(float(r["bpde"]) for r in rows) >= everything[len(rows)] - 1e-6  # nothing left out is more uncertain
    assert int(rows[0]["seed"]) >= 0 and len({r["seed"] for r in rows}) == 1  # a fresh seed, kept with every row


def test_import_credits_each_verdict_to_the_side_that_was_shown_first(run, tmp_path):
    todo = tmp_path / "todo.csv"
    rows = export(run, todo)
    known = verdicts(run)
    swapped = next(r for r in rows if r["first"] == known[r["item"]]["pair"][1])
    straight = next(r for r in rows if r["first"] == known[r["item"]]["pair"][0])
    swapped["human_verdict"], straight["human_verdict"] = "1", "2"  # the answer shown first; the one shown second
    write_rows(todo, rows)
    result = arena("annotate", "import", run, todo, cwd=tmp_path)
    assert result.returncode == 0 and "2 human verdicts now replace the judges'" in result.stdout, result.stderr
    v = known[swapped["item"]]
    first, second = v["agents"][1], v["agents"][0]  # shown the other way round: the pair's second agent was preferred
    assert review_rows(run, v["match"], v["judge_agent"], v["agents"]) == [(first, second, v["judge_agent"], -1)]
    v = known[straight["item"]]
    first, second = v["agents"]  # shown as paired: its second agent was preferred
    assert review_rows(run, v["match"], v["judge_agent"], v["agents"]) == [(first, second, v["judge_agent"], 1)]


def test_a_bad_file_is_refused_and_changes_nothing(run, tmp_path):
    todo = tmp_path / "todo.csv"
    rows = export(run, todo)
    known = verdicts(run)
    v = known[rows[1]["item"]]
    before = review_rows(run, v["match"], v["judge_agent"], v["agents"])
    rows[1]["human_verdict"] = "1"
    for change, said in [({"item": "0123456789ab", "human_verdict": "2"}, "line 2: no item '0123456789ab'"),
                         ({"first": "Judge", "human_verdict": "2"}, f"line 2: item {rows[0]['item']} compares")]:
        write_rows(todo, [{**rows[0], **change}] + rows[1:])
        with pytest.raises(StoreError, match=said):
            annotate.import_(run, todo)
        assert review_rows(run, v["match"], v["judge_agent"], v["agents"]) == before  # the good row was not kept either
    old = tmp_path / "old.csv"
    old.write_text("match,judge,a,b,human_verdict\nm,j,x,y,1\n", encoding="utf-8")
    with pytest.raises(StoreError, match=r"not a file written by `arena annotate export` \(no column item"):
        annotate.import_(run, old)
    write_rows(todo, [{**rows[0], "human_verdict": "maybe"}] + rows[1:])  # and the command says so, and fails
    result = arena("annotate", "import", run, todo, cwd=tmp_path)
    assert result.returncode == 2 and "line 2: human_verdict must be 1, 2 or tie, not 'maybe'" in result.stderr
    assert review_rows(run, v["match"], v["judge_agent"], v["agents"]) == before


def test_at_the_terminal_the_same_order_and_no_names(run, tmp_path):
    rows = export(run, tmp_path / "todo.csv")
    asked = arena("annotate", "ask", run, "--beta", "1", "--seed", "7", cwd=tmp_path, stdin="maybe\n1\ns\n2\nq\n")
    assert asked.returncode == 0, asked.stderr
    out = asked.stdout
    assert [name for name in NAMES if name in out.lower()] == []
    assert f"── 1 of {len(rows)} · item {rows[0]['item']}" in out and "order drawn with seed 7" in out
    assert "Please type 1, 2, tie, s or q." in out and "2 human verdicts now replace the judges'" in out
    assert f"[Answer 1]\n{rows[0]['answer_1']}\n\n[Answer 2]\n{rows[0]['answer_2']}" in out
    known = verdicts(run)
    for row, said in ((rows[0], -1), (rows[2], 1)):  # "1" for the first item, "2" for the third; the second skipped
        v = known[row["item"]]
        first = v["agents"][0] if row["first"] == v["pair"][0] else v["agents"][1]
        (review,) = review_rows(run, v["match"], v["judge_agent"], v["agents"])
        assert review[0] == first and review[3] == said
    skipped = known[rows[1]["item"]]
    assert len(review_rows(run, skipped["match"], skipped["judge_agent"], skipped["agents"])) == 2  # both orders, as judged


@pytest.mark.parametrize("material", [False, True])
async def test_fixed_answers_are_shown_by_position_and_credited_to_their_source(tmp_path, material):
    """A dataset's answers are the referee's material: shown as the judges in the match read them, unless
    the scenario asks for its material to be scrubbed too (then a source's name, a model's, is withheld)."""
    import json

    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario

    files = []
    for model, text in (("gpt-4", "Point 1. Heat it.\nPoint 2. Time it. (gpt-4)"), ("vicuna-13b", "Boil it. (vicuna-13b)")):
        path = tmp_path / f"answer_{model}.jsonl"
        path.write_text(json.dumps({"question_id": "s1", "text": text, "model_id": model}) + "\n", encoding="utf-8")
        files.append(str(path))
    agents = {n: {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": n, "skill": 0.3}} for n in ("j1", "j2")}
    raw = {"name": "fixed", "seed": 1, "agents": agents, "tournament": {"role_swap": False},
           "games": [{"game": "pairwise_review", "params": {"questions": str(QUESTIONS), "contestants": 0, "answers": files}}]}
    if material:
        raw["anonymity"] = {"material": True}
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "run", "fixed", yaml.safe_dump(raw), scenario.fingerprint())
    try:
        await run_tournament(scenario, store)
        judge_of = {s.label: s.agent for r in store.read.records() if r.params["case"] == "s1" for s in r.seats}
    finally:
        store.close()
    rows = [r for r in export(tmp_path / "run", tmp_path / "todo.csv", seed=5) if r["question_id"] == "s1"]
    assert rows and all({r["first"], r["second"]} == {"Answers 1", "Answers 2"} for r in rows)
    text = (tmp_path / "todo.csv").read_text(encoding="utf-8").lower()
    if material:
        assert "gpt" not in text and "vicuna" not in text  # a source's name is a model's name
    else:
        assert "time it. (gpt-4)" in text and "boil it. (vicuna-13b)" in text  # as the dataset has it
    row = rows[0]
    row["human_verdict"] = "1"
    write_rows(tmp_path / "todo.csv", rows)
    assert annotate.import_(tmp_path / "run", tmp_path / "todo.csv") == 1
    first, second = ("gpt-4", "vicuna-13b") if row["first"] == "Answers 1" else ("vicuna-13b", "gpt-4")
    store = open_run(tmp_path / "run")
    try:
        judged = [r.battle for r in store.review_rows() if r[0] == "s1" and r[3] == judge_of[row["judge"]]]
    finally:
        store.close()
    assert judged == [("s1", first, second, judge_of[row["judge"]], -1)]


async def test_the_file_withholds_every_spelling_the_match_withholds_and_nothing_else(tmp_path):
    """One filter: an annotator reads each answer as the match's judges read it (every spelling of a
    name withheld), and the question as it was asked (a vendor's name in it stays)."""
    import json
    import re

    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario

    question = "How do I sum a column in Google Sheets?"
    (tmp_path / "q.jsonl").write_text(json.dumps({"id": "gs", "question": question}) + "\n", encoding="utf-8")
    styles = {"my-finetune": "MyFinetune here (my finetune to friends; my-finetune on paper).",
              "o3": "Regards, o3 (no relation to MyFinetune).", "carol": "By carol, a \uff27\uff30\uff34-\uff14 model."}
    agents = {n: {"backend": "scripted", "strategy": "synthetic_judge",
                  "params": {"name": n, "quality": q, "style": styles[n], "skill": 0.1, "position_bias": 0.3}}
              for n, q in (("my-finetune", 0.8), ("o3", 0.5), ("carol", 0.3))}
    raw = {"name": "spelled", "seed": 4, "agents": agents, "tournament": {"role_swap": False},
           "games": [{"game": "pairwise_review", "params": {"questions": str(tmp_path / "q.jsonl"), "contestants": 3,
                                                             "peer": True, "samples": 3}}]}
    scenario = parse_scenario(raw)  # no `anonymity`: on by default
    store = RunStore.create_or_resume(tmp_path / "run", "spelled", yaml.safe_dump(raw), scenario.fingerprint())
    try:
        await run_tournament(scenario, store)
        (record,) = store.read.records()
    finally:
        store.close()
    judged = [m.shown or m.content for m in record.messages if m.kind == "prompt" and m.round > 1]
    rows = export(tmp_path / "run", tmp_path / "todo.csv", seed=3)
    assert rows, "no verdict was uncertain enough to export"
    text = (tmp_path / "todo.csv").read_text(encoding="utf-8")
    for spelling in ("MyFinetune", "my finetune", "my-finetune", r"\bo3\b", "\uff27\uff30\uff34", "carol"):
        assert not re.search(spelling, text, re.IGNORECASE), spelling
        assert not any(re.search(spelling, prompt, re.IGNORECASE) for prompt in judged), spelling
    for row in rows:
        assert row["question"] == question  # "Google" is the question's: it stays
        for answer in (row["answer_1"], row["answer_2"]):
            assert WITHHELD in answer and any(f"]\n{answer}\n[End of" in prompt for prompt in judged)  # as the judges read it


def test_equal_bpde_goes_by_the_smaller_calibrated_margin(run, tmp_path):
    known = verdicts(run)

    def margin(v):  # by hand: each order's mean score difference, the mean of both, from a tie
        by_order = {}
        for value, order in zip(v["results"], v["orders"]):
            if value is not None:
                by_order.setdefault(order, []).append(value)
        return abs(sum(sum(x) / len(x) for x in by_order.values()) / len(by_order))

    rows = export(run, tmp_path / "all.csv", beta=1.0)
    ranked = [(-round(known[r["item"]]["bpde"], 9), margin(known[r["item"]])) for r in rows]
    assert ranked == sorted(ranked)  # BPDE first, then the margin
    groups = Counter(b for b, _ in ranked)
    shared = [b for b, n in groups.items() if n > 1 and len({m for x, m in ranked if x == b}) > 1]
    assert shared, "no BPDE shared by verdicts of different margins: the rule was not put to the test"
    # a cut inside a group of equal BPDE keeps its closest calls and leaves the clearest out
    b = shared[0]
    inside = [i for i, (x, _) in enumerate(ranked) if x == b]
    beta = (inside[0] + 1) / len(rows)  # room for one of the group
    kept = export(run, tmp_path / "cut.csv", beta=beta)
    assert len(kept) == inside[0] + 1
    chosen = margin(known[kept[-1]["item"]])
    left = [margin(known[r["item"]]) for r in rows[inside[0] + 1:] if -round(known[r["item"]]["bpde"], 9) == b]
    assert left and chosen <= min(left) and chosen < max(left)
