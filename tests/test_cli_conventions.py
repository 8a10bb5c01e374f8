"""What scripts rely on in the `arena` command: --json documents carrying the numbers the tables show,
--plain tab-separated tables, full-width output when piped, a quiet end on a closed pipe, and the
smoke-test path (--limit N, --set KEY=VALUE). Every command runs as a subprocess in tmp_path."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import ROOT

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"
SMALL = ("--set", "repeats=1", "--set", "game.params.rounds=2")  # 30 matches of 2 rounds instead of 120 of 5
BOX = set("│┃┏┓┗┛━─┼╇┡┩└┘┬┴")


def arena(*args, cwd, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300, **kwargs)


def tsv(text: str) -> list[list[str]]:
    return [line.split("\t") for line in text.splitlines()]


@pytest.fixture(scope="module")
def limited(tmp_path_factory):
    """A run of the small quickstart cut at --limit 3: 3 of its 30 matches played."""
    cwd = tmp_path_factory.mktemp("limited")
    result = arena("run", QUICKSTART, *SMALL, "--limit", "3", "--quiet", cwd=cwd)
    assert result.returncode == 0, result.stderr
    return cwd, cwd / "runs" / "quickstart"


# -- --json -------------------------------------------------------------------------------
def test_runs_json_and_plain_carry_the_table_s_values(limited):
    cwd, run_dir = limited
    document = json.loads(arena("runs", "--json", cwd=cwd).stdout)
    assert document == [{
        "run_dir": "runs/quickstart", "name": "quickstart", "status": "stopped by --limit 3", "finished": 3,
        "failed": 0, "interrupted": 0, "truncated": 0, "planned": 30, "updated": document[0]["updated"],
        "readable": True, "rescored_from": None,
    }]
    plain = arena("runs", "--plain", cwd=cwd).stdout
    assert not BOX & set(plain)
    header, *rows = tsv(plain)
    assert header == ["Run directory", "Scenario", "Status", "Finished", "Failed", "Planned", "Updated"]
    assert rows == [["runs/quickstart", "quickstart", "stopped by --limit 3", "3", "0", "30",
                     document[0]["updated"].replace("T", " ")[:19]]]
    table = arena("runs", cwd=cwd).stdout
    assert "stopped by --limit 3" in table and "│ 30 " in table.replace("┃", "│")


def test_show_json_matches_the_export_and_the_table(limited):
    cwd, run_dir = limited
    document = json.loads(arena("show", run_dir, "--json", cwd=cwd).stdout)
    exported = [json.loads(line) for line in arena("export", run_dir, cwd=cwd).stdout.splitlines()]
    assert [m["key"] for m in document["matches"]] == [r["key"] for r in exported]
    assert len(document["matches"]) == 3
    for match, record in zip(document["matches"], exported):
        assert match["payoffs"] == record["payoffs"] and match["status"] == "finished"
        assert [s["agent"] for s in match["seats"]] == [s["agent"] for s in record["seats"]]
    plain = arena("show", run_dir, "--plain", cwd=cwd).stdout
    assert not BOX & set(plain)
    header, *rows = tsv(plain)  # strict below: every line has the header's four fields
    assert header == ["Key", "Status", "Seats", "Payoffs"]
    for row, match in zip(rows, document["matches"], strict=True):
        assert len(row) == 4 and row[0] == match["key"] and row[1] == match["status"]
        shown = dict(item.split(": ") for item in row[3].split(", "))
        assert {seat: float(v) for seat, v in shown.items()} == match["payoffs"]
    one = json.loads(arena("show", run_dir, "--match", exported[1]["key"], "--json", cwd=cwd).stdout)
    assert one == exported[1]


def test_validate_json_says_what_the_text_says(tmp_path):
    text = arena("validate", QUICKSTART, cwd=tmp_path).stdout
    document = json.loads(arena("validate", QUICKSTART, "--json", cwd=tmp_path).stdout)
    assert document["ok"] is True
    assert f"{document['agents']} agents, {document['game_entries']} game entries, {document['matches']} matches" in text
    assert document["matches"] == 120
    small = json.loads(arena("validate", QUICKSTART, *SMALL, "--limit", "4", "--json", cwd=tmp_path).stdout)
    assert (small["matches"], small["overrides"], small["limit"]) == (4, ["repeats=1", "game.params.rounds=2"], 4)
    bad = arena("validate", QUICKSTART, "--set", "tournament.repeatz=1", "--json", cwd=tmp_path)
    assert bad.returncode == 2
    problems = json.loads(bad.stdout)
    assert problems["ok"] is False
    assert [p["field"] for p in problems["problems"]] == ["tournament.repeatz"]
    assert "--set tournament.repeatz=1" in problems["problems"][0]["message"]


def test_run_json_is_the_only_thing_on_stdout_and_equals_rank(tmp_path):
    result = arena("run", QUICKSTART, *SMALL, "--limit", "4", "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    document = json.loads(result.stdout)  # one document, nothing around it
    assert document["session"] == {
        "played": 4, "finished": 4, "failed": [], "interrupted": [], "not_started": [], "resumed": 0,
        "beyond_limit": 26, "limit": 4, "overrides": ["repeats=1", "game.params.rounds=2"], "stopped": "limit",
        "exit_status": 0,
    }
    assert document["run"]["run_dir"] == "runs/quickstart" and document["run"]["finished"] == 4
    assert "4 of 4 matches finished" in result.stderr and "r1 Player" in result.stderr  # the live log went there
    ranked = json.loads(arena("rank", "runs/quickstart", "--json", cwd=tmp_path).stdout)
    assert document["payoffs"] == ranked["payoffs"] and document["usage"] == ranked["usage"]
    assert sum(p["matches"] for p in document["payoffs"]) == 4 * 4  # four seats in each of 4 matches


# -- tables for pipes ---------------------------------------------------------------------
def test_a_wide_value_is_not_cut_when_piped(tmp_path):
    wide = "w" * 200
    result = arena("run", QUICKSTART, *SMALL, "--limit", "1", "--quiet", "--run-dir", f"runs/{wide}", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = [line for line in arena("runs", cwd=tmp_path).stdout.splitlines() if wide in line]
    assert len(rows) == 1 and f"runs/{wide}" in rows[0] and "stopped by --limit 1" in rows[0]  # one line, whole


def test_plain_tables_split_into_the_header_s_columns(limited):
    cwd, run_dir = limited
    # several tables: each block's rows have its header's width; titles and notes are '# ' lines
    out = arena("games", "--plain", cwd=cwd).stdout
    blocks = [b.splitlines() for b in out.strip().split("\n\n")]
    assert len(blocks) >= 2 and not BOX & set(out)
    for block in blocks:
        assert block[0].startswith("# ") and block[1].split("\t") == ["Parameter", "Type", "Default", "Meaning"]
        assert all(len(r.split("\t")) == 4 for r in block[1:])
    ranked = arena("rank", run_dir, "--plain", cwd=cwd).stdout
    assert not BOX & set(ranked)
    mean = json.loads(arena("rank", run_dir, "--json", cwd=cwd).stdout)["payoffs"][0]
    first = [r.split("\t") for r in ranked.split("\n\n")[0].splitlines() if not r.startswith("# ")]
    cells = dict(zip(first[0], next(r for r in first[1:] if r[0] == mean["agent"])))
    assert float(cells["Mean"]) == pytest.approx(mean["mean"], abs=0.006) and int(cells["Matches"]) == mean["matches"]


# -- a closed pipe ------------------------------------------------------------------------
def test_a_reader_that_went_away_gets_no_traceback(limited):
    cwd, run_dir = limited
    for args in (("runs",), ("show", run_dir, "--json")):
        read, write = os.pipe()
        os.close(read)  # nobody will read: the first write fails, whatever the size of the output
        try:
            result = subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, stdout=write,
                                    stderr=subprocess.PIPE, text=True, timeout=120)
        finally:
            os.close(write)
        assert result.returncode == 0 and result.stderr == "", (args, result.stderr)


def test_a_run_whose_reader_went_away_plays_on(tmp_path):
    """The live log of `arena run | head` is nobody's reason to stop playing, and never a failed match."""
    read, write = os.pipe()
    os.close(read)
    try:
        result = subprocess.run([sys.executable, "-m", "arena.cli", "run", str(QUICKSTART), *SMALL, "--limit", "3",
                                 "--plain"], cwd=tmp_path, stdout=write, stderr=subprocess.PIPE, text=True, timeout=300)
    finally:
        os.close(write)
    assert result.returncode == 0 and result.stderr == ""
    [row] = json.loads(arena("runs", "--json", cwd=tmp_path).stdout)
    assert (row["finished"], row["failed"], row["status"]) == (3, 0, "stopped by --limit 3")


def test_head_of_a_long_listing_ends_quietly(limited):
    """`arena export RUN | head -1`: the output is far bigger than a pipe holds, so the writer is still
    writing when the reader closes its end."""
    cwd, run_dir = limited
    process = subprocess.Popen([sys.executable, "-m", "arena.cli", "export", str(run_dir)], cwd=cwd,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = process.stdout.readline()
    process.stdout.close()
    stderr = process.stderr.read().decode()
    assert process.wait(timeout=120) == 0 and stderr == ""
    assert json.loads(first)["status"] == "finished"


# -- the smoke-test path ------------------------------------------------------------------
def test_limit_plays_the_first_matches_and_a_run_without_it_plays_the_rest(tmp_path):
    first = arena("run", QUICKSTART, *SMALL, "--limit", "2", "--json", cwd=tmp_path)
    assert first.returncode == 0, first.stderr
    assert json.loads(first.stdout)["session"]["played"] == 2
    assert "28 more matches are planned" in first.stderr
    limited_keys = [json.loads(line)["key"] for line in arena("export", "runs/quickstart", cwd=tmp_path).stdout.splitlines()]
    assert len(limited_keys) == 2

    rest = arena("run", QUICKSTART, *SMALL, "--json", cwd=tmp_path)
    assert rest.returncode == 0, rest.stderr
    grown = json.loads(rest.stdout)
    session = grown["session"]
    assert (session["played"], session["resumed"], session["stopped"]) == (28, 2, None)
    assert grown["run"]["status"] == "finished" and grown["run"]["planned"] == 30

    whole = arena("run", QUICKSTART, *SMALL, "--json", "--run-dir", "whole", cwd=tmp_path)
    assert whole.returncode == 0, whole.stderr
    assert grown["payoffs"] == json.loads(whole.stdout)["payoffs"]
    export = lambda run: [json.loads(line) for line in arena("export", run, cwd=tmp_path).stdout.splitlines()]  # noqa: E731
    grown_records, unlimited = export("runs/quickstart"), export("whole")
    assert [r["key"] for r in unlimited][:2] == limited_keys  # the first two of the plan, not any two
    assert [(r["key"], r["payoffs"]) for r in grown_records] == [(r["key"], r["payoffs"]) for r in unlimited]


def test_set_overrides_show_in_the_run(tmp_path):
    result = arena("run", QUICKSTART, "--set", "repeats=1", "--set", "games[1].params.rounds=3",
                   "--set", "agents.dice.strategy=always_all", "--quiet", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    records = [json.loads(line) for line in arena("export", "runs/quickstart", cwd=tmp_path).stdout.splitlines()]
    assert len(records) == 30  # one repeat of 15 tables, two entries
    assert {r["group"]: r["rounds"] for r in records} == {"public_goods_mode1": 5, "public_goods_mode2": 3}
    shown = json.loads(arena("show", "runs/quickstart", "--json", cwd=tmp_path).stdout)
    assert shown["run"]["sessions"][0]["overrides"] == ["repeats=1", "games[1].params.rounds=3",
                                                       "agents.dice.strategy=always_all"]
    assert shown["run"]["sessions"][0]["limit"] is None
    table = arena("show", "runs/quickstart", cwd=tmp_path).stdout
    assert "--set repeats=1 --set games[1].params.rounds=3 --set agents.dice.strategy=always_all" in table
    # the file without the overrides is another scenario: refused, and the message says what the run had
    again = arena("run", QUICKSTART, "--quiet", cwd=tmp_path)
    assert again.returncode == 2 and "--set repeats=1" in again.stderr


@pytest.mark.parametrize("setting, named", [
    ("tournament.repeatz=1", "tournament.repeatz"),
    ("games[5].params.rounds=1", "games[5]"),
    ("game.params.roundz=2", "games[0].params.roundz"),
    ("seed", "--set seed"),
    ("concurrency.matches=2", "--set concurrency=VALUE replaces it whole"),  # the file says `concurrency: 8`
])
def test_a_bad_set_is_a_clear_error_and_starts_nothing(tmp_path, setting, named):
    result = arena("run", QUICKSTART, "--set", setting, "--quiet", cwd=tmp_path)
    assert result.returncode == 2
    assert named in result.stderr and "--set" in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "runs").exists()


def test_help_documents_the_json_keys(tmp_path):
    assert "run_dir, name, status, finished" in " ".join(arena("runs", "--help", cwd=tmp_path).stdout.split())
    run_help = " ".join(arena("run", "--help", cwd=tmp_path).stdout.split())
    assert "--limit N" in run_help and "--set KEY=VALUE" in run_help and "session" in run_help


# -- how --set reads its keys and values (in process: no command to start) ------------------
def test_set_values_are_yaml_and_shorthands_reach_every_place(tmp_path):
    from arena.run.overrides import parse_overrides
    from arena.run.scenario import load_scenario

    path = tmp_path / "s.yaml"
    path.write_text(QUICKSTART.read_text(encoding="utf-8").replace(
        "    seats: 4\n  - game: public_goods\n    label: public_goods_mode2",
        "    seats: 4\n    tournament: {format: round_robin, repeats: 7}\n  - game: public_goods\n    label: public_goods_mode2"),
        encoding="utf-8")
    scenario = load_scenario(path, parse_overrides([
        "repeats=2", "games.public_goods_mode2.params.alpha=2.5", "game.params.endowment=20",
        "description='3'", "anonymity.vendors=false",
    ]))
    first, second = scenario.games
    assert first.tournament.repeats == 2 and scenario.tournament.repeats == 2  # the entry's own block too
    assert (first.params["alpha"], second.params["alpha"]) == (1.5, 2.5)
    assert first.params["endowment"] == second.params["endowment"] == 20
    assert scenario.description == "3" and scenario.anonymity.vendors is False
    untouched = load_scenario(path)
    assert untouched.games[0].tournament.repeats == 7 and untouched.games[1].params["alpha"] == 1.5


# -- options checked before anything starts -----------------------------------------------
@pytest.mark.parametrize("args, says", [
    (["run", QUICKSTART, "--concurrency", "-3"], "argument --concurrency: expected at least 1, not -3"),
    (["run", QUICKSTART, "--concurrency", "0"], "argument --concurrency: expected at least 1, not 0"),
    (["watch", "runs/quickstart", "--interval", "-1"], "argument --interval: expected more than 0 seconds, not -1"),
    (["watch", "runs/quickstart", "--interval", "soon"], "argument --interval: expected a number of seconds, not 'soon'"),
    *[([command, "--json", "--plain"], "argument --plain: not allowed with argument --json")
      for command in ("games", "agents", "referees", "runs")],
    (["rank", "runs/quickstart", "--json", "--plain"], "argument --plain: not allowed with argument --json"),
])
def test_a_bad_option_is_refused_before_anything_starts(tmp_path, args, says):
    result = arena(*args, cwd=tmp_path)
    assert result.returncode == 2 and says in result.stderr and "Traceback" not in result.stderr
    assert result.stdout == "" and not (tmp_path / "runs").exists()


def test_rounds_prints_its_tables_when_piped(tmp_path):
    """--rounds is asked for: it is not replaced by the plain log because stdout is not a terminal."""
    result = arena("run", QUICKSTART, *SMALL, "--limit", "1", "--rounds", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "· round 1" in result.stdout and "· round 2" in result.stdout and BOX & set(result.stdout)
    plain = arena("run", QUICKSTART, *SMALL, "--limit", "1", "--plain", "--force-new", cwd=tmp_path)
    assert "round 2 closed" in plain.stdout and not BOX & set(plain.stdout.split("mean payoff per agent")[0])
