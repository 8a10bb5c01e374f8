"""Style control (`arena rank --style-control`): Bradley–Terry with the answers' length and markdown as
covariates recovers a length bias planted in synthetic judges, from a reviews file and from a run; and
separability with the overlap of adjacent places under every leaderboard that has intervals."""

from __future__ import annotations

import json
import math
from itertools import permutations
from pathlib import Path

import numpy as np
import pytest
import yaml

from arena.cli.commands import main
from arena.rank.places import standing
from arena.rank.separability import separability
from arena.rank.style import measure

# true strengths (logits); the long-winded write about four times as many words as the others
QUALITY = {"ace": 2.0, "solid": 1.4, "windy": 1.0, "fair": 0.6, "rambler": 0.2, "weak": -0.4}
LONG_WINDED = {"windy", "rambler"}
TRUTH = standing(QUALITY)


def tournament(path: Path, length_bias: float, questions: int = 120, seed: int = 0) -> Path:
    """A reviews file with style columns: every ordered pair of contestants on every question, judged
    by a synthetic judge whose log-odds for A are its true advantage plus ``length_bias`` times the
    relative length difference (A − B) / (A + B)."""
    rng = np.random.default_rng(seed)
    with path.open("w") as out:
        for q in range(questions):
            words = {c: round((600 if c in LONG_WINDED else 150) * rng.uniform(0.4, 1.6)) for c in QUALITY}
            for a, b in permutations(QUALITY, 2):
                z = QUALITY[a] - QUALITY[b] + length_bias * (words[a] - words[b]) / (words[a] + words[b])
                score = -1 if rng.random() < 1 / (1 + math.exp(-z)) else 1
                out.write(json.dumps({"question": f"q{q}", "a": a, "b": b, "reviewer": "judge", "score": score,
                                      "a_length": words[a], "b_length": words[b]}) + "\n")
    return path


@pytest.fixture
def arena(capsys, monkeypatch):
    """`arena ...` in this process: (exit code, stdout, stderr)."""
    monkeypatch.setenv("COLUMNS", "200")

    def call(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return call


def places(ranks: dict[str, int]) -> list[str]:
    return sorted(ranks, key=lambda c: (ranks[c], c))


# -- a planted length bias -------------------------------------------------------------------------
def test_a_length_biased_judge_ranks_the_long_winded_higher_raw_but_not_style_controlled(tmp_path, arena):
    reviews = tournament(tmp_path / "biased.jsonl", length_bias=3.0)
    code, out, err = arena("rank", "--reviews", reviews, "--style-control", "--method", "bt", "--json")
    assert code == 0, err
    board = json.loads(out)
    raw = places(board["methods"][0]["rank"])
    assert raw.index("windy") < raw.index("ace")  # length buys windy the first place
    assert raw.index("rambler") < raw.index("fair")
    control = board["style_control"]
    assert places(control["rank"]) == TRUTH  # with length as a covariate the true order comes back
    assert places(control["raw_rank"]) == raw  # the same model without covariates is the raw leaderboard
    assert control["features"] == ["length"] and control["length_unit"] == "words"
    (length,) = control["coefficients"]
    assert length["feature"] == "length" and length["value"] > 0 and length["low"] > 0 and length["significant"]
    # the planted bias, 3 logits per unit of relative difference, on the Elo scale per standard deviation
    planted = 3.0 * length["spread"] * 400 / math.log(10)
    assert length["low"] < planted < length["high"]
    assert set(control["low"]) == set(control["high"]) == set(QUALITY)
    assert all(control["low"][c] <= control["scores"][c] <= control["high"][c] for c in QUALITY)
    assert control["separability"]["pairs"] == 15


def test_without_a_bias_the_coefficient_is_near_zero_and_the_order_the_same(tmp_path, arena):
    reviews = tournament(tmp_path / "fair.jsonl", length_bias=0.0)
    code, out, err = arena("rank", "--reviews", reviews, "--style-control", "--method", "bt", "--json")
    assert code == 0, err
    board = json.loads(out)
    control = board["style_control"]
    (length,) = control["coefficients"]
    assert length["low"] < 0 < length["high"] and not length["significant"]
    assert abs(length["value"]) < 25  # Elo points per standard deviation: next to nothing
    assert places(control["rank"]) == places(board["methods"][0]["rank"]) == TRUTH


def test_the_text_shows_the_controlled_board_beside_the_raw_one(tmp_path, arena):
    reviews = tournament(tmp_path / "biased.jsonl", length_bias=3.0, questions=60)
    code, out, err = arena("rank", "--reviews", reviews, "--style-control", "--method", "bt")
    assert code == 0, err
    assert "Bradley–Terry, style-controlled (95% bootstrap interval, questions resampled)" in out
    assert "what style is worth: Elo points for one standard deviation of (A − B) / (A + B)" in out
    row = next(line for line in out.splitlines() if "length (words)" in line and "│" in line)
    assert "yes" in row  # significant
    controlled = out[out.index("style-controlled"):]
    first = next(line for line in controlled.splitlines() if line.startswith("│    1 "))
    assert "ace" in first


# -- what is missing ---------------------------------------------------------------------------------
def test_style_control_without_style_columns_says_what_is_missing(tmp_path, arena):
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"question": "q1", "a": "x", "b": "y", "reviewer": "r", "score": s}) + "\n"
                             for s in (-1, 1)))
    code, out, err = arena("rank", "--reviews", plain, "--style-control")
    assert code == 2 and out == ""
    assert (f"{plain}: --style-control needs each answer's length, and no line has a_length and b_length (the words "
            "of the answer shown first and second)") in err
    assert "Traceback" not in err
    code, out, err = arena("rank", "--reviews", plain)  # without the option the file ranks as before
    assert code == 0, err


def test_a_style_column_missing_on_one_line_or_an_answer_with_two_lengths_is_named(tmp_path, arena):
    lines = [{"question": "q1", "a": "x", "b": "y", "reviewer": "r", "score": -1, "a_length": 10, "b_length": 20},
             {"question": "q1", "a": "y", "b": "x", "reviewer": "r", "score": 1, "a_length": 20}]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = arena("rank", "--reviews", broken, "--style-control")
    assert code == 2 and f"{broken}, line 2: b_length is missing: give it on every line" in err
    lines[1]["b_length"] = 11  # x's answer to q1 was 10 words on line 1
    broken.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = arena("rank", "--reviews", broken, "--style-control")
    assert code == 2 and f"{broken}, line 2: the answer of 'x' to question 'q1' has other style figures" in err
    lines[1]["b_length"] = "long"
    broken.write_text("".join(json.dumps(line) + "\n" for line in lines))
    code, _, err = arena("rank", "--reviews", broken, "--style-control")
    assert code == 2 and "line 2: b_length is 'long', not a count" in err


# -- measuring an answer ------------------------------------------------------------------------------
def test_an_answers_style_is_its_words_and_its_markdown_outside_code():
    text = ("# Title\n\nSome **bold** words and __more bold__ here.\n\n## Steps\n1. first\n2) second\n- a dash\n"
            "  * nested star\n\n```python\n# a comment, not a header\n- not a list\n**not bold**\n```\n#not a header\n")
    words, headers, lists, bold = measure(text)
    assert words == len(text.split())
    assert (headers, lists, bold) == (2, 4, 2)
    assert measure("") == (0, 0, 0, 0)


# -- separability -----------------------------------------------------------------------------------
def test_separability_by_hand():
    scores = {"a": 3.0, "b": 2.0, "c": 1.0, "d": 0.9}
    low = {"a": 2.5, "b": 1.5, "c": 0.5, "d": 0.2}
    high = {"a": 3.5, "b": 2.6, "c": 1.4, "d": 1.5}
    found = separability(scores, low, high)
    # a–b overlap (2.5 < 2.6); a–c, a–d, b–c (1.4 < 1.5) apart; b–d, c–d overlap: 3 of 6
    assert (found.apart_pairs, found.pairs, found.share) == (3, 6, 0.5)
    adjacent = [(p.upper, p.lower, p.apart, round(p.overlap, 9), round(p.gap, 9)) for p in found.adjacent]
    assert adjacent == [("a", "b", False, 0.1, 0.0), ("b", "c", True, 0.0, 0.1), ("c", "d", False, 0.9, 0.0)]
    touching = separability({"x": 1.0, "y": 0.0}, {"x": 0.5, "y": -0.5}, {"x": 1.5, "y": 0.5})
    assert touching.apart_pairs == 0 and touching.adjacent[0].overlap == 0.0 and not touching.adjacent[0].apart


def test_every_leaderboard_with_intervals_says_its_separability(tmp_path, arena):
    reviews = tournament(tmp_path / "fair.jsonl", length_bias=0.0, questions=30)
    code, out, err = arena("rank", "--reviews", reviews, "--json", "--orderings", "20")
    assert code == 0, err
    for result in json.loads(out)["methods"]:
        found = result["separability"]
        order = places(result["rank"])
        assert [(p["upper"], p["lower"]) for p in found["adjacent"]] == list(zip(order, order[1:]))
        assert found == separability(result["scores"], result["low"], result["high"]).model_dump()
    code, text, _ = arena("rank", "--reviews", reviews, "--orderings", "20")
    assert text.count("separability: ") == 3 and text.count("next places: ") == 3
    code, out, _ = arena("rank", "--reviews", reviews, "--json", "--bootstrap", "0", "--orderings", "20")
    assert all(result["separability"] is None for result in json.loads(out)["methods"])
    code, text, _ = arena("rank", "--reviews", reviews, "--bootstrap", "0", "--orderings", "20")
    assert "separability" not in text


# -- a run: synthetic contestants and a length-biased synthetic judge -------------------------------------
def _questions(path: Path, n: int) -> Path:
    topics = ["rivers", "bridges", "bread", "tides", "maps", "bees", "glass", "clocks", "salt", "kites"]
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"How do {topics[i % 10]} work, case {i}?"}) + "\n"
                            for i in range(n)))
    return path


@pytest.fixture(scope="module")
def biased_run(tmp_path_factory):
    """A run of pairwise reviews: three synthetic contestants of known quality, one of them long-winded,
    each answer's length varying, judged in both orders by a synthetic judge that likes length."""
    from helpers import arena_offline

    folder = tmp_path_factory.mktemp("style")
    contestant = lambda name, quality, verbosity: {"backend": "scripted", "strategy": "synthetic_contestant", "params": {
        "name": name, "quality": quality, "verbosity": verbosity, "verbosity_spread": 0.6}}
    scenario = {
        "name": "length-bias", "seed": 3,
        "agents": {"sharp": contestant("sharp", 0.8, 0.6), "plain": contestant("plain", 0.6, 0.6),
                   "windy": contestant("windy", 0.5, 2.4),
                   "lengthy": {"backend": "scripted", "strategy": "synthetic_judge",
                               "params": {"name": "lengthy", "skill": 0.15, "verbosity_bias": 0.08}}},
        "games": [{"game": "pairwise_review", "agents": ["sharp", "plain", "windy", "lengthy"],
                   "params": {"questions": str(_questions(folder / "questions.jsonl", 40)), "contestants": 3,
                              "output": "choice"}}],
        "tournament": {"role_swap": False},
    }
    (folder / "scenario.yaml").write_text(yaml.safe_dump(scenario))
    done = arena_offline("run", folder / "scenario.yaml", "--run-dir", folder / "run", "--quiet", cwd=folder)
    assert done.returncode == 0, done.stderr
    return folder / "run"


def test_a_run_ranked_with_style_control(biased_run, arena):
    code, out, err = arena("rank", biased_run, "--style-control", "--method", "bt", "--json")
    assert code == 0, err
    board = json.loads(out)["peer_rank"]
    assert places(board["methods"][0]["rank"])[0] == "windy"  # the judge's taste for length puts it first
    control = board["style_control"]
    assert places(control["rank"]) == ["sharp", "plain", "windy"]
    assert control["features"] == ["length"]  # the synthetic answers have no markdown
    assert any("never differ in markdown headers" in note for note in control["notes"])
    (length,) = control["coefficients"]
    assert length["value"] > 0 and length["significant"]
    code, text, err = arena("rank", biased_run, "--style-control", "--method", "bt")
    assert code == 0, err
    assert "Bradley–Terry, style-controlled" in text and "separability: " in text


def test_a_run_whose_games_keep_no_answers_says_so(tmp_path, arena):
    from test_rank_options import _play
    import trio

    trio.run(_play, tmp_path / "run")
    code, out, err = arena("rank", tmp_path / "run", "--style-control")
    assert code == 2
    assert ("--style-control needs the texts of the answers the reviews compare, and this run's games "
            "(judged_numbers) do not keep them") in err


# -- the report -------------------------------------------------------------------------------------
def test_the_report_shows_the_style_section_and_every_boards_separability(biased_run, tmp_path, arena):
    from arena.contract import open_run

    page = tmp_path / "run.html"
    code, _, err = arena("report", biased_run, "-o", page)
    assert code == 0, err
    html = page.read_text()
    assert '<a href="#style">Style control</a>' in html
    style = html[html.index('<section id="style">'):]
    style = style[:style.index("</section>")]
    board = style[style.index('data-board="style"'):]
    first_row = board[board.index("<tbody>"):].split("</tr>")[0]
    assert ">sharp<" in first_row  # the controlled board puts the best writer first
    assert "length (words)" in style and ">yes<" in style  # its coefficient, significant
    # every board with intervals carries its separability, in the page as in `arena rank`
    with open_run(biased_run) as store:
        from arena.results.summary import peer_rank
        from arena.rank.separability import describe

        board = peer_rank(store, style_control=False)
    for result in board.methods:
        for line in describe(result.separability, 3 if result.method == "winrate" else 0):
            assert escape_html(line) in html


def test_a_reviews_report_has_a_style_section_only_with_style_columns(tmp_path, arena):
    with_columns = tournament(tmp_path / "biased.jsonl", length_bias=3.0, questions=40)
    page = tmp_path / "styled.html"
    code, _, err = arena("report", "--reviews", with_columns, "-o", page)
    assert code == 0, err
    assert '<section id="style">' in page.read_text()
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({k: v for k, v in json.loads(line).items() if not k.endswith("_length")}) + "\n"
                             for line in with_columns.read_text().splitlines()))
    code, _, err = arena("report", "--reviews", plain, "-o", tmp_path / "plain.html")
    assert code == 0, err
    assert 'id="style"' not in (tmp_path / "plain.html").read_text()
    code, _, err = arena("report", "--reviews", with_columns, plain, "-o", tmp_path / "mixed.html")
    assert code == 0, err
    mixed = (tmp_path / "mixed.html").read_text()
    assert "Left out: the files give different style columns" in mixed


def escape_html(text: str) -> str:
    from html import escape

    return escape(text)


def test_payoff_boards_say_their_separability(biased_run, arena):
    code, out, err = arena("rank", biased_run, "--json", "--method", "winrate")
    assert code == 0, err
    found = json.loads(out)
    contestants = [r for r in found["payoffs"] if r["role"] == "Contestant"]
    (board,) = [b for b in found["payoff_separability"] if b["role"] == "Contestant"]
    assert board["group"] == "pairwise_review" and board["metric"] == "payoff"
    assert board["separability"] == separability({r["agent"]: r["mean"] for r in contestants},
                                                 {r["agent"]: r["low"] for r in contestants},
                                                 {r["agent"]: r["high"] for r in contestants}).model_dump()
    assert board["separability"]["pairs"] == 3
    code, text, _ = arena("rank", biased_run, "--method", "winrate")
    assert "  Contestant: separability: " in text and "  Judge: separability: 0 of 0 pairs" not in text


# -- the fit itself ---------------------------------------------------------------------------------
def test_the_fit_is_the_maximum_of_the_likelihood_and_without_covariates_plain_bradley_terry(tmp_path):
    from scipy.optimize import minimize

    from arena.rank.bradley_terry import bradley_terry
    from arena.rank.reviews import Reviews
    from arena.rank.style import fit_logistic, read_style_columns, style_control

    path = tournament(tmp_path / "small.jsonl", length_bias=2.0, questions=15, seed=4)
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    lines[0]["score"] = 0  # a tie: half a win each way
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    reviews = Reviews.read_jsonl(path)
    C = len(reviews.contestants)
    styles = read_style_columns(path)
    found = style_control(reviews.battles(), styles, samples=0)
    assert found.raw_scores == pytest.approx(bradley_terry(reviews), abs=1e-3)  # Elo points
    # the same likelihood, maximised by a general-purpose optimiser
    a_len, b_len = (np.array([line[f"{side}_length"] for line in lines], dtype=float) for side in "ab")
    d = (a_len - b_len) / (a_len + b_len)
    d /= d.std()
    y = (1 - reviews.score) / 2

    def nll(x):
        z = x[reviews.a] - x[reviews.b] + x[C] * d
        return -(y * -np.logaddexp(0, -z) + (1 - y) * -np.logaddexp(0, z)).sum()

    best = minimize(nll, np.zeros(C + 1), method="BFGS", options={"gtol": 1e-8}).x
    best[:C] -= best[:C].mean()
    elo = 400 / math.log(10)
    assert [found.scores[c] for c in reviews.contestants] == pytest.approx(1000 + elo * best[:C], abs=0.01)
    assert found.coefficients[0].value == pytest.approx(elo * best[C], abs=0.01)
    assert found.low is None and found.coefficients[0].significant is None and found.separability is None
    ours = fit_logistic(reviews.a, reviews.b, d[:, None], y, np.ones((1, len(y))), C)[0]
    assert ours[C] == pytest.approx(best[C], abs=1e-4)


def test_weighted_style_control(tmp_path, arena):
    reviews = tournament(tmp_path / "biased.jsonl", length_bias=3.0, questions=40)
    code, out, err = arena("rank", "--reviews", reviews, "--style-control", "--method", "bt", "--weighted",
                           "--weight", "judge=1")
    assert code == 0, err
    assert "weighted Bradley–Terry, style-controlled" in out


def test_an_answer_without_its_style_is_named():
    from arena.rank.reviews import ReviewError, Reviews
    from arena.rank.style import AnswerStyles, style_control

    battles = Reviews.from_rows([("q1", "x", "y", "r", -1), ("q2", "x", "y", "r", 1)])
    styles = AnswerStyles(features=("length",), source="the test's answers",
                          values={("q1", "x", "", 1): (10.0,), ("q1", "y", "", 1): (20.0,), ("q2", "x", "", 1): (5.0,)})
    with pytest.raises(ReviewError) as caught:
        style_control(battles, styles)
    assert str(caught.value) == ("style control needs the style of every answer compared, and the test's answers lack "
                                 "1 of 4 (the first: the answer of 'y' to question 'q2')")


# -- PRD's Vicuna80: real judges, real answers ----------------------------------------------------------
def test_prd_reviewers_prefer_longer_answers(tmp_path, arena):
    """PRD's five LLM reviewers, with the style of the five models' released answers as columns: length
    is worth a significant number of Elo points to them, and taking it out swaps the two middle places
    (vicuna-13b writes longer than gpt35)."""
    from helpers import ROOT

    from arena.rank.prd import read_prd
    from arena.rank.style import FEATURES

    prd = ROOT.parent / "shared" / "data" / "prd" / "vicuna80"
    if not prd.is_dir():
        pytest.skip(f"PRD's data is not at {prd} (../shared/data beside the project)")
    models = ["bard", "claude", "gpt35", "gpt4", "vicuna-13b"]
    texts = {}
    for model in models:
        for line in (prd / "generations" / f"answer_{model}.jsonl").read_text(encoding="utf-8").splitlines():
            found = json.loads(line)
            texts[(str(found["question_id"]), model)] = found["text"]
    reviews, _ = read_prd(prd, models)
    path = tmp_path / "prd-style.jsonl"
    with path.open("w") as out:
        for r in reviews.rows():
            line = {"question": r.question, "a": r.a, "b": r.b, "reviewer": r.reviewer, "score": r.score}
            for side, who in (("a", r.a), ("b", r.b)):
                line.update((f"{side}_{f}", int(v)) for f, v in zip(FEATURES, measure(texts[(r.question, who)])))
            out.write(json.dumps(line) + "\n")
    code, out, err = arena("rank", "--reviews", path, "--style-control", "--method", "bt", "--json")
    assert code == 0, err
    board = json.loads(out)
    assert board["reference"] == "human"  # the humans are the reference; the five LLM reviewers rank
    control = board["style_control"]
    length = next(c for c in control["coefficients"] if c["feature"] == "length")
    assert length["significant"] and length["low"] > 50
    raw, controlled = places(board["methods"][0]["rank"]), places(control["rank"])
    assert raw == ["gpt4", "claude", "vicuna-13b", "gpt35", "bard"]
    assert controlled == ["gpt4", "claude", "gpt35", "vicuna-13b", "bard"]


def test_data_that_separate_take_the_stated_prior_and_say_so():
    from arena.rank.bradley_terry import bradley_terry
    from arena.rank.reviews import Reviews
    from arena.rank.style import AnswerStyles, style_control

    # A never lost: no finite maximum without the prior
    rows = [(f"q{i}", "A", "B", "r", -1) for i in range(4)] + [(f"q{i}", "B", "C", "r", 1 if i % 2 else -1) for i in range(4)]
    styles = AnswerStyles(features=("length",))
    for i in range(4):
        for who, words in zip("ABC", (10 + i, 20, 30 + 2 * i)):
            styles.values[(f"q{i}", who, "", 1)] = (float(words),)
    reviews = Reviews.from_rows(rows)
    found = style_control(reviews, styles, samples=50)
    assert found.notes[0].startswith("The data separate the contestants: as plain Bradley–Terry, the fit adds 1 virtual tie")
    assert found.notes[1].startswith("50 of 50 bootstrap samples separate the contestants")
    assert found.raw_scores == pytest.approx(bradley_terry(reviews), abs=1e-3)  # the same prior as plain Bradley–Terry
    assert all(math.isfinite(v) and abs(v - 1000) < 1000 for v in (*found.low.values(), *found.high.values()))
