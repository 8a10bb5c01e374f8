"""The `arena` command as a user runs it: run, validate, games, and errors in scenario files."""

from __future__ import annotations

import json
import re
import textwrap

import pytest

from helpers import ROOT

QUICKSTART = ROOT / "scenarios" / "quickstart.yaml"


def test_quickstart_runs_offline_and_prints_the_table(run_cli, tmp_path):
    out = tmp_path / "matches.jsonl"
    result = run_cli("run", QUICKSTART, "--plain", "--jsonl", out)
    assert result.returncode == 0, result.stderr
    text = result.stdout
    assert "20 of 20 matches finished." in text
    for group in ("public_goods_mode1", "public_goods_mode2"):
        assert f"{group}: mean payoff per agent" in text
    for agent in ("generous", "freerider", "mirror", "reciprocal", "dice"):
        assert agent in text
    # the round log names seats, with the agent beside them for the watcher
    assert re.search(r"\[public_goods_mode1#1\] r1 Player \d \((generous|freerider|mirror|reciprocal|dice)\) -> \d+", text)
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 20 and all(r["status"] == "finished" for r in records)
    means = {}
    for r in records:
        if r["group"] == "public_goods_mode1":
            for seat in r["seats"]:
                means.setdefault(seat["agent"], []).append(r["payoffs"][seat["label"]])
    means = {a: sum(v) / len(v) for a, v in means.items()}
    assert means["freerider"] > means["generous"]
    row = re.search(r"freerider\s*│\s*10\s*│\s*([\d.]+)", text)
    assert row and float(row.group(1)) == pytest.approx(means["freerider"], abs=0.006)


def test_quiet_run_prints_only_results(run_cli):
    result = run_cli("run", QUICKSTART, "--quiet")
    assert result.returncode == 0
    assert "round 1" not in result.stdout and "20 of 20 matches finished." in result.stdout


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
    assert "ok — 5 agents, 2 game entries, 20 matches" in result.stdout


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
            games: [{game: public_goods, agents: [a], repeat: 3}]
            """,
            ["games[0].repeat: unknown field", "did you mean 'repeats'?"],
        ),
        (
            """
            name: t
            agents: {a: {backend: scripted, strategy: free_rider}}
            games: [{game: public_goods, agents: [a], params: {alfa: 2}}]
            """,
            ["games[0].agents: public_goods needs at least 2 players; 1 listed", "games[0].params.alfa", "did you mean 'alpha'?"],
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
        result = run_cli(command, path)
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
        games: [{game: public_goods, agents: [a, b], repeats: 2, params: {rounds: 2}}]
        match: {max_retries: 1}
        """)
    result = run_cli("run", path, "--plain")
    assert result.returncode == 0
    assert "INVALID attempt 1" in result.stdout and "DEFAULT" in result.stdout
    # the invalid and defaulted counts land in the table: 2 matches x 2 rounds x 2 attempts, 4 defaults
    assert re.search(r"b\s*│\s*2\s*│.*│\s*8\s*│\s*4\s*│", result.stdout)
