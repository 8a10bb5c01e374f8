"""The check of weighted peer rank's assumption (good writers are good judges), printed with every
weighted leaderboard: it fails, and warns, on a truth-known tournament whose best writers are its
worst judges; it holds, quietly, when writing and judging go together and on PRD's Vicuna80 data."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest

from arena.rank import leaderboard
from arena.rank.prd import read_prd
from arena.rank.reviews import Reviews

from helpers import ROOT

PRD = ROOT.parent / "shared" / "data" / "prd" / "vicuna80"
FIVE = ["gpt4", "claude", "vicuna-13b", "gpt35", "bard"]
NAMES = [f"m{i}" for i in range(5)]  # m0 writes the best answers, m4 the worst
INVERTED = {"m0": 0.5, "m1": 0.6, "m2": 0.7, "m3": 0.8, "m4": 0.95}  # how often each judges right
ALIGNED = {"m0": 0.95, "m1": 0.8, "m2": 0.7, "m3": 0.6, "m4": 0.5}


def tournament(accuracy: dict[str, float], questions: int = 40, human: bool = False, seed: int = 0) -> Reviews:
    """Every reviewer judges every ordered pair of every question: the better writer's answer with
    its ``accuracy``, the other's otherwise (never a tie). ``human``: a reference that is always right."""
    rng = np.random.default_rng(seed)
    rows = []
    for q in range(questions):
        for i, a in enumerate(NAMES):
            for j, b in enumerate(NAMES):
                if i == j:
                    continue
                better = -1 if i < j else 1  # -1: a, shown first, is better
                rows += [(str(q), a, b, r, better if rng.random() < accuracy[r] else -better) for r in NAMES]
                if human:
                    rows.append((str(q), a, b, "human", better))
    return Reviews.from_rows(rows)


def agreement_order(check) -> list[str]:
    return [r.reviewer for r in sorted(check.reviewers, key=lambda r: -r.agreement)]


@pytest.mark.parametrize("human", [False, True])
def test_the_warning_fires_when_the_best_writers_are_the_worst_judges(human):
    board = leaderboard(tournament(INVERTED, human=human), ("winrate", "elo", "bt"), weighted=True, bootstrap=0,
                        orderings=50)
    check = board.weight_check
    assert check.against == ("human" if human else "the other reviewers")
    assert agreement_order(check) == ["m4", "m3", "m2", "m1", "m0"]  # the judges as good as they were made
    winrate = next(m for m in board.methods if m.method == "winrate")
    assert max(winrate.weights, key=winrate.weights.get) == "m0"  # the best writer weighs most
    assert set(check.correlation) == {"winrate", "elo", "bt"} and all(c <= -0.8 for c in check.correlation.values())
    assert check.holds is False and check.warning in board.notes
    assert "the reviewers weighed most agree least" in check.warning and f"with {check.against}" in check.warning
    if human:  # agreement with the truth is each judge's accuracy
        assert {r.reviewer: r.agreement for r in check.reviewers} == pytest.approx(INVERTED, abs=0.05)


def test_the_check_holds_quietly_when_the_best_writers_judge_best():
    for human in (False, True):
        board = leaderboard(tournament(ALIGNED, human=human), ("winrate",), weighted=True, bootstrap=0)
        check = board.weight_check
        assert check.holds is True and check.correlation["winrate"] >= 0.8 and check.warning is None
        assert board.notes == []


def test_an_unweighted_board_has_no_check_and_too_few_reviewers_are_not_checked():
    reviews = tournament(INVERTED, questions=10)
    assert leaderboard(reviews, ("winrate",), bootstrap=0).weight_check is None
    check = leaderboard(reviews, ("winrate",), ["m0", "m4"], weighted=True, bootstrap=0).weight_check
    assert check.holds is None and "at least 3 reviewers" in check.reason and check.correlation == {}
    # a reviewer with a weight given (--weight) is not weighed by its own score: it is left out of the check
    check = leaderboard(reviews, ("winrate",), weighted=True, fixed={"m0": 0.5}, bootstrap=0).weight_check
    assert [r.reviewer for r in check.reviewers] == ["m1", "m2", "m3", "m4"]


@pytest.mark.skipif(not PRD.is_dir(), reason=f"PRD's data is not at {PRD} (../shared/data beside the project)")
def test_it_stays_quiet_on_prds_data():
    prd = read_prd(PRD, FIVE)[0]
    board = leaderboard(prd, ("winrate", "elo"), weighted=True, bootstrap=0, orderings=100)
    check = board.weight_check
    assert check.against == "human" and check.unit == "order"
    # each reviewer's agreement with the human majority is its own row of PRD's Table 5 (per presented order)
    found = {r.reviewer: r.agreement for r in check.reviewers}
    assert (found["gpt35"], found["claude"], found["gpt4"]) == pytest.approx((0.621, 0.607, 0.643), abs=0.001)
    assert check.holds is True and all(c > 0 for c in check.correlation.values()) and board.notes == []


def arena(*args, cwd):
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], capture_output=True, text=True,
                          cwd=cwd, env={"COLUMNS": "200", "PATH": ""})


def test_arena_rank_prints_the_check_and_the_warning_in_text_and_json(tmp_path):
    path = tmp_path / "inverted.jsonl"
    tournament(INVERTED, questions=20).write_jsonl(path)
    text = arena("rank", "--reviews", path, "--weighted", "--method", "winrate", "--bootstrap", "0", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "note: Weighting assumes that the reviewers who score best as contestants judge best" in text.stdout
    assert "weighting check: the reviewers' agreement with the other reviewers" in text.stdout
    assert "Spearman between weight and agreement: win rate -1.00; it must be 0 or more: the assumption FAILS" in text.stdout
    ranked = json.loads(arena("rank", "--reviews", path, "--weighted", "--method", "winrate", "--bootstrap", "0",
                              "--json", cwd=tmp_path).stdout)
    check = ranked["weight_check"]
    assert check["holds"] is False and check["correlation"] == {"winrate": pytest.approx(-1.0)}
    assert check["threshold"] == 0 and ranked["notes"] == [check["warning"]]
    unweighted = json.loads(arena("rank", "--reviews", path, "--method", "winrate", "--bootstrap", "0", "--json",
                                  cwd=tmp_path).stdout)
    assert unweighted["weight_check"] is None and unweighted["notes"] == []


def embedded(html: str, element_id: str):
    found = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


def test_the_report_shows_the_check_beside_the_weighted_board(tmp_path):
    path = tmp_path / "inverted.jsonl"
    tournament(INVERTED, questions=6).write_jsonl(path)
    out = tmp_path / "inverted.html"
    result = arena("report", "--reviews", path, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    check = embedded(html, "arena-summary")["weighted"]["weight_check"]
    assert check["holds"] is False
    weighted = html[html.index("<h3>Weighted peer rank"):]
    weighted = weighted[:weighted.index("<h3>", 4)] if "<h3>" in weighted[4:] else weighted
    assert 'class="note warning" data-note="standing">Weighting assumes' in weighted
    assert '<div class="weight-check" data-holds="false">' in weighted and "the assumption fails" in weighted
    assert 'data-holds' not in html[:html.index("<h3>Weighted peer rank")]  # the unweighted board has none
