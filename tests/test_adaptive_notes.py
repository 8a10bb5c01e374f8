"""What a person reads about an adaptive entry after its run: the note saying why its schedule stopped
names the entry once (in `arena run`, `arena show`, `arena rank` and the report's data), and its payoff
table lays out its judges as the same entry played without a schedule does."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from arena.contract import open_run
from arena.results.payoffs import summarize

from helpers import ROOT, arena_offline

DATA = ROOT / "scenarios" / "data"
SOURCES = ("atlas", "birch", "cedar", "delta", "ember", "flint")
JUDGES = {
    "sage": {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": "sage", "skill": 0.05}},
    "novice": {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": "novice", "skill": 0.2}},
    "braggart": {"backend": "scripted", "strategy": "synthetic_judge",
                 "params": {"name": "braggart", "skill": 0.1, "position_bias": 0.4}},
}


def scenario(schedule: dict | None) -> dict:
    raw = {"name": "notes", "seed": 7, "agents": JUDGES, "concurrency": 4,
           "games": [{"game": "pairwise_review", "label": "pr",
                      "params": {"questions": str(DATA / "sample-questions.jsonl"), "contestants": 0,
                                 "answers": [str(DATA / "adaptive-answers" / f"{s}.jsonl") for s in SOURCES]}}]}
    if schedule is not None:
        raw["tournament"] = {"schedule": schedule}
    return raw


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """(folder, the adaptive run's `arena run` output); the same answers and judges played without a
    schedule are in folder / "plain"."""
    folder = tmp_path_factory.mktemp("notes")
    for name, schedule in (("adaptive", {"seed_block": 2, "block": 10, "budget": 20, "width": 1}), ("plain", None)):
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(scenario(schedule)))
    played = arena_offline("run", folder / "adaptive.yaml", "--run-dir", folder / "adaptive", "--plain", cwd=folder)
    assert played.returncode == 0, played.stderr
    plain = arena_offline("run", folder / "plain.yaml", "--run-dir", folder / "plain", "--quiet", cwd=folder)
    assert plain.returncode == 0, plain.stderr
    return folder, played.stdout


STOPPED = re.compile(r"the adaptive schedule \(default\) stopped after 20 of 360 comparisons in \d+ blocks: its budget "
                     r"of 20 comparisons is spent")


def _said_once(text: str, prefix: str) -> None:
    """The stop note is in ``text`` once, right after ``prefix`` (which names the entry), and the
    entry's name is not repeated inside it."""
    flat = " ".join(text.split())
    found = [m.start() for m in STOPPED.finditer(flat)]
    assert len(found) == 1, flat[-2000:]
    assert flat[:found[0]].endswith(prefix), flat[found[0] - 80:found[0] + 80]
    assert "pr: pr:" not in flat and "(pr): pr:" not in flat


def test_the_stop_note_names_the_entry_once_while_the_run_goes(runs):
    _, out = runs
    live, tables = out.split("pr: mean payoff per agent", 1)  # the live log, then the tables at the end
    _said_once(live, "note: pr: ")
    _said_once(tables, "note (pr): ")


def test_show_and_rank_name_the_entry_once(runs):
    folder, _ = runs
    for command in (("show",), ("rank",)):
        done = arena_offline(*command, folder / "adaptive", cwd=folder)
        assert done.returncode == 0, done.stderr
        _said_once(done.stdout, "note (pr): ")


def test_the_stored_note_and_the_reports_data_keep_the_name_apart_from_the_text(runs, tmp_path):
    folder, _ = runs
    (note,) = [n for n in open_run(folder / "adaptive").notes() if n["topic"] == "schedule"]
    assert note["agent"] == "pr" and STOPPED.match(note["text"]), note
    ranked = arena_offline("rank", folder / "adaptive", "--json", cwd=folder)
    assert ranked.returncode == 0, ranked.stderr
    assert [(n["agent"], n["text"]) for n in json.loads(ranked.stdout)["notes"]] == [("pr", note["text"])]
    report = arena_offline("report", folder / "adaptive", "-o", tmp_path / "report.html", cwd=folder)
    assert report.returncode == 0, report.stderr
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert note["text"] in html and "pr: pr:" not in html and "pr: the adaptive" not in html


def test_an_adaptive_entrys_payoff_table_lays_out_its_judges_as_a_plain_run_does(runs):
    """pairwise_review gives a judge no payoff of its own (0, by the game's rule): with fixed answers and
    no schedule, every seat is a judge and the table lists them at 0, one role, no role column. An
    adaptive entry's comparisons seat one judge each, and its table is the same."""
    folder, _ = runs
    rows = {}
    for name in ("adaptive", "plain"):
        store = open_run(folder / name)
        rows[name] = [(r.agent, r.role, r.mean, r.low, r.high) for r in summarize(store.scores(), store.turns())]
    assert rows["adaptive"] == rows["plain"] == [(judge, "Judge", 0.0, 0.0, 0.0) for judge in sorted(JUDGES)]
    headers = []
    for name in ("adaptive", "plain"):  # `arena rank` prints the run's tables
        done = arena_offline("rank", folder / name, cwd=folder)
        assert done.returncode == 0, done.stderr
        lines = done.stdout.splitlines()
        start = next(k for k, line in enumerate(lines) if line.startswith("pr: mean payoff per agent"))
        headers.append(" ".join(lines[start + 2].replace("┃", " ").split()))
    assert headers[0] == headers[1] == "Agent Matches Mean 95% CI Std Invalid Defaulted Valid"  # one role: no role column


async def test_an_elimination_schedule_runs_to_its_stop_note(tmp_path):
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    raw = scenario({"rule": "elimination", "seed_block": 2, "block": 40, "budget": 360, "width": 1})
    parsed = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "run", parsed.name, yaml.safe_dump(raw), parsed.fingerprint())
    try:
        result = await run_tournament(parsed, store)
        notes = [n["text"] for n in store.read.notes() if n["topic"] == "schedule"]
    finally:
        store.close()
    assert result.count("finished") == len(result.statuses) > 0
    assert len(notes) == 1 and notes[0].startswith("the adaptive schedule (elimination) stopped after"), notes
