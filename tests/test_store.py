"""The run store: what is written, resuming after a crash, and the commands that read it."""

from __future__ import annotations

import csv
import io
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time

import pytest

from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.contract import RunReader
from arena.store import RunStore, StoreError
from arena.store.writer import SCHEMA_VERSION

from helpers import ROOT, play, store_and_reader
from store_kit import as_format7

SCENARIO = """
name: crashy
seed: 9
agents:
  give: {backend: scripted, strategy: always_all, delay: DELAY}
  keep: {backend: scripted, strategy: free_rider, delay: DELAY}
  copy: {backend: scripted, strategy: tit_for_tat, delay: DELAY}
  dice: {backend: scripted, strategy: random_contributor, delay: DELAY}
  noise: {backend: scripted, strategy: garbage, delay: DELAY}
games:
  - game: public_goods
    label: pairs
    seats: 2
    params: {rounds: 4}
  - game: public_goods
    label: coin
    agents: [dice, copy]
    params: {rounds: 3, mode: 2}
    tournament: {repeats: {block: 2, min: 4, max: 8, width: 0.01}}
tournament: {format: round_robin, repeats: 2}
match: {max_retries: 1}
concurrency: 3
"""


def scenario_file(tmp_path, delay=0.0, name="s.yaml"):
    path = tmp_path / name
    path.write_text(SCENARIO.replace("DELAY", str(delay)))
    return path


def arena(*args, timeout=120):
    env = {**os.environ, "COLUMNS": "200"}  # wide tables: no cell wrapped over two lines
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def finished_count(run_dir) -> int:
    path = run_dir / "run.sqlite"
    if not path.exists():
        return 0
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return db.execute("SELECT COUNT(*) FROM matches WHERE status = 'finished'").fetchone()[0]
        finally:
            db.close()
    except sqlite3.OperationalError:
        return 0


def exported(run_dir):
    result = arena("export", run_dir, "--format", "jsonl")
    assert result.returncode == 0, result.stderr
    return sorted((json.loads(line) for line in result.stdout.splitlines()), key=lambda r: r["key"])


def test_a_run_killed_at_random_moments_resumes_to_exactly_the_uninterrupted_results(tmp_path):
    path = scenario_file(tmp_path, delay=0.02)
    reference_dir, crashed_dir = tmp_path / "reference", tmp_path / "crashed"
    reference = arena("run", path, "--quiet", "--run-dir", reference_dir)
    assert reference.returncode == 0, reference.stderr
    expected = exported(reference_dir)
    total = len(expected)
    assert total == 10 * 2 + 8  # C(5,2) tables x 2 repeats, and the coin entry runs to its cap

    rng = random.Random(7)
    kills, progress = 0, [0]
    while kills < 4:
        target = progress[-1] + rng.randint(1, 5)
        if target >= total - 1:
            break
        proc = subprocess.Popen([sys.executable, "-m", "arena.cli", "run", str(path), "--quiet", "--run-dir", str(crashed_dir)],
                                cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            deadline = time.monotonic() + 60
            while finished_count(crashed_dir) < target and proc.poll() is None and time.monotonic() < deadline:
                time.sleep(0.005)
            time.sleep(rng.uniform(0, 0.05))  # land anywhere: between matches, mid-round, mid-commit
            proc.send_signal(signal.SIGKILL)
        finally:
            proc.wait(timeout=30)
        kills += 1
        progress.append(finished_count(crashed_dir))
    assert kills >= 3 and progress[-1] < total, f"the kills must land mid-run: {progress}"
    assert progress == sorted(progress), "finished matches are never lost"

    status = arena("runs", tmp_path)
    assert "stopped (resumable)" in status.stdout

    resumed = arena("run", path, "--quiet", "--run-dir", crashed_dir)
    assert resumed.returncode == 0, resumed.stderr
    assert f"{total} of {total} matches finished" in " ".join(resumed.stdout.split())
    got = exported(crashed_dir)
    assert [r["key"] for r in got] == [r["key"] for r in expected]  # none lost, none twice
    assert got == expected
    rank = lambda d: json.loads(arena("rank", d, "--json").stdout)
    a, b = rank(reference_dir), rank(crashed_dir)
    assert a["payoffs"] == b["payoffs"] and a["stability"] == b["stability"]


async def test_the_store_gives_back_exactly_the_records_that_were_played(tmp_path):
    s = parse_scenario({
        "name": "t", "agents": {"a": {"backend": "scripted", "strategy": "garbage"},
                                "b": {"backend": "scripted", "strategy": "tit_for_tat"}},
        "games": [{"game": "public_goods", "params": {"mode": 1, "rounds": 3}}], "tournament": {"repeats": 2},
    })
    store = RunStore.create_or_resume(tmp_path, s.name, "text", s.fingerprint())
    result, played = await play(s, store)
    stored = {r.key: r for r in store.read.records()}
    assert len(stored) == 2 and [r.key for r in played] == list(result.statuses) == list(stored)
    for record in played:
        assert stored[record.key] == record
        assert stored[record.key].model_dump_json() == record.model_dump_json()
        assert store.read.record(record.key) == record
    assert store.read.run_info()["status"] == "finished"
    # every message is there with its round and recipients
    db = store.db
    rows = db.execute("SELECT round, sender, recipients, kind FROM messages WHERE match_key = ? ORDER BY seq",
                      (played[0].key,)).fetchall()
    assert [(r.round, r.sender, list(r.recipients), r.kind) for r in played[0].messages] == \
        [(rnd, sender, json.loads(rcpt), kind) for rnd, sender, rcpt, kind in rows]


def test_a_changed_scenario_is_refused_unless_forced_new(tmp_path):
    path = scenario_file(tmp_path)
    run_dir = tmp_path / "run"
    assert arena("run", path, "--quiet", "--run-dir", run_dir).returncode == 0
    path.write_text(path.read_text().replace("seed: 9", "seed: 10"))
    refused = arena("run", path, "--quiet", "--run-dir", run_dir)
    assert refused.returncode == 2
    message = " ".join(refused.stderr.split())
    assert "different version of this scenario" in message and "--force-new" in message
    # whitespace and comments are not a change: only what decides the matches is
    forced = arena("run", path, "--quiet", "--run-dir", run_dir, "--force-new")
    assert forced.returncode == 0
    assert list(run_dir.glob("run.sqlite.old-*")), "the old run is set aside, not deleted"
    assert "seed: 10" in (run_dir / "scenario.yaml").read_text()


def test_cosmetic_edits_and_concurrency_do_not_count_as_a_change(tmp_path):
    path = scenario_file(tmp_path)
    run_dir = tmp_path / "run"
    assert arena("run", path, "--quiet", "--run-dir", run_dir).returncode == 0
    path.write_text("# a comment\n" + path.read_text().replace("concurrency: 3", "concurrency: 1") + "\ndescription: now described\n")
    again = arena("run", path, "--quiet", "--run-dir", run_dir)
    assert again.returncode == 0, again.stderr and "from the earlier run" in again.stdout


def test_show_export_rank_and_runs(tmp_path):
    path = scenario_file(tmp_path)
    run_dir = tmp_path / "runs" / "crashy"
    assert arena("run", path, "--quiet", "--run-dir", run_dir).returncode == 0
    records = exported(run_dir)

    listing = arena("show", run_dir)
    assert listing.returncode == 0 and records[0]["key"] in listing.stdout

    noisy = next(r for r in records if "noise" in {s["agent"] for s in r["seats"]} and r["group"] == "pairs")
    shown = arena("show", run_dir, "--match", noisy["key"])
    assert shown.returncode == 0
    text = shown.stdout
    for seat in noisy["seats"]:
        assert f"{seat['label']}: {seat['agent']}" in text
    noise_seat = next(s["label"] for s in noisy["seats"] if s["agent"] == "noise")
    assert "── round 1" in text and "[reply; seen by no other seat]" in text  # replies are private here
    assert f"{noise_seat} (noise) [reply" not in text  # defaulted garbage is never posted
    assert "invalid" in text and "(default)" in text
    assert "[notice; to Player" in text or "[notice; to everyone]" in text

    typo = arena("show", run_dir, "--match", noisy["key"][:-2])
    assert typo.returncode == 2 and "did you mean" in typo.stderr

    table = arena("export", run_dir, "--format", "csv")
    rows = list(csv.DictReader(io.StringIO(table.stdout)))
    assert len(rows) == sum(len(r["seats"]) for r in records)
    first = records[0]
    seat = first["seats"][0]
    row = next(x for x in rows if x["match"] == first["key"] and x["seat"] == seat["label"])
    assert row["agent"] == seat["agent"] and float(row["payoff"]) == first["payoffs"][seat["label"]]

    ranked = json.loads(arena("rank", run_dir, "--json").stdout)
    assert ranked["run"]["status"] == "finished" and ranked["run"]["finished"] == len(records)
    pairs = {r["agent"]: r for r in ranked["payoffs"] if r["group"] == "pairs"}
    keep = [r["payoffs"][s["label"]] for r in records if r["group"] == "pairs" for s in r["seats"] if s["agent"] == "keep"]
    assert pairs["keep"]["mean"] == pytest.approx(sum(keep) / len(keep))
    assert pairs["keep"]["low"] <= pairs["keep"]["mean"] <= pairs["keep"]["high"]
    assert pairs["noise"]["defaulted_turns"] > 0
    assert ranked["stability"][-1]["group"] == "coin" and ranked["stability"][-1]["repeats"] == 8

    runs = arena("runs", tmp_path / "runs")
    assert "crashy" in runs.stdout and "finished" in runs.stdout

    printed = arena("rank", run_dir)
    assert "pairs: mean payoff per agent" in printed.stdout and "coin: not stable; stopped at max repeats after 8" in " ".join(printed.stdout.split())


def test_commands_on_a_folder_that_is_not_a_run(tmp_path):
    for command in ("show", "export", "rank"):
        result = arena(command, tmp_path)
        assert result.returncode == 2 and "is not a run directory" in result.stderr
    with pytest.raises(StoreError):
        RunStore.open(tmp_path)


async def test_a_store_of_the_previous_format_is_upgraded_in_place_and_loses_nothing(tmp_path):
    """Stores written before referees reported metrics (format 2) open, gain the metrics table,
    and read back as before; a format this version does not know is still refused."""
    scenario = parse_scenario({"name": "old", "seed": 1, "games": [{"game": "public_goods", "params": {"rounds": 2}}],
                               "agents": {"a": {"backend": "scripted", "strategy": "always_all"},
                                          "b": {"backend": "scripted", "strategy": "free_rider"}}})
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    await run_tournament(scenario, store=store)
    before = [r.payoffs for r in store.read.records()]
    store.close()
    as_format7(tmp_path / "run" / "run.sqlite")
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")  # make it look like a format-2 store
    db.executescript("DROP TABLE metrics; ALTER TABLE messages DROP COLUMN shown; PRAGMA user_version = 2;")
    db.close()
    store = RunStore.open(tmp_path / "run")
    assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    records = list(store.read.records())
    assert [r.payoffs for r in records] == before and all(r.metrics == {} for r in records)
    from arena.results.payoffs import summarize
    by_payoff = {s.agent: s.mean for s in summarize(store.read.scores())}
    assert len(by_payoff) == 2 and {s.agent: s.mean for s in summarize(store.read.scores("payoff"), metric="payoff")} == by_payoff
    assert store.read.metric_names() == {"public_goods": ["payoff"]}
    store.close()
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")
    db.execute("PRAGMA user_version = 99")
    db.close()
    with pytest.raises(StoreError, match="store format 99"):
        RunStore.open(tmp_path / "run")


MEMORY_SCENARIO = {
    "name": "lean", "seed": 4, "concurrency": 1,
    "agents": {"a": {"backend": "scripted", "strategy": "always_all"},
               "b": {"backend": "scripted", "strategy": "free_rider"},
               "c": {"backend": "scripted", "strategy": "tit_for_tat"}},
    "games": [{"game": "public_goods", "seats": 2, "params": {"rounds": 3}}],
    "tournament": {"format": "round_robin", "repeats": 2},
}


async def test_the_runner_lets_go_of_a_record_once_the_store_has_it(tmp_path):
    """While the run goes on, the record of every match already over is gone from memory (nothing
    but the observer ever had it); what the run hands back holds keys and statuses, not records."""
    import gc
    import weakref

    from arena.run.runner import Observer, TournamentResult

    scenario = parse_scenario(MEMORY_SCENARIO)
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    gone: list[tuple[str, weakref.ref]] = []
    alive_when_next_started: list[list[str]] = []

    class Forget(Observer):
        def finished(self, record, resumed):
            gone.append((record.key, weakref.ref(record)))

        def event(self, event):
            if event.type == "match_started" and gone:  # the earlier matches are over and stored
                gc.collect()
                alive_when_next_started.append([key for key, ref in gone if ref() is not None])

    try:
        result = await run_tournament(scenario, store, Forget())
        # the next match starts while the one before waits for its commit: so the first start comes
        # before anything is over, and the later ones each see the matches reported over so far
        assert len(gone) == 6 and len(alive_when_next_started) >= 4
        assert all(alive == [] for alive in alive_when_next_started)
        assert "records" not in TournamentResult.model_fields
        assert sorted(result.statuses) == sorted(key for key, _ in gone) and result.count("finished") == 6
        assert [m.key for m in store.read.matches()] == list(result.statuses)
    finally:
        store.close()


def test_rank_report_show_and_resume_read_rows_not_whole_records(tmp_path, monkeypatch, capsys):
    """`arena rank`, `arena report`, `arena show` and a resume never build every record of a run:
    with the store's full loader broken they all still work."""
    import trio

    from arena.cli import main
    from arena.run.runner import KeepRecords

    scenario = parse_scenario(MEMORY_SCENARIO)
    run_dir = tmp_path / "run"
    store = RunStore.create_or_resume(run_dir, scenario.name, "{}", scenario.fingerprint())
    trio.run(run_tournament, scenario, store)
    (first, second, *_) = [m.key for m in store.read.matches()]
    store.db.execute("UPDATE matches SET status = 'running' WHERE key = ?", (second,))  # as a crash leaves it
    store.close()

    def whole_run(self, *args, **kwargs):
        raise AssertionError("RunReader.records was called: a whole run was loaded")

    monkeypatch.setattr(RunReader, "records", whole_run)
    store = RunStore.create_or_resume(run_dir, scenario.name, "{}", scenario.fingerprint())
    keep = KeepRecords()
    try:
        result = trio.run(run_tournament, scenario, store, keep)
    finally:
        store.close()
    assert [r.key for r in keep.in_order(result)] == [second]  # the one a crash cut short is played again
    assert result.resumed == 5 and result.count("finished") == 6

    capsys.readouterr()
    assert main(["rank", str(run_dir), "--json"]) == 0
    ranked = json.loads(capsys.readouterr().out)
    assert {row["agent"] for row in ranked["payoffs"]} == {"a", "b", "c"} and ranked["run"]["finished"] == 6
    assert main(["report", str(run_dir), "-o", str(tmp_path / "report.html")]) == 0
    assert "6 matches" in capsys.readouterr().out and (tmp_path / "report.html").stat().st_size > 0
    assert main(["show", str(run_dir), "--match", first]) == 0
    shown = capsys.readouterr().out
    assert f"{first} — public_goods" in shown and "── round 3" in shown


@pytest.mark.parametrize("name", ["peer-discussion-synthetic", "chateval-debate-synthetic", "chateval-scoring-synthetic"])
async def test_the_judging_summaries_read_from_the_last_notices_are_those_of_the_records(tmp_path, monkeypatch, name):
    """rank_json's summaries come from the store's last notices of the games that declare them
    (RunStore.final_notices), not from every record: the same numbers."""
    from arena.contract import plugins
    from arena.contract.summaries import notices_of
    from arena.results.summary import rank_json
    from arena.run.scenario import load_scenario
    from helpers import ROOT

    monkeypatch.chdir(ROOT)  # the scenarios name their data files from the repository's root
    scenario = load_scenario(ROOT / "scenarios" / f"{name}.yaml")
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    try:
        await run_tournament(scenario, store=store)
        (game,) = {entry.game for entry in scenario.games}
        summaries = plugins.load("game", game).summaries
        from_records = summaries(notices_of(list(store.read.records())))
        assert from_records and all(s.data and s.tables for s in from_records)
        fields = plugins.load("game", game).summary_fields
        assert summaries(list(store.read.final_notices(fields))) == from_records
        ranked = rank_json(store.read)
        assert ranked["summaries"] == {s.name: s.data for s in from_records}
        assert ranked["summary_tables"] == [t.model_dump() for s in from_records for t in s.tables]
    finally:
        store.close()


async def test_a_run_without_judging_games_has_no_judging_notices_to_read(tmp_path):
    from arena.results.summary import rank_json

    scenario = parse_scenario(MEMORY_SCENARIO)
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    try:
        await run_tournament(scenario, store=store)
        assert list(store.read.final_notices(("reviewers", "verdict", "dimensions"))) == []
        assert rank_json(store.read)["summaries"] == {} and rank_json(store.read)["summary_tables"] == []
    finally:
        store.close()


def test_a_ctrl_c_in_the_middle_of_a_write_is_raised_once_the_write_is_over(tmp_path):
    """A SIGINT that arrives while the store writes a round's buffered rows waits for the write to end
    (trio's KeyboardInterrupt protection). Raised half way, the rows were written but still buffered,
    and the interrupted run's last flush wrote them again: `arena run` said the store "could not be
    read (UNIQUE constraint failed)" and exited 2 instead of 130."""
    import trio

    s = parse_scenario({
        "name": "t", "agents": {"a": {"backend": "scripted", "strategy": "always_all"},
                                "b": {"backend": "scripted", "strategy": "tit_for_tat"}},
        "games": [{"game": "public_goods", "params": {"mode": 1, "rounds": 3}}], "tournament": {"repeats": 4},
        "concurrency": 1,
    })
    store = RunStore.create_or_resume(tmp_path, s.name, "text", s.fingerprint())
    store.COMMIT_EVERY = 0  # every round's rows are written as it closes, as a slow run's are
    real = store.db

    class CtrlCAfterWriting:
        """SQLite's connection, with a Ctrl-C the moment the second match's first messages are written."""
        batches = 0

        def executemany(self, sql, rows):
            done = real.executemany(sql, rows)
            if "INTO posted" in sql:
                CtrlCAfterWriting.batches += 1
                if CtrlCAfterWriting.batches == 4:  # three rounds of the first match, then the second's first
                    signal.raise_signal(signal.SIGINT)
            return done

        def __getattr__(self, name):
            return getattr(real, name)

    store.db = CtrlCAfterWriting()
    # a suite started from a background shell (`.ci/run &`) inherits an ignored SIGINT: hear it here,
    # as a terminal's Ctrl-C would be heard, so that trio installs its handler
    before = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt):
            trio.run(run_tournament, s, store)
    finally:
        store.db = real
        signal.signal(signal.SIGINT, before)
    assert CtrlCAfterWriting.batches >= 4
    assert store.read.status() == "interrupted"
    assert len(store.read.finished_keys()) == 1  # the first match, whole; the second is played again on resume
    store.close()
    resumed = RunStore.create_or_resume(tmp_path, s.name, "text", s.fingerprint())
    try:
        result = trio.run(run_tournament, s, resumed)
        assert result.resumed == 1 and result.count("finished") == 4
    finally:
        resumed.close()


async def test_a_failed_shared_commit_fails_every_match_that_waited_for_it():
    """When the commit that matches ending together share fails, none of them is counted as
    saved: the one that committed gets SQLite's error, the others a StoreError that names it."""
    import trio

    from arena.store.commits import GroupCommit

    class FullDisk:
        flushes = 0

        def flush(self):
            self.flushes += 1
            raise sqlite3.OperationalError("database or disk is full")

    disk = FullDisk()
    commits = GroupCommit(disk, gather=3)
    errors: list[BaseException] = []

    async def end_a_match():
        try:
            await commits.commit()
        except Exception as exc:
            errors.append(exc)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(end_a_match)
    assert disk.flushes == 1  # one commit was tried for all three
    assert sorted(type(e).__name__ for e in errors) == ["OperationalError", "StoreError", "StoreError"]
    assert all("database or disk is full" in str(e) for e in errors)
    with pytest.raises(sqlite3.OperationalError):  # the next match to end tries a commit of its own
        await commits.commit()
    assert disk.flushes == 2


async def test_a_match_row_says_when_it_started_while_it_runs_and_once_it_is_over(tmp_path, monkeypatch):
    """A reader of the store sees a match running, with its start and seats, from the first commit
    after it began; once it is over its row keeps that start and says when it ended."""
    from arena.run.runner import Observer

    monkeypatch.setattr(RunStore, "COMMIT_EVERY", 0)  # a commit at every round's close
    scenario = parse_scenario({**MEMORY_SCENARIO, "tournament": {"repeats": 1}, "games": [
        {"game": "public_goods", "agents": ["a", "b"], "params": {"rounds": 3}}]})
    seen = []
    with store_and_reader(scenario, tmp_path / "run") as (store, reader):

        class Watch(Observer):
            def event(self, event):
                if event.type == "round_closed" and event.round == 2:  # committed by then: rounds 0 and 1 closed
                    seen.append(reader.execute("SELECT status, started, seats FROM matches").fetchall())

        before = time.time()
        await run_tournament(scenario, store, Watch())
        [(status, started, seats)] = seen[0]
        assert status == "running" and before <= started <= time.time()
        assert [s["agent"] for s in json.loads(seats)] == ["a", "b"]
        [(status, started_after, ended)] = reader.execute("SELECT status, started, ended FROM matches").fetchall()
        assert (status, started_after) == ("finished", started) and ended >= started
