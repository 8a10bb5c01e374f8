"""The contract reads finished runs (issue 36.1): a plugin that imports only ``arena.contract`` opens a
run folder with ``open_run`` and reads its scenario, its matches with their seats and agents, every
message with its round and recipients, the model calls, the outcomes and the reviews, streamed, and
without changing a byte of the folder. A folder that holds no run, a damaged store and a store of a
newer format are refused with a sentence.

The run is played by `arena run`, as a user plays it: a public goods table with one model seat on
the local OpenAI mock (so that the run has calls), and a peer review among synthetic judges (so
that it has reviews).
"""

from __future__ import annotations

import ast
import importlib.util
import json
import re
import sqlite3
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no key, no proxy)
from mock_llm import OpenAIMock, body_text
from store_kit import cli, copy_run, damage, snapshot

QUESTIONS = {"q1": "How do the tides work?", "q2": "Why do cats purr?"}

# What a plugin of a separate package writes to read a run: it imports the contract and nothing else.
PLUGIN = textwrap.dedent('''
    from arena.contract import open_run


    def read(run_dir):
        with open_run(run_dir) as run:
            matches = list(run.matches())
            return {
                "scenario": run.scenario(),
                "name": run.run_info()["name"],
                "matches": [(m.key, m.game, m.status, [(s.label, s.role, s.agent) for s in m.seats], m.payoffs)
                            for m in matches],
                "messages": [(key, m.seq, m.round, m.sender, m.recipients, m.kind, m.content)
                             for key, m in run.messages()],
                "calls": [(c.match, c.seat, c.round, c.agent, c.model, c.prompt_tokens) for c in run.calls()],
                "reviews": [(r.match, r.question, r.a, r.b, r.reviewer, r.score) for r in run.review_rows()],
                "records": {r.key: r for r in run.records()},
            }
''')


def contributor(body) -> dict:
    """The model seat gives its round number in coins, so each call is known by what it answered."""
    text = body_text(body)
    round_ = int(re.findall(r"Round (\d+) of \d+: you receive", text)[-1])
    return {"reason": f"round {round_}", "coins": round_}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """(run folder, scenario file, the requests the mock answered, the plugin's module)."""
    from arena.cli.commands import main

    home = tmp_path_factory.mktemp("reader")
    questions = home / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": q, "question": t}) + "\n" for q, t in QUESTIONS.items()),
                         encoding="utf-8")
    judge = {"backend": "scripted", "strategy": "synthetic_judge"}
    with OpenAIMock(responder=contributor) as mock:
        raw = {
            "name": "reader", "seed": 7,
            "agents": {"ann": {"backend": "openai", "base_url": mock.base_url, "model": "mock-model", "timeout": 120,
                               "retries": 0},
                       "give": {"backend": "scripted", "strategy": "always_all"},
                       "keep": {"backend": "scripted", "strategy": "free_rider"},
                       "sage": {**judge, "params": {"name": "sage", "quality": 0.9, "skill": 0.05}},
                       "novice": {**judge, "params": {"name": "novice", "quality": 0.3, "skill": 0.2}}},
            "games": [{"game": "public_goods", "agents": ["ann", "give", "keep"], "params": {"rounds": 2}},
                      {"game": "pairwise_review", "agents": ["sage", "novice"],
                       "params": {"questions": str(questions), "contestants": 2, "peer": True, "output": "scores",
                                  "samples": 1, "swap": True}}],
            "tournament": {"role_swap": False},
            "match": {"turn_timeout": 600, "max_retries": 0},
        }
        scenario = home / "reader.yaml"
        scenario.write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert main(["run", str(scenario), "--quiet", "--run-dir", str(home / "run")]) == 0
        requests = mock.answered()
    plugin_file = home / "reader_plugin.py"
    plugin_file.write_text(PLUGIN, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("reader_plugin", plugin_file)
    plugin = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plugin)
    return home / "run", scenario, requests, plugin


def test_the_plugin_imports_only_the_contract():
    imported = {alias.name if isinstance(node, ast.Import) else node.module
                for node in ast.walk(ast.parse(PLUGIN)) if isinstance(node, (ast.Import, ast.ImportFrom))
                for alias in node.names}
    assert imported == {"arena.contract"}


def test_a_plugin_reads_the_scenario_and_the_matches_with_their_seats(finished_run):
    run_dir, scenario, _, plugin = finished_run
    found = plugin.read(run_dir)
    assert found["scenario"] == scenario.read_text(encoding="utf-8") and found["name"] == "reader"
    games = [game for _, game, _, _, _ in found["matches"]]
    assert games.count("public_goods") == 1 and games.count("pairwise_review") >= 1
    assert {status for _, _, status, _, _ in found["matches"]} == {"finished"}
    (goods,) = [m for m in found["matches"] if m[1] == "public_goods"]
    seats = goods[3]
    assert sorted(agent for _, _, agent in seats) == ["ann", "give", "keep"]
    assert set(goods[4]) == {label for label, _, _ in seats}, "every seat has its payoff"
    for _, game, _, seats, _ in found["matches"]:
        if game == "pairwise_review":
            assert {agent for _, _, agent in seats} <= {"sage", "novice"}


def test_a_plugin_reads_every_message_in_order_with_its_round_and_recipients(finished_run):
    run_dir, _, _, plugin = finished_run
    found = plugin.read(run_dir)
    keys = [key for key, *_ in found["matches"]]
    by_match: dict[str, list] = {}
    for key, *message in found["messages"]:
        by_match.setdefault(key, []).append(message)
    assert list(by_match) == [k for k in keys if k in by_match], "matches come in the plan's order"
    for key, messages in by_match.items():
        record = found["records"][key]
        assert [m[0] for m in messages] == sorted(m[0] for m in messages), "each match's in the order posted"
        # the stream holds exactly the record's messages, each with its round and audience
        assert [(rnd, sender, recipients, kind, content) for _, rnd, sender, recipients, kind, content in messages] == \
               [(m.round, m.sender, m.recipients, m.kind, m.content) for m in record.messages]
    (goods,) = [m for m in found["matches"] if m[1] == "public_goods"]
    labels = {label for label, _, _ in goods[3]}
    goods_messages = by_match[goods[0]]
    assert {rnd for _, rnd, *_ in goods_messages} >= {1, 2}, "both rounds are there"
    ann = next(label for label, _, agent in goods[3] if agent == "ann")
    replies = [(rnd, content) for _, rnd, sender, _, kind, content in goods_messages if sender == ann and kind == "reply"]
    assert [(rnd, json.loads(content)["coins"]) for rnd, content in replies] == [(1, 1), (2, 2)]
    # mode 1: the referee speaks to each seat alone, and no seat hears another's reply
    assert [(rnd, recipients) for _, rnd, sender, recipients, kind, _ in goods_messages if kind == "rules"] == \
           [(0, (label,)) for label in sorted(labels)]
    for _, _, sender, recipients, kind, _ in goods_messages:
        assert recipients == () if kind == "reply" else (sender == "Referee" and len(recipients) == 1)


def test_a_plugin_reads_the_calls_the_model_seat_made(finished_run):
    run_dir, _, requests, plugin = finished_run
    found = plugin.read(run_dir)
    (goods,) = [m for m in found["matches"] if m[1] == "public_goods"]
    ann = next(label for label, _, agent in goods[3] if agent == "ann")
    assert [(match, seat, rnd, agent, model) for match, seat, rnd, agent, model, _ in found["calls"]] == \
           [(goods[0], ann, 1, "ann", "mock-model"), (goods[0], ann, 2, "ann", "mock-model")]
    assert len(requests) == 2 and all(tokens is not None for *_, tokens in found["calls"])


def test_a_plugin_reads_the_outcomes_and_the_reviews(finished_run):
    run_dir, _, _, plugin = finished_run
    found = plugin.read(run_dir)
    reviews = found["reviews"]
    judged = [m for m in found["matches"] if m[1] == "pairwise_review"]
    assert reviews and {match for match, *_ in reviews} == {key for key, *_ in judged}
    assert {question for _, question, *_ in reviews} == set(QUESTIONS)
    assert {reviewer for *_, reviewer, _ in reviews} <= {"sage", "novice"}
    assert {score for *_, score in reviews} <= {-1, 0, 1}
    for key, _, _, _, payoffs in found["matches"]:
        record = found["records"][key]
        assert record.payoffs == payoffs and record.status == "finished"
        assert [(r.question, r.a, r.b, r.reviewer, r.score) for r in record.reviews] == \
               [review[1:] for review in reviews if review[0] == key]


def test_the_readers_stream(finished_run):
    from arena.contract import open_run

    with open_run(finished_run[0]) as run:
        for stream in (run.matches(), run.messages(), run.calls(), run.records(), run.scores(), run.final_notices(("reviewers",)),
                       run.transcript_rows()):
            assert isinstance(stream, Iterator) and not isinstance(stream, (list, tuple))
        first_key, first = next(run.messages())  # one message, without the run's others
        assert first.index == 0 and first.kind == "rules" and first_key == next(run.matches()).key


def test_reading_leaves_the_run_folder_exactly_as_it_was(finished_run, tmp_path):
    run_dir = copy_run(finished_run[0], tmp_path / "run")
    before = snapshot(run_dir)
    finished_run[3].read(run_dir)
    finished_run[3].read(run_dir / "run.sqlite")  # the store file itself is read the same
    assert snapshot(run_dir) == before, "no byte changed, no time touched, no -wal or -shm made"
    assert not (run_dir / "run.sqlite-wal").exists()


def test_a_folder_that_holds_no_run_is_refused_in_a_sentence(tmp_path, finished_run):
    from arena.contract import NotAFolder, StoreError, open_run

    with pytest.raises(StoreError, match=r"is not a run directory \(no run.sqlite in it\)"):
        open_run(tmp_path)
    with pytest.raises(NotAFolder, match="is a file, not a folder"):
        open_run(finished_run[1])
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("kind", ["truncated", "garbage header", "all garbage"])
def test_a_damaged_store_is_refused_in_a_sentence_and_left_as_it_was(finished_run, tmp_path, kind):
    from arena.contract import DamagedStore, open_run

    run_dir = copy_run(finished_run[0], tmp_path / "run")
    damaged = damage(run_dir / "run.sqlite", kind)
    with pytest.raises(DamagedStore, match=r"is damaged \(.*\) and cannot be read"):
        with open_run(run_dir) as run:
            list(run.matches())
    assert (run_dir / "run.sqlite").read_bytes() == damaged


def test_a_store_of_a_newer_format_is_refused_in_a_sentence(finished_run, tmp_path):
    from arena.contract import OtherFormat, open_run
    from arena.contract.runs.schema import SCHEMA_VERSION

    run_dir = copy_run(finished_run[0], tmp_path / "run")
    db = sqlite3.connect(run_dir / "run.sqlite")
    db.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    db.close()
    before = snapshot(run_dir)
    with pytest.raises(OtherFormat, match=rf"store format {SCHEMA_VERSION + 1}, this one reads {SCHEMA_VERSION}"):
        open_run(run_dir)
    assert snapshot(run_dir) == before


def test_the_writer_makes_its_tables_from_the_contracts_schema():
    """One description of the store: the writer's tables are the contract's."""
    from arena.contract.runs import schema
    from arena.store import writer

    assert writer.SCHEMA is schema.SCHEMA and writer.SCHEMA_VERSION == schema.SCHEMA_VERSION
    assert Path(writer.__file__).read_text(encoding="utf-8").count("CREATE TABLE") == 0


def test_a_match_looked_up_by_key_costs_the_same_in_a_run_four_times_as_large(tmp_path, capsys):
    """A resume looks up every finished match by its key: a lookup that read the whole run's outcomes
    (as a LEFT JOIN with the outcomes view did, store format 9) makes a resume grow with the square
    of the run. Counted in SQLite's steps, which do not depend on the machine's load."""
    from arena.contract import open_run

    raw = yaml.safe_load((Path(__file__).resolve().parent.parent / "scenarios" / "quickstart.yaml").read_text("utf-8"))
    steps = {}
    for repeats in (1, 4):
        raw["tournament"]["repeats"] = repeats
        scenario = tmp_path / f"r{repeats}.yaml"
        scenario.write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert cli(capsys, "run", scenario, "--quiet", "--run-dir", tmp_path / f"r{repeats}")[0] == 0
        with open_run(tmp_path / f"r{repeats}") as run:
            everything = list(run.matches())
            assert len(everything) == 30 * repeats
            counted = [0]
            run.db.set_progress_handler(lambda: counted.__setitem__(0, counted[0] + 1), 10)
            for wanted in (everything[0], everything[-1]):
                assert run.match(wanted.key) == wanted and wanted.payoffs  # the same row, payoffs and all
            run.db.set_progress_handler(None, 0)
            steps[repeats] = counted[0]
    assert steps[4] < steps[1] * 1.5, steps
