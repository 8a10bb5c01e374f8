"""PRD's released Vicuna80 data: Table 5 (agreement with the human majority), the pairwise heatmaps,
and weighted Elo in both weighting schemes."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from arena.rank import leaderboard
from arena.rank.elo import elo
from arena.rank.prd import read_prd

from helpers import ROOT

PRD = ROOT.parent / "shared" / "data" / "prd" / "vicuna80"
FIVE = ["gpt4", "claude", "vicuna-13b", "gpt35", "bard"]

pytestmark = pytest.mark.skipif(not PRD.is_dir(), reason=f"PRD's data is not at {PRD} (../shared/data beside the project)")


@pytest.fixture(scope="module")
def prd():
    return read_prd(PRD, FIVE)[0]


# -- Table 5 -------------------------------------------------------------------------------------
# reviewers, weighted, (accuracy, Fleiss' kappa) as printed in the paper. "We take the peer
# reviewers' majority vote weighted by winrate": the weights of the weighted win rate of the
# reviewers in the row; every presented order of a pair is an example.
TABLE_5 = {
    "GPT-3.5": (["gpt35"], False, (0.621, 0.387)),
    "Claude": (["claude"], False, (0.607, 0.319)),
    "GPT-4": (["gpt4"], False, (0.643, 0.406)),
    "GPT-4 & Claude & GPT-3.5": (["gpt4", "claude", "gpt35"], True, (0.666, 0.403)),
    "All Reviewers (Weighted)": (FIVE, True, (0.673, 0.410)),
}


@pytest.mark.parametrize("row", list(TABLE_5))
def test_table_5_per_presented_order(prd, row):
    reviewers, weighted, (accuracy, kappa) = TABLE_5[row]
    board = leaderboard(prd, ("winrate",), reviewers, weighted, bootstrap=0, agreement_unit="order")
    examples = board.agreement[0].examples
    assert examples.unit == "order" and examples.examples == 10 * 2 * 80
    assert examples.accuracy == pytest.approx(accuracy, abs=0.001)
    assert examples.fleiss_kappa == pytest.approx(kappa, abs=0.001)
    assert -1 < examples.cohen_kappa < 1 and examples.cohen_kappa == pytest.approx(kappa, abs=0.02)  # two raters


def test_per_pair_is_the_other_unit(prd):
    # both orders merged into one verdict per (question, pair): what Arena reported before
    board = leaderboard(prd, ("winrate",), ["gpt35"], bootstrap=0, agreement_unit="pair")
    examples = board.agreement[0].examples
    assert examples.unit == "pair" and examples.examples == 10 * 80
    assert (examples.accuracy, examples.fleiss_kappa) == pytest.approx((0.6375, 0.399), abs=0.001)


def test_arena_rank_prints_agreement_in_the_unit_asked(prd, tmp_path):
    path = tmp_path / "prd.jsonl"
    prd.write_jsonl(path)
    run = lambda *args: subprocess.run([sys.executable, "-m", "arena.cli", "rank", "--reviews", str(path), *args],
                                       capture_output=True, text=True, cwd=tmp_path, env={"COLUMNS": "160", "PATH": ""})
    weighted = run("--weighted", "--method", "winrate", "--bootstrap", "0")
    assert weighted.returncode == 0, weighted.stderr
    assert "agreement with human, per presented order of a pair, as PRD's Table 5" in weighted.stdout
    assert "│ winrate │     1600 │    0.673 │" in weighted.stdout and "0.410 │" in weighted.stdout
    pair = json.loads(run("--reviewers", "claude", "--method", "winrate", "--bootstrap", "0", "--agreement-unit", "pair",
                          "--json").stdout)
    assert pair["agreement"][0]["examples"]["unit"] == "pair" and pair["agreement"][0]["examples"]["examples"] == 800


def test_the_weighted_text_output(prd, tmp_path):
    # PRD's "All (Weighted)" as the docs give it: this used to exit 1 on Bradley–Terry's missing last change
    path = tmp_path / "prd.jsonl"
    prd.write_jsonl(path)
    run = lambda *args: subprocess.run([sys.executable, "-m", "arena.cli", "rank", "--reviews", str(path), *args],
                                       capture_output=True, text=True, cwd=tmp_path, env={"COLUMNS": "200", "PATH": ""})
    every = run("--weighted", "--bootstrap", "20", "--orderings", "200")
    assert every.returncode == 0, every.stderr
    text = every.stdout
    for title in ("weighted win rate (95% bootstrap", "weighted Elo (95% bootstrap", "weighted Bradley–Terry (95% bootstrap"):
        assert title in text
    assert "reviewer weights (after" in text and "gpt4 0.488, claude 0.377, vicuna-13b 0.082, gpt35 0.053, bard 0.000" in text
    assert "each ordering replayed with its own weights, scaled to mean 1; after 5 passes" in text
    assert "reviewer weights (from the weighted win rate)" in text
    assert "pairwise win rate, row beats column (ties half; reviewers weighted as in the weighted win rate)" in text
    gpt4_row = next(line for line in text.splitlines() if line.startswith("│ gpt4 ") and "—" in line)
    assert "0.630" in gpt4_row and "0.869" in gpt4_row  # over claude and bard, PRD's weighted heatmap
    bt = run("--method", "bt", "--weighted", "--bootstrap", "20")
    assert bt.returncode == 0, bt.stderr
    assert "weighted Bradley–Terry" in bt.stdout and "│    1 │ gpt4" in bt.stdout
    mean = run("--method", "elo", "--weighted", "--elo-weights", "mean", "--bootstrap", "0", "--orderings", "200")
    assert mean.returncode == 0 and "from the mean over orderings, scaled to [0, 1]" in mean.stdout
    assert "gpt4 1.000" in mean.stdout and "bard 0.000" in mean.stdout


# -- the pairwise heatmaps (PRD's charts all_heatmap and all_weighted_heatmap) ----------------------
# row beats column, ties half; rows and columns GPT-4, Claude, Vicuna, GPT-3.5, PaLM-2 (bard)
HEATMAP = [[None, 0.5906, 0.8056, 0.7913, 0.8119],
           [0.4094, None, 0.7319, 0.7319, 0.7738],
           [0.1944, 0.2681, None, 0.5250, 0.5863],
           [0.2088, 0.2681, 0.4750, None, 0.5500],
           [0.1881, 0.2263, 0.4138, 0.4500, None]]
WEIGHTED_HEATMAP = [[None, 0.6296, 0.8640, 0.8459, 0.8687],
                    [0.3704, None, 0.7766, 0.7760, 0.8169],
                    [0.1360, 0.2234, None, 0.5537, 0.5918],
                    [0.1541, 0.2240, 0.4463, None, 0.5603],
                    [0.1313, 0.1831, 0.4082, 0.4397, None]]


def _in_paper_order(board):
    index = [board["contestants"].index(c) for c in FIVE]
    return [[board["pairwise"][i][j] for j in index] for i in index]


def _close(found, paper):
    return all((f is None) == (p is None) and (p is None or abs(f - p) < 6e-5) for fr, pr in zip(found, paper)
               for f, p in zip(fr, pr))


def test_the_weighted_heatmap_is_weighted(prd):
    plain = leaderboard(prd, ("winrate",), bootstrap=0).model_dump()
    weighted = leaderboard(prd, ("winrate",), weighted=True, bootstrap=0).model_dump()
    assert plain["pairwise_weights"] is None and _close(_in_paper_order(plain), HEATMAP)
    assert weighted["pairwise_weights"] == pytest.approx(weighted["methods"][0]["weights"])
    assert _close(_in_paper_order(weighted), WEIGHTED_HEATMAP)
    # the weighted matrix is the one a user sees with --weighted, whatever the method
    only_elo = leaderboard(prd, ("elo",), weighted=True, orderings=10, bootstrap=0).model_dump()
    assert only_elo["pairwise"] == weighted["pairwise"]


# -- weighted Elo: the two schemes --------------------------------------------------------------
PAPER_WEIGHTED_ELO = [1213, 1125, 912, 894, 856]


@pytest.mark.parametrize("scheme", ["ordering", "mean"])
def test_weighted_elo_in_both_schemes_is_near_the_paper(prd, scheme):
    result = elo(prd.by(FIVE), weighted=True, orderings=4000, seed=5, scheme=scheme)
    got = [result.scores[c] for c in FIVE]
    assert sum(got) == pytest.approx(5000)
    assert got == pytest.approx(PAPER_WEIGHTED_ELO, abs=5)
    assert result.scheme == scheme and result.passes == 5
    if scheme == "ordering":  # mean-1 weights per ordering, averaged: the worst reviewers keep little say
        assert np.mean(list(result.weights.values())) == pytest.approx(1.0)
        assert max(result.weights, key=result.weights.get) == "gpt4"
    else:  # min-max of the mean ratings: the best reviewer has the full K, bard none
        assert result.weights["gpt4"] == pytest.approx(1.0) and result.weights["bard"] == 0.0
