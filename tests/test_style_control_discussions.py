"""Style control on the runs of the discussing games (peer_discussion, chateval_debate): they keep
the two answers under discussion in their last notice (``answers_field``), by source, so
`arena rank RUN --style-control` measures each review's two answers, as it does for pairwise_review.
chateval_scoring scores one response and compares no answers: it keeps none."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arena.contract import open_run, plugins
from arena.rank.style import measure
from arena.results.style import answer_styles

from helpers import ROOT, arena_offline

DATA = ROOT / "scenarios" / "data"

SCENARIOS = {
    "peer_discussion": {
        "name": "discussed", "seed": 9,
        "agents": {"keen": {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": "keen", "skill": 0.05}},
                   "sloppy": {"backend": "scripted", "strategy": "synthetic_judge",
                              "params": {"name": "sloppy", "skill": 0.5, "reconsider": 0.5}}},
        "games": [{"game": "peer_discussion",
                   "params": {"pairs": str(DATA / "sample-pairs.jsonl"), "stop": "turns", "max_turns": 2}}],
        "tournament": {"repeats": 2},
    },
    "chateval_debate": {  # calibrated: each pair is debated the other way round too, its sources swapped with it
        "name": "debated", "seed": 21,
        "agents": {"careful": {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": "careful", "skill": 0.05}},
                   "hasty": {"backend": "scripted", "strategy": "synthetic_judge",
                             "params": {"name": "hasty", "skill": 0.2, "position_bias": 0.3}}},
        "games": [{"game": "chateval_debate",
                   "params": {"pairs": str(DATA / "labelled-pairs.jsonl"), "strategy": "one_by_one", "turns": 1,
                              "output": "scores", "position_calibration": True}}],
        "tournament": {"role_swap": False},
    },
}


def _pairs(game: str) -> dict[str, dict]:
    path = DATA / ("sample-pairs.jsonl" if game == "peer_discussion" else "labelled-pairs.jsonl")
    return {line["id"]: line for line in map(json.loads, path.read_text().splitlines())}


@pytest.fixture(scope="module", params=sorted(SCENARIOS))
def run(request, tmp_path_factory):
    folder = tmp_path_factory.mktemp(request.param)
    (folder / "scenario.yaml").write_text(yaml.safe_dump(SCENARIOS[request.param]))
    done = arena_offline("run", folder / "scenario.yaml", "--run-dir", folder / "run", "--quiet", cwd=folder)
    assert done.returncode == 0, done.stderr
    return request.param, folder / "run"


def test_the_game_names_its_answers_for_style_control():
    assert plugins.load("game", "peer_discussion").answers_field == "answers"
    assert plugins.load("game", "chateval_debate").answers_field == "answers"
    assert plugins.load("game", "chateval_scoring").answers_field is None  # one response, nothing compared


def test_each_reviewed_answer_is_measured_from_the_pairs_file(run):
    game, run_dir = run
    pairs = _pairs(game)
    store = open_run(run_dir)
    rows = store.review_rows()
    assert rows
    styles = answer_styles(store, rows)
    swapped = 0
    for review in rows:
        case = pairs[review.question]
        text = {case.get("source_a", "answer_a"): case["answer_a"], case.get("source_b", "answer_b"): case["answer_b"]}
        for who in (review.a, review.b):
            assert styles.values[(review.question, who, review.match, review.repeat)] == measure(text[who]), (review, who)
        swapped += review.order == 1
    if game == "chateval_debate":
        assert swapped  # the swapped debates' answers are found under the right source too
    # the answers differ in length, so the feature is there to fit
    assert len({styles.values[key][0] for key in styles.values}) > 1


def test_rank_with_style_control_works_on_the_run(run):
    game, run_dir = run
    done = arena_offline("rank", run_dir, "--style-control", "--method", "bt", "--json", cwd=run_dir.parent)
    assert done.returncode == 0, done.stderr
    control = json.loads(done.stdout)["peer_rank"]["style_control"]
    sources = {s for case in _pairs(game).values()
               for s in (case.get("source_a", "answer_a"), case.get("source_b", "answer_b"))}
    assert set(control["rank"]) == sources
    assert control["features"] == ["length"]  # the sample answers have no markdown
    text = arena_offline("rank", run_dir, "--style-control", "--method", "bt", cwd=run_dir.parent)
    assert text.returncode == 0, text.stderr
    assert "Bradley–Terry, style-controlled" in text.stdout and "what style is worth" in text.stdout


def test_answers_that_never_differ_in_style_are_ranked_with_a_note_not_a_traceback(tmp_path):
    (tmp_path / "pairs.jsonl").write_text("".join(json.dumps({"id": c, "question": f"Question {c}?", "answer_a": f"A to {c}.",
                                                              "answer_b": f"B to {c}.", "label": label}) + "\n"
                                                  for c, label in (("p1", -1), ("p2", 1))))
    fixed = lambda side: {"backend": "scripted", "strategy": "fixed",  # noqa: E731
                          "params": {"replies": [f"My view.\nPreference: {side}"], "cycle": "round"}}
    raw = {"name": "same-style", "seed": 1, "agents": {"one": fixed(1), "two": fixed(2)},
           "games": [{"game": "peer_discussion", "params": {"pairs": str(tmp_path / "pairs.jsonl")}}],
           "tournament": {"repeats": 2}}
    (tmp_path / "s.yaml").write_text(yaml.safe_dump(raw))
    assert arena_offline("run", tmp_path / "s.yaml", "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path).returncode == 0
    done = arena_offline("rank", tmp_path / "run", "--style-control", "--json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    control = json.loads(done.stdout)["peer_rank"]["style_control"]
    assert control["features"] == [] and control["coefficients"] == []
    assert "The answers compared never differ in length (words): that covariate is left out." in control["notes"]
    text = arena_offline("rank", tmp_path / "run", "--style-control", cwd=tmp_path)
    assert text.returncode == 0, text.stderr
    assert "Bradley–Terry, style-controlled" in text.stdout and "what style is worth" not in text.stdout
    assert "never differ in length (words)" in " ".join(text.stdout.split())
