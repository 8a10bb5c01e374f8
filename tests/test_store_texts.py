"""Formats 8 and 9: each distinct text (and name) stored once. What a user checks: the export of a run
is the same byte for byte whether the run was written by this format, upgraded to it from format 7 or
8, or caught half way through that upgrade by a kill; the texts a row refers to are there as soon as
the row is; a store holds each text once."""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
import trio

from arena.contract import open_run
from arena.contract.runs.schema import SCHEMA_VERSION
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore
from arena.store.texts import event_parts, event_rest, spec_parts

from store_kit import TINY, as_format7, as_format8, cli

PUBLIC_GOODS = {**TINY, "agents": {**TINY["agents"], "copy": {"backend": "scripted", "strategy": "tit_for_tat"}},
                "games": [{"game": "public_goods", "params": {"rounds": 3}}], "tournament": {"repeats": 2}}


def played(run_dir: Path, raw: dict = PUBLIC_GOODS) -> Path:
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(run_dir, scenario.name, "{}", scenario.fingerprint())
    try:
        trio.run(run_tournament, scenario, store)
    finally:
        store.close()
    return run_dir


def export(capsys, run_dir: Path) -> tuple[str, str]:
    code, jsonl, err = cli(capsys, "export", run_dir)
    assert code == 0, err
    code, table, err = cli(capsys, "export", run_dir, "--format", "csv")
    assert code == 0, err
    return jsonl, table


def version(run_dir: Path) -> int:
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        return db.execute("PRAGMA user_version").fetchone()[0]
    finally:
        db.close()


def test_each_distinct_text_is_stored_once(tmp_path):
    run_dir = played(tmp_path / "run")
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        contents = [c for (c,) in db.execute("SELECT content FROM messages")]
        stored = [t for (t,) in db.execute("SELECT text FROM texts")]
        rules = db.execute("SELECT COUNT(*), COUNT(DISTINCT content) FROM messages WHERE kind = 'rules'").fetchone()
    finally:
        db.close()
    assert len(stored) == len(set(stored))  # no text twice
    assert set(contents) <= set(stored) and len(set(contents)) < len(contents)
    assert rules[0] >= 6 and rules[1] < rules[0]  # the rules went to every seat of every match: kept once


OLD_LAYOUTS = {7: as_format7, 8: as_format8}


@pytest.mark.parametrize("old", sorted(OLD_LAYOUTS))
def test_an_older_store_upgraded_exports_byte_for_byte_what_it_did(tmp_path, capsys, old):
    run_dir = played(tmp_path / "run")
    written = export(capsys, run_dir)
    OLD_LAYOUTS[old](run_dir / "run.sqlite")
    assert version(run_dir) == old and export(capsys, run_dir) == written  # read as it is, not upgraded
    assert version(run_dir) == old
    RunStore.open(run_dir).close()  # a writer upgrades it
    assert version(run_dir) == SCHEMA_VERSION and export(capsys, run_dir) == written
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        kinds = dict(db.execute("SELECT name, type FROM sqlite_master WHERE name IN "
                                "('matches', 'messages', 'events', 'outcomes', 'metrics')"))
        texts = [t for (t,) in db.execute("SELECT text FROM texts")]
        unused = db.execute("SELECT COUNT(*) FROM texts WHERE id NOT IN (SELECT body FROM happened UNION "
                            "SELECT rest FROM happened WHERE rest IS NOT NULL UNION SELECT content FROM posted "
                            "UNION SELECT sender FROM posted UNION SELECT kind FROM posted UNION SELECT type FROM happened "
                            "UNION SELECT recipients FROM posted UNION SELECT data FROM posted WHERE data IS NOT NULL "
                            "UNION SELECT seat FROM seat_outcomes UNION SELECT agent FROM seat_outcomes "
                            "UNION SELECT role FROM seat_outcomes UNION SELECT metric FROM seat_metrics "
                            "UNION SELECT spec_rest FROM match_rows WHERE spec_rest IS NOT NULL)").fetchone()[0]
    finally:
        db.close()
    assert kinds == dict.fromkeys(("matches", "messages", "events", "outcomes", "metrics"), "view")
    assert len(texts) == len(set(texts)) and unused == 0  # format 8's whole event bodies went with the move


def test_the_format_5_fixture_upgraded_exports_what_it_did(tmp_path, capsys):
    import shutil

    source = Path(__file__).parent / "data" / "format5_run"
    run_dir = tmp_path / "old"
    shutil.copytree(source, run_dir)
    written = export(capsys, run_dir)
    RunStore.open(run_dir).close()
    assert version(run_dir) == SCHEMA_VERSION and export(capsys, run_dir) == written


KILL_IN_THE_MOVE = """
import os, signal, sys
import arena.store.texts as texts
hashed = 0
real = texts.text_hash
def text_hash(text):
    global hashed
    hashed += 1
    if hashed == 25:  # part way through copying the texts: the upgrade's transaction is open
        os.kill(os.getpid(), signal.SIGKILL)
    return real(text)
texts.text_hash = text_hash
from arena.store import RunStore
RunStore.open(sys.argv[1])
"""


@pytest.mark.parametrize("old", sorted(OLD_LAYOUTS))
def test_a_kill_in_the_middle_of_the_upgrade_loses_nothing(tmp_path, capsys, old):
    run_dir = played(tmp_path / "run")
    written = export(capsys, run_dir)
    OLD_LAYOUTS[old](run_dir / "run.sqlite")
    killed = subprocess.run([sys.executable, "-c", KILL_IN_THE_MOVE, str(run_dir)], capture_output=True)
    assert killed.returncode == -9, killed.stderr.decode()
    assert version(run_dir) == old and export(capsys, run_dir) == written  # the old store, whole
    RunStore.open(run_dir).close()
    assert version(run_dir) == SCHEMA_VERSION and export(capsys, run_dir) == written


def test_a_follower_never_sees_a_row_before_its_texts(tmp_path):
    """Another connection reads after each of the writer's commits: every row of the tables that number
    texts is there in the views (an inner join drops a row whose text is missing)."""
    scenario = parse_scenario(PUBLIC_GOODS)
    store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "{}", scenario.fingerprint())
    reader = sqlite3.connect(f"file:{tmp_path / 'run' / 'run.sqlite'}?mode=ro", uri=True)
    seen = []
    real_commit = store._commit

    def commit():
        real_commit()
        counts = reader.execute("SELECT (SELECT COUNT(*) FROM posted), (SELECT COUNT(*) FROM messages), "
                                "(SELECT COUNT(*) FROM happened), (SELECT COUNT(*) FROM events)").fetchone()
        seen.append(counts)

    store._commit = commit
    store.COMMIT_EVERY = 0  # a commit at every round's close, as in a slow run
    try:
        trio.run(run_tournament, scenario, store)
    finally:
        store.close()
        reader.close()
    assert len(seen) > 3 and seen[-1][0] > 0
    assert all(posted == messages and happened == events for posted, messages, happened, events in seen)


def test_a_batch_of_rows_is_stored_whole_when_a_round_close_commits_part_way(tmp_path):
    """Rows handed over together (a bench's synthetic run, a worker's) in which a round's close commits:
    the rows after it are in the store once it is flushed, none dropped."""
    store = RunStore.create_or_resume(tmp_path / "run", "batch", "{}", "batch")
    store.COMMIT_EVERY = 0  # a commit at every round's close, as in a slow run: here at the batch's first row
    try:
        store.add_rows([("events", ("m", 0, "round_closed", '{"match":"m","type":"round_closed","round":1}', 1.0)),
                        ("messages", ("m", 1, 1, 1, "Referee", '["Player 1"]', "notice", "after the close", None, None)),
                        ("events", ("m", 2, "match_ended", '{"match":"m","type":"match_ended","rounds":1}', 2.0)),
                        ("outcomes", ("m", "Player 1", "ada", "Player", 0.5))])
        store.flush()
    finally:
        store.close()
    reader = open_run(tmp_path / "run")
    try:
        events = reader.db.execute("SELECT seq, type FROM events WHERE match_key = 'm' ORDER BY seq").fetchall()
        messages = reader.db.execute("SELECT seq, content FROM messages WHERE match_key = 'm'").fetchall()
        outcomes = reader.db.execute("SELECT seat, agent, role, payoff FROM outcomes WHERE match_key = 'm'").fetchall()
    finally:
        reader.close()
    assert events == [(0, "round_closed"), (2, "match_ended")]
    assert messages == [(1, "after the close")]
    assert outcomes == [("Player 1", "ada", "Player", 0.5)]


def test_an_event_whose_key_would_not_read_back_is_kept_whole(tmp_path):
    """A match key with a quote, a backslash or a control character is written escaped in the event's
    JSON: the store keeps such a body whole, and it reads back as it was written."""
    assert event_rest("k", "round_closed", '{"match":"k","type":"round_closed","round":1}') == ',"round":1}'
    for key in ('a"b', "a\\b", "a\nb", "a\x01b"):
        body = json.dumps({"match": key, "type": "x"}, separators=(",", ":"))
        assert event_rest(key, "x", body) == body
    assert event_rest("k", "x", '{"match":"k","type":"xy"}') == '{"match":"k","type":"xy"}'  # not its own type

    store = RunStore.create_or_resume(tmp_path / "run", "odd", "{}", "odd")
    try:
        key = 'odd "key"\\é\t'
        store.add_rows([("events", (key, 0, "round_closed", json.dumps({"match": key, "type": "round_closed"}), 1.0)),
                        ("messages", (key, 1, 0, 0, "Referee", '["Player 1"]', "rules", "the rules", '{"n": 1}', None)),
                        ("events", ("plain", 0, "round_closed", '{"match":"plain","type":"round_closed","round":2}', 2.0))])
        store.flush()
        rows = store.db.execute("SELECT match_key, seq, type, body FROM events ORDER BY rowid").fetchall()
        messages = store.db.execute("SELECT match_key, content, data, recipients FROM messages").fetchall()
    finally:
        store.close()
    assert rows == [(key, 0, "round_closed", json.dumps({"match": key, "type": "round_closed"})),
                    ("plain", 0, "round_closed", '{"match":"plain","type":"round_closed","round":2}')]
    assert messages == [(key, "the rules", '{"n": 1}', '["Player 1"]')]


def test_a_match_played_again_replaces_its_rows_and_reuses_its_texts(tmp_path, capsys):
    """A resume wipes an unfinished match's rows and plays it again: nothing of it twice, texts not copied."""
    run_dir = played(tmp_path / "run")
    written = export(capsys, run_dir)
    db = sqlite3.connect(run_dir / "run.sqlite")
    texts = db.execute("SELECT COUNT(*) FROM texts").fetchone()[0]
    posted = db.execute("SELECT COUNT(*) FROM posted").fetchone()[0]
    db.execute("UPDATE matches SET status = 'running' WHERE position = 0")  # as a crash mid-match leaves it
    db.commit()
    db.close()
    played(run_dir)  # resumed: the match is played again from its seed
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        assert db.execute("SELECT COUNT(*) FROM texts").fetchone()[0] == texts
        assert db.execute("SELECT COUNT(*) FROM posted").fetchone()[0] == posted
    finally:
        db.close()
    assert export(capsys, run_dir) == written


@pytest.mark.parametrize("kind", ["messages", "events"])
def test_a_reader_of_a_finished_run_gets_the_rows_as_stored(tmp_path, kind):
    run_dir = played(tmp_path / "run")
    with open_run(run_dir) as run:
        record = next(iter(run.records()))
        transcript = run.transcript(record.key)
    if kind == "messages":
        assert [m.content for m in transcript.messages] == [m.content for m in record.messages] and record.messages
    else:
        assert {e.type for e in transcript.events} >= {"match_started", "match_ended"}


def test_names_and_the_shared_part_of_each_spec_are_stored_once(tmp_path):
    """Format 9: a message's sender and kind, an event's type and an outcome's seat, agent and role are
    numbers of texts; the settings and scrub list every match of an entry shares are one text."""
    run_dir = played(tmp_path / "run")
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        kinds = set(db.execute("SELECT typeof(sender), typeof(kind) FROM posted UNION "
                               "SELECT typeof(type), typeof(body) FROM happened UNION "
                               "SELECT typeof(seat), typeof(agent) FROM seat_outcomes"))
        shared = db.execute("SELECT COUNT(*), COUNT(DISTINCT spec_rest), COUNT(spec_rest) FROM match_rows").fetchone()
        referee = db.execute("SELECT COUNT(*) FROM texts WHERE text = 'Referee'").fetchone()[0]
        specs = [json.loads(spec) for (spec,) in db.execute("SELECT spec FROM matches")]
        own = [spec for (spec,) in db.execute("SELECT spec FROM match_rows")]
    finally:
        db.close()
    assert kinds == {("integer", "integer")}
    assert shared[0] >= 2 and shared[1] == 1 and shared[2] == shared[0]
    assert referee == 1
    assert all("scrub" in spec and "settings" in spec for spec in specs)  # the view gives the spec whole
    assert not any("scrub" in spec for spec in own)


def test_a_change_made_through_the_matches_view_reaches_its_row(tmp_path):
    """A tool (or a person with sqlite3) that sets a match's fields through ``matches`` changes the row."""
    run_dir = played(tmp_path / "run")
    db = sqlite3.connect(run_dir / "run.sqlite")
    try:
        key, spec = db.execute("SELECT key, spec FROM matches WHERE position = 0").fetchone()
        db.execute("UPDATE matches SET status = 'running', error = 'by hand' WHERE key = ?", (key,))
        assert db.execute("SELECT status, error, spec FROM matches WHERE key = ?", (key,)).fetchone() == (
            "running", "by hand", spec)  # the spec, not touched, is still whole
        edited = spec.replace('"scrub_material":false', '"scrub_material":true')
        db.execute("UPDATE matches SET spec = ? WHERE key = ?", (edited, key))
        assert db.execute("SELECT spec FROM matches WHERE key = ?", (key,)).fetchone()[0] == edited != spec
        db.commit()
    finally:
        db.close()


@pytest.mark.parametrize("body", [
    {"round": 1, "seat": "Player 1", "action": {"coins": 3}, "reply": '{"a": 1}, "x": 2'},
    {"game": "g", "seed": 2 ** 64 - 1, "seats": [{"label": "a\\\"b", "agent": ",\"k\":"}]},
    {"payoffs": {"a": 1}, "status": "finished"},
    {"round": 1},
    {"note": "a \\ back slash, \"quotes\", and ,\"commas\":"},
    {},
])
def test_an_event_cut_in_two_reads_back_byte_for_byte(tmp_path, body):
    key = "k"
    text = json.dumps({"match": key, "type": "t", **body}, separators=(",", ":"))
    head, tail = event_parts(key, "t", text)
    assert head + (tail or "") == event_rest(key, "t", text)
    store = RunStore.create_or_resume(tmp_path / "run", "cut", "{}", "cut")
    try:
        store.add_rows([("events", (key, 0, "t", text, 1.0))])
        store.flush()
        assert store.db.execute("SELECT body FROM events").fetchone()[0] == text
    finally:
        store.close()


def test_a_spec_cut_in_two_reads_back_byte_for_byte():
    for spec in ('{"key":"k","params":{"shuffle_seats":1},"seed":1,"shuffle_seats":true,"scrub":[]}',
                 '{"key":"k","seed":1}', '{"key":",\\"shuffle_seats\\":","shuffle_seats":false}'):
        own, shared = spec_parts(spec)
        assert own + (shared or "") == spec
