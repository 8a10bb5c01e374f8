"""The fast paths of `arena report` (issue 15) give the numbers of plain reference code: Elo replayed
ordering by ordering in Python, transcripts read one match at a time, payoff bootstraps drawn with
64-bit indices, separation found by a graph search every time."""

from __future__ import annotations

import importlib
import importlib.util
import math
from collections import Counter

import numpy as np
import pytest

from helpers import ROOT
from arena.rank import elo_loop, leaderboard
from arena.rank.bradley_terry import separation
from arena.rank.elo import batch_sizes, checkpoints, elo, random_orders
from arena.rank.reviews import Reviews
from arena.report.data import collect
from arena.report.packing import KINDS, script_json
from arena.report.trajectory import elo_trajectory
from arena.results.payoffs import bootstrap_interval
from arena.contract import seeding
from arena.contract import open_run
from arena.store import RunStore
from scipy.sparse.csgraph import connected_components

elo_module = importlib.import_module("arena.rank.elo")  # the module; arena.rank.elo is also the function

def random_reviews(n: int, seed: int = 0, contestants: int = 4, peers: bool = False) -> Reviews:
    """``peers``: the contestants review each other, as in PRD; else three judges do."""
    rng = np.random.default_rng(seed)
    names = [f"m{i}" for i in range(contestants)]
    rows = []
    for i in range(n):
        a, b = rng.choice(contestants, 2, replace=False)
        reviewer = names[rng.integers(contestants)] if peers else f"judge{rng.integers(3)}"
        rows.append((f"q{i % 23}", names[a], names[b], reviewer, int(rng.choice([-1, 0, 1]))))
    return Reviews.from_rows(rows)


def reference_elo_runs(reviews: Reviews, orderings: int, seed: int) -> list[list[list[float]]]:
    """Each ordering's ratings after every battle, by the textbook formula, one battle at a time."""
    rng = np.random.default_rng(seed)
    runs = []
    for size in batch_sizes(len(reviews), orderings):
        for order in random_orders(len(reviews), size, rng):
            ratings = [1000.0] * len(reviews.contestants)
            history = [list(ratings)]
            for i in order:
                a, b, score = int(reviews.a[i]), int(reviews.b[i]), int(reviews.score[i])
                expected_a = 1 / (1 + 10 ** ((ratings[b] - ratings[a]) / 400))
                delta = 32 * ((1 - score) / 2 - expected_a)
                ratings[a] += delta
                ratings[b] -= delta
                history.append(list(ratings))
            runs.append(history)
    return runs


def test_elo_and_its_trajectory_are_those_of_a_plain_replay_of_every_ordering():
    reviews = random_reviews(400, seed=3)
    orderings = 9
    runs = reference_elo_runs(reviews, orderings, seed=5)
    found = elo(reviews, orderings=orderings, seed=5)
    path = elo_trajectory(reviews, orderings=orderings, seed=5)
    assert path["x"] == checkpoints(len(reviews)).tolist()
    for c, name in enumerate(reviews.contestants):
        finals = [run[-1][c] for run in runs]
        assert found.scores[name] == pytest.approx(sum(finals) / orderings, rel=1e-12)
        assert found.spread[name] == pytest.approx(float(np.std(finals)), rel=1e-9)
        for point, battles in enumerate(path["x"]):
            assert path["mean"][c][point] == pytest.approx(sum(run[battles][c] for run in runs) / orderings, rel=1e-12)
        # the figure's last point is arena rank's Elo, to the bit
        assert path["mean"][c][-1] == found.scores[name] and path["std"][c][-1] == found.spread[name]


def test_the_trajectory_is_the_same_without_numba(monkeypatch):
    reviews = random_reviews(300, seed=8)
    compiled = elo_trajectory(reviews, orderings=12, seed=1)
    monkeypatch.setattr(elo_loop, "COMPILED", False)
    elo_module._PATHS.clear()  # computed afresh, not read back
    fallback = elo_trajectory(reviews, orderings=12, seed=1)
    assert compiled["x"] == fallback["x"]
    for key in ("mean", "std"):
        for x, y in zip(compiled[key], fallback[key]):
            assert x == pytest.approx(y, abs=1e-9)


@pytest.mark.parametrize("n", [257, 5000])  # 5,000 values: the resamples are averaged in 20 slices of rows
def test_payoff_intervals_are_those_of_64_bit_draws(n):
    values = np.random.default_rng(0).random(n)
    rng = np.random.default_rng(seeding.derive("g/a/r", "bootstrap"))
    means = values[rng.integers(0, values.size, size=(2000, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert bootstrap_interval(values.tolist(), seed="g/a/r") == (float(values.mean()), float(low), float(high))
    assert bootstrap_interval(values.tolist(), seed="g/a/r") == bootstrap_interval(list(values), seed="g/a/r")
    assert bootstrap_interval(values[:-1].tolist(), seed="g/a/r") != bootstrap_interval(values.tolist(), seed="g/a/r")


@pytest.mark.parametrize("value", [0.0, 1.0, -0.5, 3.0, 0.1, 1 / 3])
def test_a_payoff_that_never_varies_has_the_interval_resampling_gives(value):
    values = np.full(613, value)
    rng = np.random.default_rng(seeding.derive("g/judge/Judge", "bootstrap"))
    means = values[rng.integers(0, values.size, size=(2000, values.size))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    assert bootstrap_interval(values.tolist(), seed="g/judge/Judge") == (float(values.mean()), float(low), float(high))


def test_separation_found_without_a_search_is_that_of_the_search():
    rng = np.random.default_rng(4)
    outcomes = Counter()
    for _ in range(300):
        C = int(rng.integers(2, 6))
        wins = rng.integers(0, 3, size=(C, C)) * (rng.random((C, C)) < 0.7)
        ties = rng.integers(0, 2, size=(C, C)) * (rng.random((C, C)) < 0.2)
        ties = ties + ties.T
        np.fill_diagonal(wins, 0)
        np.fill_diagonal(ties, 0)
        half = wins + ties / 2
        played = np.flatnonzero((half + half.T).sum(axis=1) > 0)
        groups = connected_components(half[np.ix_(played, played)] > 0, directed=True, connection="strong")[0]
        expected_split = played.size >= 2 and groups > 1
        assert (separation(wins, ties) is not None) == expected_split
        outcomes[expected_split] += 1
    assert outcomes[True] > 20 and outcomes[False] > 20  # both kinds were tried


def _bench():
    spec = importlib.util.spec_from_file_location("report_size", ROOT / "bench" / "report_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_packed_transcripts_say_what_each_match_stored(tmp_path):
    """The page's transcripts, read in two streams, against each match read on its own."""
    run_dir = _bench().synthetic_run(tmp_path / "run", matches=150)
    store = open_run(run_dir)
    try:
        report = collect(store)
        packed = report.transcripts
        strings, audiences = packed["strings"], packed["audiences"]

        def text(i):
            return None if i == -1 else strings[i]

        assert [m["k"] for m in packed["matches"]] == [m.key for m in store.matches()]
        assert len(set(strings)) == len(strings)  # every text once
        kinds = {v: k for k, v in KINDS.items()}
        failed = 0
        taken = Counter()  # (agent, defaulted): the turns of the finished matches, the peer rank's rows stand on
        for shown in packed["matches"]:
            match, messages, events = store.transcript(shown["k"])
            assert shown["st"] == match.status and shown["r"] == match.rounds and shown["seed"] == str(match.seed)
            assert [[text(s[0]), text(s[1]), packed["agents"][s[2]]] for s in shown["seats"]] == \
                   [[s.label, s.role, s.agent] for s in match.seats]
            assert [(r, text(sender), kinds[kind], text(content), tuple(text(x) for x in audiences[audience]), text(seen))
                    for r, sender, kind, content, audience, _, seen in shown["m"]] == \
                   [(m.round, m.sender, m.kind, m.content, m.recipients, m.shown) for m in messages]
            actions = [e.body for e in events if e.type == "action"]
            if match.status == "finished":
                agent = {s.label: s.agent for s in match.seats}
                taken.update((agent[e["seat"]], bool(e["defaulted"])) for e in actions)
            assert [(r, text(seat), text(action)) for r, seat, action, _, _ in shown["a"]] == \
                   [(e["round"], e["seat"], e["action"]) for e in actions]
            invalid = [e.body for e in events if e.type == "turn_failed"]
            assert [(text(seat), text(reason)) for _, seat, _, _, _, reason in shown["f"]] == \
                   [(e["seat"], e["reason"]) for e in invalid]
            assert shown["n"] == len(invalid) and text(shown["e"]) == match.error
            if match.status == "finished":  # every duel shares out 1 between its speakers: a contest
                values = [round(match.payoffs[s.label], 9) for s in match.seats]
                level = max(values) == min(values)
                assert shown["o"] == ("tie" if level else "decided")
                assert shown["w"] == ([] if level else [i for i, v in enumerate(values) if v == max(values)])
            else:
                failed += 1
                assert shown["o"] == match.status and shown["w"] == []
        assert failed and packed["groups"] == [{"name": "duel", "game": "synthetic_duel", "contest": True}]
        # the report's numbers are arena rank's: the leaderboard and the weighted one, recomputed alone
        reviews = Reviews.from_rows(store.review_rows())
        elo_module._PATHS.clear()
        stands_on = {agent: {"turns": taken[(agent, False)] + taken[(agent, True)], "valid_turns": taken[(agent, False)],
                             "defaulted_turns": taken[(agent, True)]} for agent, _ in taken}
        for board, weighted in ((report.summary["rank"]["peer_rank"], False), (report.summary["weighted"], True)):
            assert {k: v for k, v in board.items() if k != "stands_on"} == \
                leaderboard(reviews, weighted=weighted).model_dump(exclude={"stands_on"})
            assert {a: {k: s[k] for k in ("turns", "valid_turns", "defaulted_turns")}
                    for a, s in board["stands_on"].items()} == stands_on
    finally:
        store.close()


def test_the_page_json_turns_nan_into_null_and_keeps_the_rest():
    value = {"a": [1.5, math.nan, {"b": math.inf}], "c": "<x>"}
    assert script_json(value) == '{"a":[1.5,null,{"b":null}],"c":"\\u003cx\\u003e"}'
    assert script_json({"a": [1.5, 2]}) == '{"a":[1.5,2]}'
    assert script_json({1: np.float64(0.25), "n": np.int64(3), "x": np.float64("nan")}) == '{"1":0.25,"n":3,"x":null}'


@pytest.mark.parametrize("compiled", [True, False])
def test_a_replay_given_its_first_pass_ends_where_the_full_replay_does(compiled):
    if compiled and not elo_loop.COMPILED:
        pytest.skip("numba is not installed: only the fallback can run")
    reviews = random_reviews(250, seed=6)
    order = random_orders(len(reviews), 5, np.random.default_rng(2))
    start, as_contestant = np.ones(len(reviews.reviewers)), np.array([-1] * len(reviews.reviewers))
    as_contestant[0] = 0  # judge0 is weighed by m0's rating
    args = (reviews.a, reviews.b, reviews.score, reviews.reviewer, order, start, as_contestant, len(reviews.contestants))
    first, _, _ = elo_loop.replay(*args, 1, compiled=compiled)
    full = elo_loop.replay(*args, 4, compiled=compiled)
    given = elo_loop.replay(*args, 4, compiled=compiled, first_pass=first)
    for x, y in zip(full, given):
        assert np.array_equal(x, y)
    with pytest.raises(ValueError, match="one row of ratings per run"):
        elo_loop.replay(*args, 4, compiled=compiled, first_pass=first[:2])


def test_weighted_elo_is_the_same_whether_or_not_unweighted_elo_was_played_first():
    reviews = random_reviews(300, seed=9, peers=True)
    elo_module._PATHS.clear()
    alone = elo(reviews, weighted=True, orderings=20, seed=3)
    elo(reviews, orderings=20, seed=3)
    after = elo(reviews, weighted=True, orderings=20, seed=3)
    assert alone == after and alone.scheme == "ordering" and alone.passes == 5
    assert alone.scores != elo(reviews, orderings=20, seed=3).scores


def test_a_script_without_a_main_guard_can_make_a_report(tmp_path):
    """The transcripts are packed by a child process started as a module of its own: it never runs
    the caller's script again, so a plain script (no `if __name__ == "__main__"`) works, from any folder."""
    import subprocess
    import sys

    run_dir = _bench().synthetic_run(tmp_path / "run", matches=40)
    script = tmp_path / "make_report.py"
    script.write_text(
        "import sys\n"
        f"sys.path.insert(0, {str(ROOT)!r})\n"
        "from pathlib import Path\n"
        "from arena.report.data import collect\n"
        "from arena.contract import open_run\n"
        f"store = open_run(Path({str(run_dir)!r}))\n"
        "report = collect(store)\n"
        "print(report.matches, len(report.transcripts['matches']))\n")
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHONPATH"}
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["40", "40"]


def test_a_packing_that_fails_says_why_and_leaves_no_process(tmp_path):
    from arena.report.packing import Packing

    with pytest.raises(RuntimeError, match=r"packing the transcripts failed \(exit 1\): .*StoreError: .*no-such-run is not a run directory"):
        with Packing(tmp_path / "no-such-run", 9) as packing:
            packing.result()
    assert packing._child.poll() is not None
    run_dir = _bench().synthetic_run(tmp_path / "run", matches=5)
    with pytest.raises(KeyboardInterrupt):
        with Packing(run_dir, 9) as packing:  # the caller is interrupted while the child works
            raise KeyboardInterrupt
    assert packing._child.poll() is not None  # killed, not left running
