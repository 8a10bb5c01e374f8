"""Match identity: keys name the entry, case, repeat and seating by role, never an agent; who sat
where is data beside the key; every turn's events name the agent asked; runs stored before keys
changed keep their keys and seeds."""

from __future__ import annotations

import json
import shutil
import sqlite3
from pathlib import Path

import pytest

from arena.contract import open_run
from arena.contract import MatchIdentity, MatchSpec
from arena.contract.runs.schema import SCHEMA_VERSION
from arena.engine.match import JUDGE, play_match
from arena.run.scenario import load_scenario, parse_scenario
from arena.run.tournament import plan

from helpers import arena_offline, scripted

DATA = Path(__file__).parent / "data"
OLD_RUN = DATA / "format5_run"
OLD_SCENARIO = DATA / "format5_scenario.yaml"


def scripted_agents(*names, strategy="always_all"):
    return {name: {"backend": "scripted", "strategy": strategy} for name in names}


def test_a_key_is_made_and_read_back_whole():
    identity = MatchIdentity.seated("review", "q/1#x", 3, ["Contestant", "Judge", "Contestant"], [2, 0, 1])
    assert identity.key == "review/q/1#x#3:Contestant=2+1,Judge=0"
    assert MatchIdentity.parse(identity.key) == identity
    assert identity.places_in(["Contestant", "Judge", "Contestant"]) == (2, 0, 1)
    assert identity.role_places("Contestant") == (2, 1)
    plain = MatchIdentity.seated("pg", None, 1, ["Player"] * 3, [1, 2, 0])
    assert plain.key == "pg#1:Player=1+2+0" and MatchIdentity.parse(plain.key) == plain
    # a key of the older scheme (agents' names) reads back too, as what it was
    old = MatchIdentity.parse("pairwise_review/q1#2:x+y+j")
    assert (old.entry, old.case, old.repeat, old.names, old.seating) == ("pairwise_review", "q1", 2, ("x", "y", "j"), ())
    assert old.key == "pairwise_review/q1#2:x+y+j"


@pytest.mark.parametrize("text", ["", "pg", "pg#x:Player=0", "#1:Player=0", "pg#1:", "pg#1:Player=0+a", "pg#0:Player=0"])
def test_text_that_is_no_key_is_refused_with_a_sentence(text):
    with pytest.raises(ValueError, match="is not a match key"):
        MatchIdentity.parse(text)


def test_a_role_that_cannot_be_written_in_a_key_is_refused():
    with pytest.raises(ValueError, match="cannot be named in a match key"):
        MatchIdentity.seated("pg", None, 1, ["A=B", "C"], [0, 1])


def test_keys_and_seeds_do_not_change_when_agents_are_renamed():
    games = [{"game": "public_goods", "seats": 3}]
    tournament = {"format": "round_robin", "repeats": 2}
    first = plan(parse_scenario({"name": "t", "seed": 3, "agents": scripted_agents("a", "b", "c", "d"),
                                 "games": games, "tournament": tournament}))
    renamed = plan(parse_scenario({"name": "t", "seed": 3, "agents": scripted_agents("w", "x", "y", "z"),
                                   "games": games, "tournament": tournament}))
    assert [m.key for m in first] == [m.key for m in renamed]
    assert [m.seed for m in first] == [m.seed for m in renamed]
    assert first[0].key == "public_goods#1:Player=0+1+2" and first[0].agents == ("a", "b", "c")
    assert renamed[0].agents == ("w", "x", "y")
    assert first[4].identity == MatchIdentity(entry="public_goods", repeat=2, seating=(("Player", (1, 2, 0)),))
    # seats rotate with the repeat: the key says who sits first
    assert first[4].key == "public_goods#2:Player=1+2+0" and first[4].agents == ("b", "c", "a")
    assert len({m.key for m in first}) == len(first)


def test_the_orders_of_a_role_swap_have_their_own_keys_and_share_one_seed():
    agents = {"s": {"backend": "scripted", "strategy": "idiom_player"},
              "p": {"backend": "scripted", "strategy": "idiom_player"}}
    specs = plan(parse_scenario({"name": "t", "agents": agents, "games": [{"game": "idiom_solitaire"}]}))
    assert [(m.key, m.agents) for m in specs] == [("idiom_solitaire#1:Early=0,Late=1", ("s", "p")),
                                                  ("idiom_solitaire#1:Early=1,Late=0", ("p", "s"))]
    assert specs[0].seed == specs[1].seed


def test_another_judge_at_the_table_leaves_every_key_and_the_contestants_findable(tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text('{"id": "q1", "question": "How do I boil an egg?"}\n{"id": 2, "question": "Why?"}\n')
    agents = scripted_agents("x", "y", "judge_a", "judge_b", strategy="always_all")

    def planned(judge):
        return plan(parse_scenario({
            "name": "pr", "seed": 1, "agents": agents, "tournament": {"role_swap": True},
            "games": [{"game": "pairwise_review", "agents": ["x", "y", judge], "params": {"questions": str(questions)}}]}))

    by_a, by_b = planned("judge_a"), planned("judge_b")
    assert [m.key for m in by_a] == [m.key for m in by_b] == [
        "pairwise_review/q1#1:Contestant=0+1,Judge=2", "pairwise_review/q1#1:Contestant=1+0,Judge=2",
        "pairwise_review/2#1:Contestant=0+1,Judge=2", "pairwise_review/2#1:Contestant=1+0,Judge=2"]
    assert [m.seed for m in by_a] == [m.seed for m in by_b]
    # what a rescore asks: these contestants' answers to this case, whoever judged them
    for a, b in zip(by_a, by_b):
        identity = MatchIdentity.parse(a.key)
        roles = ["Contestant", "Contestant", "Judge"]
        contestants = [a.agents[i] for i, role in enumerate(roles) if role == "Contestant"]
        assert contestants == [b.agents[i] for i, role in enumerate(roles) if role == "Contestant"]
        assert {a.agents[-1], b.agents[-1]} == {"judge_a", "judge_b"}
        assert identity.role_places("Contestant") in ((0, 1), (1, 0)) and identity.case in ("q1", "2")


def test_an_entry_named_with_a_slash_is_refused_before_it_makes_keys():
    from arena.contract import ConfigError
    with pytest.raises(ConfigError, match="holds a '/'"):
        parse_scenario({"name": "t", "agents": scripted_agents("a", "b"),
                        "games": [{"game": "public_goods", "label": "pg/1"}]})


VERDICT = '{"Translator": {"score": 7}, "Proofreader": {"score": 4}}'
TEXT = {"id": "t1", "source_lang": "de", "target_lang": "en", "source": "Guten Morgen.", "reference": "Good morning."}


def texts_file(folder: Path) -> Path:
    path = folder / "texts.jsonl"
    path.write_text(json.dumps(TEXT) + "\n")
    return path


async def test_every_turn_names_its_agent_and_a_referees_judges_are_told_apart(tmp_path):
    agents = {"writer": scripted("writer", "fixed", params={"replies": ["Good morning."]}),
              "editor": scripted("editor", "fixed", params={"replies": ["Good morning!"]}),
              "judge_a": scripted("judge_a", "fixed", params={"replies": [VERDICT]}),
              "judge_b": scripted("judge_b", "fixed", params={"replies": ["no verdict here"]})}
    spec = MatchSpec(key="tr/t1#1:Translator=0,Proofreader=1", game="translation",
                     params={"texts": str(texts_file(tmp_path)), "case": "t1"}, agents=("writer", "editor"),
                     seed=1, shuffle_seats=False,
                     referees=({"use": "llm_judge", "params": {"agent": "judge_a", "metric": "a"}},
                               {"use": "llm_judge", "params": {"agent": "judge_b", "metric": "b"}}))
    record = await play_match(spec, agents)
    assert record.status == "finished", record.error
    taken = [(e.seat, e.agent, e.defaulted) for e in record.events if e.type == "action"]
    assert taken == [("Translator", "writer", False), ("Proofreader", "editor", False), (JUDGE, "judge_a", False),
                     (JUDGE, "judge_b", True)]
    failed = [(e.seat, e.agent, e.attempt) for e in record.events if e.type == "turn_failed"]
    assert failed == [(JUDGE, "judge_b", 1), (JUDGE, "judge_b", 2), (JUDGE, "judge_b", 3)]
    assert record.metrics["a"] == {"Translator": 7.0, "Proofreader": 4.0}


def test_arena_show_names_the_judge_a_referee_asked(tmp_path):
    texts_file(tmp_path)
    scenario = tmp_path / "judged.yaml"
    scenario.write_text(f"""
name: judged
seed: 2
agents:
  writer: {{backend: scripted, strategy: fixed, params: {{replies: [Good morning.]}}}}
  editor: {{backend: scripted, strategy: fixed, params: {{replies: [Good morning!]}}}}
  judge_a: {{backend: scripted, strategy: fixed, params: {{replies: ['{VERDICT}']}}}}
  judge_b: {{backend: scripted, strategy: fixed, params: {{replies: [no verdict]}}}}
games:
  - game: translation
    label: tr
    agents: [writer, editor]
    params: {{texts: texts.jsonl}}
    referee: [{{use: llm_judge, agent: judge_a, metric: a}}, {{use: llm_judge, agent: judge_b, metric: b}}]
tournament: {{role_swap: false}}
""")
    run_dir = tmp_path / "run"
    done = arena_offline("run", scenario, "--run-dir", run_dir, "--plain", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    key = "tr/t1#1:Translator=0,Proofreader=1"
    shown = arena_offline("show", run_dir, "--match", key, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert f"→ {JUDGE} (judge_a) action:" in shown.stdout
    assert f"→ {JUDGE} (judge_b) action:" in shown.stdout
    assert f"✗ {JUDGE} (judge_b) attempt 1: invalid" in shown.stdout
    assert "→ Translator action:" in shown.stdout  # a seat's agent is listed with the seats, once


# -- a run stored before format 6 ------------------------------------------------------------

def old_run(tmp_path) -> Path:
    copy = tmp_path / "format5_run"
    shutil.copytree(OLD_RUN, copy)
    shutil.copy(OLD_SCENARIO, tmp_path / "format5_scenario.yaml")
    return copy


def stored_matches(run_dir):
    db = sqlite3.connect(f"{(run_dir / 'run.sqlite').as_uri()}?mode=ro", uri=True)
    try:
        return {key: (status, json.loads(spec)["seed"]) for key, status, spec in
                db.execute("SELECT key, status, spec FROM matches")}
    finally:
        db.close()


def event_rows(run_dir, key):
    db = sqlite3.connect(f"{(run_dir / 'run.sqlite').as_uri()}?mode=ro", uri=True)
    try:
        return db.execute("SELECT seq, type, body FROM events WHERE match_key = ? ORDER BY seq", (key,)).fetchall()
    finally:
        db.close()


def load_scenario_plan():
    return plan(load_scenario(OLD_SCENARIO))


def test_the_old_fixture_is_what_it_says():
    db = sqlite3.connect(f"{(OLD_RUN / 'run.sqlite').as_uri()}?mode=ro", uri=True)
    try:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 5
        keys = [k for (k,) in db.execute("SELECT key FROM matches")]
    finally:
        db.close()
    assert keys and all("=" not in k for k in keys)  # keys naming agents
    # planned under the older scheme, today's plan gives the very keys and seeds that version stored
    stored = stored_matches(OLD_RUN)
    legacy = {m.key: m.seed for m in plan(load_scenario(OLD_SCENARIO), "agents")}
    assert {k: seed for k, (_, seed) in stored.items()} == {k: legacy[k] for k in stored}
    assert len(legacy) == len(load_scenario_plan()) > len(stored)


def test_a_run_stored_before_format_6_opens_shows_and_ranks(tmp_path):
    run_dir = old_run(tmp_path)
    before = stored_matches(run_dir)
    finished = sorted(k for k, (status, _) in before.items() if status == "finished")
    store = open_run(run_dir)
    try:
        assert store.key_scheme() == "agents"
        assert sorted(store.finished_keys()) == finished
    finally:
        store.close()
    key = next(k for k in finished if k.startswith("public_goods#"))
    shown = arena_offline("show", run_dir, "--match", key, cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert key in shown.stdout and "payoffs:" in shown.stdout
    summary = arena_offline("show", run_dir, cwd=tmp_path)
    assert summary.returncode == 0, summary.stderr
    ranked = arena_offline("rank", run_dir, "--json", cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    assert {"giver", "taker", "mirror"} <= set(ranked.stdout.split('"')), ranked.stdout
    assert stored_matches(run_dir) == before  # reading wrote nothing


def test_a_run_stored_before_format_6_resumes_with_its_keys_and_seeds(tmp_path):
    run_dir = old_run(tmp_path)
    before = stored_matches(run_dir)
    kept = {k for k, (status, _) in before.items() if status == "finished"}
    assert kept and len(kept) < len(load_scenario_plan())  # the fixture left matches to play
    events_before = {k: event_rows(run_dir, k) for k in kept}
    done = arena_offline("run", tmp_path / "format5_scenario.yaml", "--run-dir", run_dir, "--plain", cwd=tmp_path)
    assert done.returncode == 0, done.stderr + done.stdout
    after = stored_matches(run_dir)
    assert all(status == "finished" for status, _ in after.values())
    assert all("=" not in key for key in after)  # still the old scheme: nothing re-keyed
    assert {k: after[k] for k in before} == {k: ("finished", seed) for k, (_, seed) in before.items()}
    assert {k: event_rows(run_dir, k) for k in kept} == events_before  # nothing kept was played again
    store = open_run(run_dir)
    try:
        assert store.key_scheme() == "agents"
        assert store.db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    finally:
        store.close()
    # the same scenario in a fresh folder plans the same matches under keys of the new scheme
    fresh = plan(load_scenario(OLD_SCENARIO))
    assert len(fresh) == len(after) and all("=" in m.key for m in fresh)
