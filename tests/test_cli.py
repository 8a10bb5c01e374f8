"""The `arena` command as a user runs it: run, validate, games, and errors in scenario files."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from helpers import ROOT

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def test_quickstart_runs_offline_and_prints_the_table(run_cli, tmp_path):
    run_dir = tmp_path / "run"
    result = run_cli("run", QUICKSTART, "--plain", "--run-dir", run_dir)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "120 of 120 matches finished." in text
    for group in ("public_goods_mode1", "public_goods_mode2"):
        assert f"{group}: mean payoff per agent (95% bootstrap interval)" in text
    agents = ("generous", "freerider", "mirror", "reciprocal", "cautious", "dice")
    for agent in agents:
        assert agent in text
    # the round log names seats, with the agent beside them for the watcher
    assert re.search(r"\[public_goods_mode1#1:Player=[0-9+]+\] r1 Player \d \((" + "|".join(agents) + r")\) -> \d+", text)
    exported = run_cli("export", run_dir, "--format", "jsonl")
    records = [json.loads(line) for line in exported.stdout.splitlines()]
    assert len(records) == 120 and all(r["status"] == "finished" for r in records)
    means = {}
    for r in records:
        if r["group"] == "public_goods_mode1":
            for seat in r["seats"]:
                means.setdefault(seat["agent"], []).append(r["payoffs"][seat["label"]])
    assert {len(v) for v in means.values()} == {40}  # every agent sits at 10 of the 15 tables, 4 times
    means = {a: sum(v) / len(v) for a, v in means.items()}
    assert means["freerider"] > means["generous"]
    row = re.search(r"freerider\s*│\s*40\s*│\s*([\d.]+)", text)
    assert row and float(row.group(1)) == pytest.approx(means["freerider"], abs=0.006)


def test_a_second_run_resumes_and_replays_nothing(run_cli, tmp_path):
    run_dir = tmp_path / "run"
    first = run_cli("run", QUICKSTART, "--quiet", "--run-dir", run_dir)
    second = run_cli("run", QUICKSTART, "--quiet", "--run-dir", run_dir)
    assert first.returncode == second.returncode == 0
    assert "Resuming the run in" in second.stdout and "120 finished matches are kept" in second.stdout
    assert "120 of 120 matches finished, 120 from the earlier run" in " ".join(second.stdout.split())
    table = lambda out: out[out.index("public_goods_mode1:"):out.index("120 of 120")]
    assert table(first.stdout) == table(second.stdout)


def test_quiet_run_prints_only_results(run_cli, tmp_path):
    result = run_cli("run", QUICKSTART, "--quiet", "--run-dir", tmp_path / "r")
    assert result.returncode == 0
    assert "round 1" not in result.stdout and "120 of 120 matches finished." in result.stdout


def test_games_lists_public_goods_with_parameters(run_cli):
    result = run_cli("games", "--json")
    assert result.returncode == 0
    games = {g["name"]: g for g in json.loads(result.stdout)}
    params = {p["name"]: p["default"] for p in games["public_goods"]["params"]}
    assert params == {"rounds": 5, "endowment": 10, "alpha": 1.5, "mode": 1}
    table = run_cli("games")
    assert "public_goods" in table.stdout and "alpha" in table.stdout


def test_validate_accepts_the_quickstart(run_cli):
    result = run_cli("validate", QUICKSTART)
    assert result.returncode == 0
    assert "ok — 6 agents, 2 game entries, 120 matches" in result.stdout


GOOD = {
    "name": "t",
    "agents": {"a": {"backend": "scripted", "strategy": "free_rider"}, "b": {"backend": "scripted", "strategy": "always_all"}},
    "games": [{"game": "public_goods", "agents": ["a", "b"]}],
}


def write(tmp_path, text: str):
    path = tmp_path / "scenario.yaml"
    path.write_text(textwrap.dedent(text))
    return path


@pytest.mark.parametrize(
    "text, expected",
    [
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, agents: [a, b], params: {rounds: five}}]
            """,
            ["games[0].params.rounds", "expected a valid integer", "given: 'five'"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_good, agents: [a, b]}]
            """,
            ["games[0].game", "unknown game 'public_good'", "did you mean 'public_goods'"],
        ),
        (
            """
            name: t
            agents: {alpha: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, agents: [alpah, b]}]
            """,
            ["games[0].agents[0]", "no agent named 'alpah'", "did you mean 'alpha'"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rdier}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, agents: [a, b]}]
            """,
            ["agents.a.strategy", "did you mean 'free_rider'"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: conditional_cooperator, params: {ratio: -1}}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, agents: [a, b]}]
            """,
            ["agents.a.params.ratio", "greater than or equal to 0", "given: -1"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scriptd, strategy: free_rider}, b: {strategy: always_all}}
            games: [{game: public_goods, agents: [a, b]}]
            """,
            ["agents.a.backend", "did you mean 'scripted'", "agents.b.backend: required field is missing"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}}
            games: [{game: public_goods, agents: [a, b], repeats: 3}]
            """,
            ["games[0].repeats: unknown field", "`repeats` belongs in the tournament block"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            tournament: {repeat: 3}
            """,
            ["tournament.repeat: unknown field", "did you mean 'repeats'?"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            tournament: {repeats: 0}
            """,
            ["tournament.repeats", "at least 1, or until_stable"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            tournament: {repeats: sometimes}
            """,
            ["tournament.repeats", "given: 'sometimes'"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            tournament: {repeats: {block: 5, min: 20, max: 10}}
            """,
            ["tournament.repeats", "max (10) must be at least min (20)"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            tournament: {format: knockout}
            """,
            ["tournament.format", "expected 'fixed', 'round_robin', 'all_pairs' or 'swiss'", "given: 'knockout'"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, seats: 3}]
            tournament: {format: round_robin}
            """,
            ["games[0].seats", "tables of 3 need at least 3 agents; 2 take part"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}, c: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, seats: 2}]
            """,
            ["games[0].seats", "a fixed table seats every listed agent: 3, not 2"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}, c: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, seats: 3}]
            tournament: {format: all_pairs}
            """,
            ["games[0].seats", "all_pairs plays two-seat tables"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, agents: [a, a]}]
            """,
            ["games[0].agents", "listed twice"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            concurrency: {matches: 0, per_agnet: 2}
            """,
            ["concurrency.matches", "greater than or equal to 1", "concurrency.per_agnet", "did you mean 'per_agent'?"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods}]
            concurrency: lots
            """,
            ["concurrency", "given: 'lots'"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            """,
            ["games: required field is missing"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}}
            games: [{game: public_goods, agents: [a], params: {alfa: 2}}]
            """,
            ["games[0].agents: public_goods needs at least 2 players; the tables here have 1", "games[0].params.alfa", "did you mean 'alpha'?"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}
            games: []
            """,
            ["not valid YAML: line 4"],
        ),
        ("- just\n- a list\n", ["expected a mapping"]),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}, b: {backend: scripted, strategy: always_all}}
            games: [{game: public_goods, agents: [a, b]}]
            match: {turn_timeout: 0}
            """,
            ["match.turn_timeout", "greater than 0"],
        ),
    ],
)
def test_a_malformed_scenario_names_the_file_the_field_and_the_fix(run_cli, tmp_path, text, expected):
    path = write(tmp_path, text)
    for command in ("validate", "run"):
        result = run_cli(command, path, *(["--run-dir", tmp_path / "run"] if command == "run" else []))
        assert result.returncode == 2, result.stdout
        message = " ".join(result.stderr.split())
        assert str(path.name) in message
        for part in expected:
            assert part in message, f"{part!r} not in {message!r}"


def test_a_missing_file_is_reported(run_cli, tmp_path):
    result = run_cli("validate", tmp_path / "nope.yaml")
    assert result.returncode == 2 and "nope.yaml" in result.stderr and "file not found" in result.stderr


def test_invalid_replies_are_flagged_in_the_log_and_counted(run_cli, tmp_path):
    path = write(tmp_path, """
        name: t
        agents:
          a: {backend: scripted, strategy: free_rider}
          b: {backend: scripted, strategy: fixed, params: {replies: ["not json"]}}
        games: [{game: public_goods, agents: [a, b], params: {rounds: 2}}]
        tournament: {repeats: 2}
        match: {max_retries: 1}
        """)
    result = run_cli("run", path, "--plain", "--run-dir", tmp_path / "run")
    assert result.returncode == 0
    assert "INVALID attempt 1" in result.stdout and "DEFAULT" in result.stdout
    # the invalid and defaulted counts land in the table: 2 matches x 2 rounds x 2 attempts, 4 defaults, which
    # are every one of its 4 turns, none valid; a note says its mean stands mostly on defaults
    assert re.search(r"b\s*│\s*2\s*│.*│\s*8\s*│\s*4 \(100%\)\s*│\s*0 \(0%\)\s*│", result.stdout)
    assert "note: public_goods: b (4 of 4 turns defaulted) stands mostly on defaults" in result.stdout


@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_every_example_scenario_is_valid(run_cli, path, tmp_path):
    if "../shared/data" in path.read_text() and not (ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("this scenario reads ../shared/data, which is not beside this checkout")
    result = run_cli("validate", path, cwd=tmp_path)  # its data paths are read from its own folder
    assert result.returncode == 0, result.stderr
    assert f"{path.name}: ok" in result.stdout.replace(str(path.parent) + "/", "")


def test_arena_referees_lists_every_referee_and_its_parameters(run_cli):
    import json as _json

    result = run_cli("referees", "--json")
    assert result.returncode == 0, result.stderr
    listing = {r["name"]: r for r in _json.loads(result.stdout)}
    assert {"rules", "llm_judge", "execution"} <= set(listing)
    judge = {p["name"]: p for p in listing["llm_judge"]["params"]}
    assert judge["agent"]["required"] and judge["metric"]["default"] == "judge"
    limits = {p["name"]: p for p in listing["execution"]["params"]}["limits"]["default"]
    assert "wall_seconds" in str(limits)
    text = run_cli("referees").stdout
    assert "llm_judge — A scenario agent scores each seat" in text
