"""`arena rank`: every peer-rank option works on a run directory and on a reviews file alike, in text
and JSON; ties share a rank; `--bootstrap 0` gives no intervals; Bradley–Terry says when the data
separate."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest
import trio

from arena.cli.commands import main
from arena.rank import leaderboard
from arena.rank.bradley_terry import PRIOR_TIES, fit, separation, pair_counts
from arena.rank.places import competition_ranks
from arena.rank.reviews import Reviews

from helpers import Roundtable

NUMBERS = {"low": "1", "mid": "5", "twin": "5", "top": "12"}  # mid and twin say the same: a tie


class Judged(Roundtable):
    """Everyone names a number; every seat then judges every pair of the others: the larger wins."""

    def apply(self, round, actions):
        self.said = getattr(self, "said", {})
        self.said[round] = {s: int(a) for s, a in actions.items()}
        return []

    def reviews(self):
        return [(f"{round}", x, y, judge, int(np.sign(said[y] - said[x])))
                for round, said in self.said.items() for judge in self.seats for x in self.seats for y in self.seats
                if len({judge, x, y}) == 3]


async def _play(folder):
    from arena.contract import plugins
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    plugins.register("game", "judged_numbers", Judged)
    try:
        scenario = parse_scenario({
            "name": "judged", "games": [{"game": "judged_numbers"}], "tournament": {"repeats": 2},
            "agents": {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": [v]}} for n, v in NUMBERS.items()},
        })
        store = RunStore.create_or_resume(folder, scenario.name, "t", scenario.fingerprint())
        await run_tournament(scenario, store)
        store.close()
    finally:
        plugins.unregister("game", "judged_numbers")


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    """A finished run whose games produced reviews, and the same reviews as a JSONL file."""
    from arena.contract import open_run

    folder = tmp_path_factory.mktemp("judged")
    trio.run(_play, folder / "run")
    store = open_run(folder / "run")
    Reviews.from_rows(store.review_rows()).write_jsonl(folder / "reviews.jsonl")
    store.close()
    return folder / "run", folder / "reviews.jsonl"


@pytest.fixture
def arena(capsys, monkeypatch):
    """`arena ...` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "200")

    def call(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


OPTIONS = [
    [],
    ["--weighted"],
    ["--method", "bt", "--weighted"],
    ["--method", "elo", "--weighted", "--elo-weights", "mean"],
    ["--reviewers", "top", "mid", "--method", "winrate"],
    ["--bootstrap", "0"],
    ["--reference", "top", "--agreement-unit", "pair", "--method", "winrate"],
    ["--orderings", "20", "--seed", "3", "--method", "elo", "--weight", "nobody=0.5"],
]


@pytest.mark.parametrize("options", OPTIONS, ids=lambda o: " ".join(o) or "defaults")
def test_a_run_and_its_reviews_file_give_the_same_board_for_every_option(run, arena, options):
    run_dir, reviews = run
    code, out, err = arena("rank", run_dir, "--json", *options)
    assert code == 0, err
    from_run = json.loads(out)["peer_rank"]
    code, out, err = arena("rank", "--reviews", reviews, "--json", *options)
    assert code == 0, err
    # the same board; a run's also says what each row stands on, its agents' turns, which a file has not
    stands_on = from_run.pop("stands_on")
    assert json.loads(out) == {**from_run, "stands_on": None}
    assert set(stands_on) <= set(from_run["contestants"]) and all(s["turns"] > 0 for s in stands_on.values())

    # the options took effect
    methods = [m["method"] for m in from_run["methods"]]
    expected = options[options.index("--method") + 1] if "--method" in options else None
    assert methods == ([expected] if expected else ["winrate", "elo", "bt"])
    assert all(m["weighted"] == ("--weighted" in options) for m in from_run["methods"])
    if "--reviewers" in options:
        assert from_run["reviewers"] == ["mid", "top"]
    if "--bootstrap" in options:
        assert all(m["low"] is None and m["high"] is None for m in from_run["methods"])
    else:
        assert all(m["low"][c] <= m["scores"][c] + 1e-9 and m["scores"][c] <= m["high"][c] + 1e-9
                   for m in from_run["methods"] for c in from_run["contestants"])
    if "--elo-weights" in options:
        assert from_run["methods"][0]["scheme"] == "mean"
    if "--reference" in options:
        assert from_run["reference"] == "top" and "top" not in from_run["reviewers"]
        assert from_run["agreement"][0]["examples"]["unit"] == "pair"
    if "--weighted" in options:
        assert from_run["pairwise_weights"]["low"] == 0.0  # the weakest reviewer has no say

    # and the text of both is the same leaderboard, without a crash
    code, run_text, err = arena("rank", run_dir, *options)
    assert code == 0, err
    code, file_text, err = arena("rank", "--reviews", reviews, *options)
    assert code == 0, err
    assert "Peer rank from the run's reviews:" in run_text
    board = run_text.split("Peer rank from the run's reviews:\n", 1)[1]
    # the same rows; a run's method tables end with what each row stands on (its agent's turns), which a
    # file cannot know, and say so once
    cells = lambda text: [[c.strip() for c in line.split("│")[1:-1]] for line in text.splitlines()  # noqa: E731
                          if line.startswith("│")]
    assert len(cells(board)) == len(cells(file_text))
    assert all(r[:len(f)] == f and len(r) in (len(f), len(f) + 2) for r, f in zip(cells(board), cells(file_text)))
    assert board.splitlines()[0] == file_text.splitlines()[0] and board.splitlines()[1].startswith("Defaulted, Valid:")
    assert board[board.index("pairwise win rate"):] == file_text[file_text.index("pairwise win rate"):]
    assert "reviewer bias" in file_text and "pairwise win rate" in file_text
    if "--weighted" in options:
        assert "reviewer weights" in file_text
    if "--bootstrap" in options:
        assert "no intervals: --bootstrap 0" in file_text and "95% CI" not in file_text


def test_ties_share_a_rank_in_text_and_json(run, arena):
    _, reviews = run
    code, out, _ = arena("rank", "--reviews", reviews, "--json", "--method", "winrate", "--bootstrap", "20")
    (winrate,) = json.loads(out)["methods"]
    assert winrate["scores"]["mid"] == pytest.approx(winrate["scores"]["twin"])
    assert winrate["rank"] == {"top": 1, "mid": 2, "twin": 2, "low": 4}
    code, text, _ = arena("rank", "--reviews", reviews, "--method", "winrate", "--bootstrap", "20")
    rows = [line for line in text.splitlines() if line.startswith("│") and ("mid" in line or "twin" in line)][:2]
    assert [row.split("│")[1].strip() for row in rows] == ["2", "2"]
    assert "equal scores share a rank" in text


def test_competition_ranks_by_hand():
    assert competition_ranks({"a": 3.0, "b": 2.0, "c": 2.0, "d": 1.0}) == {"a": 1, "b": 2, "c": 2, "d": 4}
    assert competition_ranks({"x": 27.5, "y": 27.5, "z": 27.5}) == {"x": 1, "y": 1, "z": 1}
    assert competition_ranks({"p": 0.1 + 0.2, "q": 0.3, "r": 0.0}) == {"p": 1, "q": 1, "r": 3}  # float noise is equal


def test_bootstrap_zero_and_bad_numbers(run, arena):
    run_dir, reviews = run
    for source in (["--reviews", reviews], [run_dir]):
        code, _, err = arena("rank", *source, "--bootstrap", "-1")
        assert code == 2 and "--bootstrap -1: give 0 (no intervals) or more samples" in err
        code, _, err = arena("rank", *source, "--orderings", "0")
        assert code == 2 and "--orderings 0" in err
        code, _, err = arena("rank", *source, "--reviewers", "nobody")
        assert code == 2 and "no reviews by 'nobody'" in err


# -- Bradley–Terry when the data separate ---------------------------------------------------------
def test_separated_data_are_named_and_fitted_with_the_stated_prior(run, arena):
    _, reviews = run
    code, out, _ = arena("rank", "--reviews", reviews, "--json", "--method", "bt")
    (bt,) = json.loads(out)["methods"]
    assert bt["separated"] == {"unbeaten": [["top"]], "winless": [["low"]], "prior_ties": PRIOR_TIES}
    assert bt["separated_samples"] == 200  # every resample keeps top unbeaten
    assert all(math.isfinite(bt["low"][c]) and math.isfinite(bt["high"][c]) for c in bt["scores"])
    assert bt["high"]["top"] - bt["low"]["low"] < 1600  # shrunk by the prior, not driven to the optimiser's limit
    code, text, _ = arena("rank", "--reviews", reviews, "--method", "bt")
    assert "note: The data separate the contestants (top never lost to the others; low never beat nor tied the others)" in text
    assert "200 of 200 bootstrap samples separate" in text


def test_the_prior_by_hand():
    # A beat B four times and never lost: without a prior the odds are infinite; with one virtual
    # tie (half a win each way) they are 4.5 / 0.5 = 9
    rows = [(f"q{i}", "A", "B", "r", -1) for i in range(4)]
    found = fit(Reviews.from_rows(rows))
    assert found.separation is not None and found.separation.unbeaten == [[0]] and found.separation.winless == [[1]]
    assert found.scores["A"] - found.scores["B"] == pytest.approx(400 * math.log10((4 + PRIOR_TIES / 2) / (PRIOR_TIES / 2)))
    # one loss each way: a finite answer, no prior (A won 3 of 4: odds 3)
    mixed = Reviews.from_rows(rows[:3] + [("q9", "B", "A", "r", -1)])
    found = fit(mixed)
    assert found.separation is None and found.scores["A"] - found.scores["B"] == pytest.approx(400 * math.log10(3), abs=1e-4)
    # a chain: A beats B; B and D trade wins; both beat C, who never beats anyone
    chain = Reviews.from_rows([("q", "A", "B", "r", -1), ("q", "B", "C", "r", -1), ("q", "B", "D", "r", -1),
                               ("q", "D", "B", "r", -1), ("q", "D", "C", "r", -1)])
    split = separation(*pair_counts(chain))
    names = chain.contestants
    assert [[names[i] for i in g] for g in split.unbeaten] == [["A"]]
    assert [[names[i] for i in g] for g in split.winless] == [["C"]]
    # a tie is half a win both ways: once C ties D, C reaches B through D and only A stands apart
    tied = Reviews.from_rows(list(chain.rows())[:-1] + [("q", "D", "C", "r", 0)])
    split = separation(*pair_counts(tied))
    assert [[names[i] for i in g] for g in split.unbeaten] == [["A"]] and [[names[i] for i in g] for g in split.winless] == [["B", "C", "D"]]


def test_a_leaderboard_without_separation_has_no_note():
    rng = np.random.default_rng(0)
    rows = [(f"q{i}", x, y, "r", int(rng.choice([-1, 0, 1]))) for i in range(30) for x, y in (("A", "B"), ("B", "C"), ("C", "A"))]
    (bt,) = leaderboard(Reviews.from_rows(rows), ("bt",), bootstrap=50).methods
    assert bt.separated is None and bt.notes == [] and bt.separated_samples == 0


def test_a_reference_that_never_reviewed_is_an_error_naming_those_who_did(run, arena):
    """The default reference (human raters) is looked for; a name someone gave must be there."""
    run_dir, reviews = run
    for source in ([run_dir], ["--reviews", reviews]):
        code, out, err = arena("rank", *source, "--json", "--reference", "nobody")
        assert code == 2 and out == ""
        assert "no reviews by 'nobody'" in err and "reviewers here: " in err and "top" in err
        code, out, _ = arena("rank", *source, "--json", "--bootstrap", "0", "--orderings", "5")
        board = json.loads(out)
        board = board["peer_rank"] if source == [run_dir] else board
        assert code == 0 and board["reference"] is None and board["agreement"] == []  # no human raters: no reference
        code, out, _ = arena("rank", *source, "--json", "--bootstrap", "0", "--orderings", "5", "--reference", "top")
        board = json.loads(out)
        board = board["peer_rank"] if source == [run_dir] else board
        assert code == 0 and board["reference"] == "top" and "top" not in board["reviewers"]


def test_a_run_and_a_reviews_file_together_are_refused(run, arena):
    run_dir, reviews = run
    code, out, err = arena("rank", run_dir, "--reviews", reviews)
    assert code == 2 and out == "" and "give a run directory, or --reviews FILE, not both" in err
