"""`arena import faireval`: FairEval's released answer, label and evaluation files as review tuples.

The fixture folder tests/data/faireval has FairEval's repository layout and formats (six questions of
our own); PRD's copy of the Vicuna80 answers, the very files FairEval ships, is used when it is there.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from arena.rank.faireval import read_faireval
from arena.rank.reviews import ReviewError

from helpers import ROOT

FIXTURE = ROOT / "tests" / "data" / "faireval"
JUDGE = "gpt-3.5-turbo-0301_mec2_bpc1"
HUMAN = ["CHATGPT", "CHATGPT", "CHATGPT", "TIE", "CHATGPT", "VICUNA13B"]  # the fixture's label file, line by line
VICUNA80 = ROOT.parent / "shared" / "data" / "prd" / "vicuna80"


def arena(*args, cwd: Path):
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=300)


def lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def copy(tmp_path: Path) -> Path:
    folder = tmp_path / "FairEval"
    shutil.copytree(FIXTURE, folder)
    return folder


def test_the_human_labels_become_the_reference_and_every_evaluation_keeps_its_order(tmp_path):
    out = tmp_path / "reviews.jsonl"
    result = arena("import", "faireval", FIXTURE, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{out}: 30 reviews of 2 contestants by 2 reviewers ({JUDGE}, human)" in result.stdout
    rows = lines(out)
    human = [r for r in rows if r["reviewer"] == "human"]
    # one label a line, in the answers' question order; CHATGPT is gpt35's answer, shown as A
    assert [(r["question"], r["a"], r["b"], r["score"]) for r in human] == [
        (str(q), "gpt35", "vicuna-13b", {"CHATGPT": -1, "TIE": 0, "VICUNA13B": 1}[label])
        for q, label in enumerate(HUMAN, start=1)]
    judge = [r for r in rows if r["reviewer"] == JUDGE]
    # k = 2 evaluations in each order: `review` shows gpt35 first, `review_bpc` vicuna-13b first
    assert len(judge) == 24
    assert sum(r["a"] == "gpt35" for r in judge) == sum(r["a"] == "vicuna-13b" for r in judge) == 12
    q2 = [(r["a"], r["score"]) for r in judge if r["question"] == "2"]
    assert q2 == [("gpt35", -1), ("gpt35", 0), ("vicuna-13b", -1), ("vicuna-13b", -1)]  # 8-7, 7-7; 8-7, 8-6
    q6 = [(r["a"], r["score"]) for r in judge if r["question"] == "6"]
    assert q6 == [("gpt35", 1), ("gpt35", 1), ("vicuna-13b", -1), ("vicuna-13b", -1)]  # vicuna-13b better both ways
    assert not any(r["a"] == "alpaca-13b" or r["b"] == "alpaca-13b" for r in rows)  # no labels for its answers

    # the file is an ordinary reviews file: the judge ranked, checked against the human labels
    ranked = arena("rank", "--reviews", out, "--json", "--bootstrap", "0", cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    board = json.loads(ranked.stdout)
    assert board["reference"] == "human" and board["reviewers"] == [JUDGE]
    # the judge's k samples of a pair, both orders, fold to one verdict per question; by hand:
    folded = {}
    for r in judge:
        folded.setdefault(r["question"], []).append(r["score"] if r["a"] == "gpt35" else -r["score"])
    verdicts = {q: (sum(v) > 0) - (sum(v) < 0) for q, v in folded.items()}
    truth = {r["question"]: r["score"] for r in human}
    agree = sum(verdicts[q] == truth[q] for q in truth) / len(truth)
    (winrate,) = [a for a in board["agreement"] if a["method"] == "winrate"]
    assert winrate["examples"]["examples"] == 6 and winrate["examples"]["accuracy"] == pytest.approx(agree)
    assert agree == pytest.approx(4 / 6)  # q2 (position bias: a tie) and q4 (a tie called for gpt35) are missed


def test_contestants_chooses_the_pairs_and_a_pair_without_labels_is_refused():
    reviews, _ = read_faireval(FIXTURE, contestants=["gpt35", "vicuna-13b", "alpaca-13b"])
    assert len(reviews) == 30 and reviews.contestants == ["gpt35", "vicuna-13b"]
    with pytest.raises(ReviewError, match="no human label file review_<m1>_<m2>_human.txt"):
        read_faireval(FIXTURE, contestants=["gpt35", "alpaca-13b"])  # FairEval labelled only gpt35 and vicuna-13b


def test_files_it_does_not_know_are_listed_and_left_out(tmp_path):
    folder = copy(tmp_path)
    (folder / "review" / "notes.txt").write_text("our own notes\n", encoding="utf-8")
    (folder / "review" / "review_gpt35_vicuna-13b_draft.txt").write_text("CHATGPT\n", encoding="utf-8")
    reviews, skipped = read_faireval(folder)
    assert sorted(Path(p).name for p in skipped) == ["notes.txt", "review_gpt35_vicuna-13b_draft.txt"]
    assert len(reviews) == 30
    out = tmp_path / "out.jsonl"
    result = arena("import", "faireval", folder, "-o", out, cwd=tmp_path)
    assert result.returncode == 0 and f"left out: {folder / 'review' / 'notes.txt'}" in result.stdout


BAD = {
    # what is broken: (file, how, the message's words)
    "a label that is none of the three": (
        "review/review_gpt35_vicuna-13b_human.txt", lambda t: t.replace("TIE", "DRAW"),
        "review_gpt35_vicuna-13b_human.txt, line 4: 'DRAW' is not a label (one of CHATGPT, VICUNA13B, TIE"),
    "an empty line among the labels": (
        "review/review_gpt35_vicuna-13b_human.txt", lambda t: t.replace("TIE\n", "\nTIE\n"),
        "review_gpt35_vicuna-13b_human.txt, line 4: an empty line is not a label"),
    "a label missing": (
        "review/review_gpt35_vicuna-13b_human.txt", lambda t: t.replace("TIE\n", ""),
        "review_gpt35_vicuna-13b_human.txt: 5 labels for 6 questions"),
    "answers in another order": (
        "answer/answer_vicuna-13b.jsonl", lambda t: "\n".join(reversed(t.splitlines())) + "\n",
        "line 1 of answer_gpt35.jsonl is question 1, of answer_vicuna-13b.jsonl question 6"),
    "an answer line that is not JSON": (
        "answer/answer_gpt35.jsonl", lambda t: t.replace('{"answer_id": "gpt003xQ"', '{"answer_id" "gpt003xQ"'),
        "answer_gpt35.jsonl, line 3: not JSON"),
    "an evaluation without its score lines": (
        f"review/review_gpt35_vicuna-13b_{JUDGE}.json",
        lambda t: t.replace("\\nScore of the Assistant 1: 9\\nScore of the Assistant 2: 2", "", 1),
        f"review_gpt35_vicuna-13b_{JUDGE}.json, line 3: review evaluation 1 does not end with two score lines"),
    "an evaluation of a question the answers do not have": (
        f"review/review_gpt35_vicuna-13b_{JUDGE}.json", lambda t: t.replace('{"question_id": 5,', '{"question_id": 55,'),
        f"review_gpt35_vicuna-13b_{JUDGE}.json, line 5: question_id 55 is not a question of the answer files"),
    "question.jsonl disagreeing with the answers": (
        "question.jsonl", lambda t: t.replace('{"question_id": 2,', '{"question_id": 20,'),
        "question.jsonl, line 2: question 20, but the answers' line 2 is question 2"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_file_is_named_with_its_line(tmp_path, case):
    name, change, message = BAD[case]
    folder = copy(tmp_path)
    path = folder / name
    path.write_text(change(path.read_text(encoding="utf-8")), encoding="utf-8")
    with pytest.raises(ReviewError) as error:
        read_faireval(folder)
    assert message in str(error.value)
    assert str(path) in str(error.value) or str(path.parent) in str(error.value)


def test_the_command_stops_on_a_bad_file_with_exit_code_2_and_writes_nothing(tmp_path):
    folder = copy(tmp_path)
    labels = folder / "review" / "review_gpt35_vicuna-13b_human.txt"
    labels.write_text(labels.read_text(encoding="utf-8").replace("TIE", "DRAW"), encoding="utf-8")
    out = tmp_path / "reviews.jsonl"
    result = arena("import", "faireval", folder, "-o", out, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert f"{labels}, line 4: 'DRAW' is not a label" in " ".join(result.stderr.split()), result.stderr
    assert "Traceback" not in result.stderr and not out.exists()


@pytest.mark.parametrize("missing", ["answer", "review"])
def test_a_folder_without_answers_or_labels_is_refused_plainly(tmp_path, missing):
    folder = copy(tmp_path)
    shutil.rmtree(folder / missing)
    with pytest.raises(ReviewError) as error:
        read_faireval(folder)
    expected = "no answer/answer_<model>.jsonl files" if missing == "answer" else "no human label file"
    assert expected in str(error.value) and str(folder) in str(error.value)
    with pytest.raises(ReviewError, match="no such folder"):
        read_faireval(tmp_path / "nowhere")


@pytest.mark.skipif(not VICUNA80.is_dir(), reason=f"PRD's copy of the Vicuna80 answers is not at {VICUNA80} "
                                                  "(../shared/data beside the project)")
def test_the_released_answer_files_are_read_as_they_are(tmp_path):
    """FairEval ships FastChat's Vicuna80 answers, as PRD does: with an 80-line label file beside them
    every question gets its label, in the answers' order."""
    folder = tmp_path / "FairEval"
    (folder / "answer").mkdir(parents=True)
    (folder / "review").mkdir()
    for name in ("gpt35", "vicuna-13b"):
        shutil.copy(VICUNA80 / "generations" / f"answer_{name}.jsonl", folder / "answer")
    shutil.copy(VICUNA80 / "prompts" / "vicuna_questions.jsonl", folder / "question.jsonl")
    labels = ["CHATGPT", "VICUNA13B", "TIE", "CHATGPT"] * 20
    (folder / "review" / "review_gpt35_vicuna-13b_human.txt").write_text("\n".join(labels) + "\n", encoding="utf-8")
    reviews, skipped = read_faireval(folder)
    assert skipped == [] and reviews.reviewers == ["human"] and reviews.contestants == ["gpt35", "vicuna-13b"]
    rows = list(reviews.rows())
    ids = [str(json.loads(line)["question_id"]) for line in
           (VICUNA80 / "generations" / "answer_gpt35.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r[0] for r in rows] == ids and len(rows) == 80
    assert [r[4] for r in rows] == [{"CHATGPT": -1, "VICUNA13B": 1, "TIE": 0}[label] for label in labels]


@pytest.mark.parametrize("order, shown_first", [("first", {"gpt35"}), ("second", {"vicuna-13b"}),
                                                ("both", {"gpt35", "vicuna-13b"})])
def test_order_imports_the_evaluations_of_one_presentation_order_and_every_label(tmp_path, order, shown_first):
    out = tmp_path / "reviews.jsonl"
    result = arena("import", "faireval", FIXTURE, "-o", out, "--order", order, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    rows = lines(out)
    judge = [r for r in rows if r["reviewer"] == JUDGE]
    assert {r["a"] for r in judge} == shown_first and len(judge) == 12 * len(shown_first)
    assert len([r for r in rows if r["reviewer"] == "human"]) == 6  # the labels carry no order: always all of them
    # question 2, judged 8-7 and 7-7 with gpt35 first, 8-7 and 8-6 with vicuna-13b first
    q2 = [(r["a"], r["score"]) for r in judge if r["question"] == "2"]
    expected = {"gpt35": [("gpt35", -1), ("gpt35", 0)], "vicuna-13b": [("vicuna-13b", -1), ("vicuna-13b", -1)]}
    assert q2 == [pair for name in ("gpt35", "vicuna-13b") if name in shown_first for pair in expected[name]]
    default = tmp_path / "default.jsonl"
    arena("import", "faireval", FIXTURE, "-o", default, cwd=tmp_path)
    assert (lines(default) == rows) == (order == "both")  # without --order: both, as before


def test_order_second_on_a_file_without_bpc_evaluations_is_refused_plainly(tmp_path):
    folder = copy(tmp_path)
    path = folder / "review" / f"review_gpt35_vicuna-13b_{JUDGE}.json"
    path.write_text("".join(json.dumps({**row, "review_bpc": []}) + "\n" for row in lines(path)), encoding="utf-8")
    out = tmp_path / "out.jsonl"
    result = arena("import", "faireval", folder, "-o", out, "--order", "second", cwd=tmp_path)
    assert result.returncode == 2 and not out.exists()
    assert "no evaluations with vicuna-13b's answer shown first (review_bpc), which --order second asks for" in result.stderr
    assert "Traceback" not in result.stderr
    assert arena("import", "faireval", folder, "-o", out, "--order", "first", cwd=tmp_path).returncode == 0


def test_order_is_for_faireval_only(tmp_path):
    result = arena("import", "prd", tmp_path, "-o", tmp_path / "out.jsonl", "--order", "first", cwd=tmp_path)
    assert result.returncode == 2 and "--order chooses among FairEval.py's evaluations" in result.stderr


def test_the_agreement_tables_say_whether_they_hold_pair_verdicts(tmp_path):
    out = tmp_path / "reviews.jsonl"
    assert arena("import", "faireval", FIXTURE, "-o", out, cwd=tmp_path).returncode == 0
    env = ("rank", "--reviews", out, "--bootstrap", "0", "--orderings", "1")
    pair = " ".join(arena(*env, "--agreement-unit", "pair", cwd=tmp_path).stdout.split())
    assert ("agreement with human, pair verdicts: one per question and pair, both presentation orders merged "
            "(as BPC calibrates them)") in pair
    order = " ".join(arena(*env, cwd=tmp_path).stdout.split())
    assert "agreement with human, per presented order of a pair, as PRD's Table 5" in order and "pair verdicts" not in order
    page = tmp_path / "report.html"
    assert arena("report", "--reviews", out, "-o", page, cwd=tmp_path).returncode == 0
    html = page.read_text(encoding="utf-8")
    assert "<h4>Agreement with human (peer), per presented order of a pair, as PRD&#x27;s Table 5</h4>" in html
