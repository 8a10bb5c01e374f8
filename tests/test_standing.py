"""What a leaderboard stands on, as a user reads it: every row's valid and defaulted turns with their
shares, and a note where a board stands mostly on defaults or a peer rank is left out for want of
reviews, in `arena run`'s end tables, `arena rank`'s tables, `arena rank --json` and the report.

The rule (arena/results/standing.py): a row, or a whole board, stands mostly on defaults when more
than half of the turns behind it defaulted. Scripted agents play; "noise" answers with random
characters, so every turn of it whose reply the game parses defaults.
"""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest

from helpers import ROOT, arena_offline

QUESTIONS = ROOT / "scenarios" / "data" / "sample-questions.jsonl"


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / f"{name}.yaml"
    path.write_text(text, encoding="utf-8")
    return path


def table_rows(out: str, names: set[str], at: int = 0) -> dict[str, list[str]]:
    """``--plain`` output: the cells of the first table's rows whose cell ``at`` is one of ``names``, keyed by it."""
    rows = {}
    for line in out.splitlines():
        cells = line.split("\t")
        if len(cells) > at + 1 and cells[at] in names and cells[at] not in rows:
            rows[cells[at]] = cells
    return rows


def drawn_rows(out: str, names: set[str]) -> dict[str, list[str]]:
    """A table as drawn for people: the cells of the first rows whose first cell is one of ``names``."""
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃]", line) if c.strip()]
        if len(cells) > 1 and cells[0] in names and cells[0] not in rows:
            rows[cells[0]] = cells
    return rows


def notes(out: str) -> list[str]:
    """``--plain`` output: the note lines under the tables, in order."""
    return [line.split("note: ", 1)[1] for line in out.splitlines() if line.lstrip("# ").startswith("note: ")]


def report_warnings(run_dir: Path, tmp_path: Path) -> list[str]:
    out = tmp_path / "report.html"
    made = arena_offline("report", run_dir, "-o", out, cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    page = out.read_text(encoding="utf-8")
    return [html.unescape(t) for t in re.findall(r'<p class="note warning" data-note="standing">(.*?)</p>', page)]


GOODS = """\
name: goods
seed: 7
agents:
  noise: {backend: scripted, strategy: garbage}
  mirror: {backend: scripted, strategy: tit_for_tat}
  freerider: {backend: scripted, strategy: free_rider}
games:
  - game: public_goods
    params: {mode: 2, rounds: 3}
tournament: {repeats: 2}
"""


def test_an_agent_whose_every_move_defaulted_is_named_beside_the_free_rider_it_ties(tmp_path):
    """The issue's local-llm case: a player with no valid move contributes the default (nothing)
    and ties for first with the free rider; the table says which of the two earned it."""
    ran = arena_offline("run", write(tmp_path, "goods", GOODS), "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    # Agent | Matches | Mean | 95% CI | Std | Invalid | Defaulted | Valid: two matches of three rounds, six turns each
    rows = drawn_rows(ran.stdout, {"noise", "mirror", "freerider"})
    assert rows["noise"][2] == rows["freerider"][2] == "37.00"  # the tie for first
    assert rows["noise"][5:] == ["18", "6 (100%)", "0 (0%)"]  # three invalid replies a turn, then the default
    assert rows["freerider"][5:] == rows["mirror"][5:] == ["0", "0 (0%)", "6 (100%)"]
    (note,) = notes(arena_offline("rank", tmp_path / "run", "--plain", cwd=tmp_path).stdout)
    assert note.startswith("public_goods: noise (6 of 6 turns defaulted) stands mostly on defaults: its mean is the "
                           "game's default move, not its play.")
    assert "freerider" not in note and "mirror" not in note
    assert f"note: {note[:100]}" in ran.stdout  # the run's end tables say it (the rest wraps at the terminal's edge)
    found = json.loads(arena_offline("rank", tmp_path / "run", "--json", cwd=tmp_path).stdout)
    by_agent = {r["agent"]: r for r in found["payoffs"]}
    assert {k: by_agent["noise"][k] for k in ("defaulted_turns", "turns", "valid_turns", "valid_share",
                                              "defaulted_share", "invalid_replies")} == {
        "defaulted_turns": 6, "turns": 6, "valid_turns": 0, "valid_share": 0.0, "defaulted_share": 1.0,
        "invalid_replies": 18}
    assert (by_agent["freerider"]["valid_share"], by_agent["freerider"]["defaulted_share"]) == (1.0, 0.0)
    # one note on the one table: its agent named, the table as a whole on valid turns (6 of 18 defaulted)
    assert found["leaderboard_notes"] == [{"board": "payoff", "group": "public_goods", "agents": ["noise"],
                                           "mostly_defaults": False, "left_out": False, "text": note}]
    assert found["peer_rank"] is None and "notes" in found  # no reviewing game: nothing to leave out
    assert report_warnings(tmp_path / "run", tmp_path) == [note]


JUDGING = """\
name: judging
seed: 5
agents:
{agents}
games:
  - game: pairwise_review
    params: {{questions: questions.jsonl, contestants: {contestants}, peer: true, output: scores, samples: 1, swap: true}}
tournament: {{role_swap: false}}
"""
SAGE = "  sage: {backend: scripted, strategy: synthetic_judge, params: {name: sage, quality: 0.9, skill: 0.05}}"
SCHOLAR = "  scholar: {backend: scripted, strategy: synthetic_judge, params: {name: scholar, quality: 0.7, skill: 0.08}}"
NOISE = "  {name}: {{backend: scripted, strategy: garbage}}"


def judging(tmp_path: Path, agents: list[str]) -> Path:
    lines = QUESTIONS.read_text(encoding="utf-8").splitlines(keepends=True)
    (tmp_path / "questions.jsonl").write_text("".join(lines[:3]), encoding="utf-8")  # three matches
    text = JUDGING.format(agents="\n".join(agents), contestants=len(agents))
    ran = arena_offline("run", write(tmp_path, "judging", text), "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    return tmp_path / "run"


def test_a_peer_rank_left_out_for_want_of_reviews_says_why(tmp_path):
    """The issue's case: no verdict parsed, so no review, an all-zero payoff table and no peer rank."""
    run_dir = judging(tmp_path, [NOISE.format(name="ann"), NOISE.format(name="bob")])
    shown = arena_offline("rank", run_dir, "--plain", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    rows = table_rows(shown.stdout, {"ann", "bob"})
    # three questions: each answers three times (valid: any text is an answer) and judges six times (every
    # verdict defaulted); its mean is 0.00 [0.00, 0.00], from the answers no verdict ever scored
    assert rows["ann"][2:4] == ["0.00", "[0.00, 0.00]"] and rows["ann"][6:] == ["6 (67%)", "3 (33%)"]
    table, peer = notes(shown.stdout)
    assert table.startswith("pairwise_review: this table stands mostly on defaults (12 of 18 turns defaulted)")
    assert "ann (6 of 9 turns defaulted), bob (6 of 9 turns defaulted) stand mostly on defaults" in table
    assert peer.startswith("No peer rank: the reviewing games of this run (pairwise_review) finished matches but gave "
                           "no review to rank; 12 of 18 turns in their matches defaulted")
    assert "Peer rank from the run's reviews" not in shown.stdout and "note: No peer rank" in arena_offline(
        "rank", run_dir, cwd=tmp_path).stdout

    found = json.loads(arena_offline("rank", run_dir, "--json", cwd=tmp_path).stdout)
    assert found["peer_rank"] is None
    assert [(n["board"], n["left_out"], n["mostly_defaults"], n["agents"]) for n in found["leaderboard_notes"]] == [
        ("payoff", False, True, ["ann", "bob"]), ("peer_rank", True, True, [])]
    assert [n["text"] for n in found["leaderboard_notes"]] == [table, peer]
    assert report_warnings(run_dir, tmp_path) == [peer, table]  # the report says it first, where the board would be

    ended = arena_offline("run", tmp_path / "judging.yaml", "--quiet", "--run-dir", run_dir, cwd=tmp_path)  # resumed
    assert ended.returncode == 0 and f"note: {peer[:100]}" in ended.stdout and f"note: {table[:100]}" in ended.stdout


def test_a_peer_rank_row_shows_the_contestants_own_turns_and_a_note_when_most_defaulted(tmp_path):
    run_dir = judging(tmp_path, [SAGE, SCHOLAR, NOISE.format(name="noise")])
    shown = arena_offline("rank", run_dir, "--method", "winrate", "--plain", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    board = shown.stdout[shown.stdout.index("Peer rank from the run's reviews"):]
    # Rank | Contestant | Score | 95% CI | Defaulted | Valid: each answered three questions and judged
    # eighteen times; noise's verdicts all defaulted
    rows = {name: cells[4:] for name, cells in table_rows(board, {"sage", "scholar", "noise"}, at=1).items()}
    assert rows == {"sage": ["0 (0%)", "21 (100%)"], "scholar": ["0 (0%)", "21 (100%)"],
                    "noise": ["18 (86%)", "3 (14%)"]}
    peer = [n for n in notes(board) if "defaults" in n]  # Bradley–Terry's own notes on separation may come too
    assert len(peer) == 1 and peer[0].startswith("noise (18 of 21 turns defaulted) stands mostly on defaults: few of "
                                                 "the answers and verdicts behind its place are its own.")

    found = json.loads(arena_offline("rank", run_dir, "--json", cwd=tmp_path).stdout)
    stands = found["peer_rank"]["stands_on"]
    assert stands["noise"] == {"turns": 21, "valid_turns": 3, "defaulted_turns": 18, "valid_share": pytest.approx(3 / 21),
                               "defaulted_share": pytest.approx(18 / 21)}
    assert stands["sage"]["valid_share"] == 1.0 and found["peer_rank"]["notes"] == peer  # its notes: ours alone
    (note,) = [n for n in found["leaderboard_notes"] if n["board"] == "peer_rank"]
    assert (note["agents"], note["mostly_defaults"], note["left_out"]) == (["noise"], False, False)
    assert peer[0] in report_warnings(run_dir, tmp_path)


def test_a_board_of_valid_turns_has_no_note(tmp_path):
    run_dir = judging(tmp_path, [SAGE, SCHOLAR])
    found = json.loads(arena_offline("rank", run_dir, "--json", cwd=tmp_path).stdout)
    assert found["leaderboard_notes"] == [] and found["peer_rank"]["notes"] == []
    assert {a: s["valid_share"] for a, s in found["peer_rank"]["stands_on"].items()} == {"sage": 1.0, "scholar": 1.0}
    assert all(r["defaulted_share"] == 0.0 for r in found["payoffs"])
    shown = arena_offline("rank", run_dir, cwd=tmp_path).stdout
    assert "defaults" not in shown and "No peer rank" not in shown and "sage" in shown
