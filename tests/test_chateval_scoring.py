"""ChatEval's second setting: debaters score single dialogue responses on named dimensions; the
debate's mean per dimension is correlated with human scores (Spearman, Kendall)."""

from __future__ import annotations

import json
import os

import pytest
from scipy import stats

from arena.agents.synthetic import read_response
from arena.contract.agent import Agent
from arena.contract.errors import ConfigError
from arena.contract.records import MatchSpec
from arena.engine.match import play_match
from arena.games.dimension_scores import dimension_scores
from arena.run.scenario import parse_scenario

from helpers import ROOT, Recording, scripted

DIALOGUES = ROOT / "scenarios" / "data" / "sample-dialogues.jsonl"
DIMENSIONS = ["naturalness", "coherence", "engagingness", "groundedness"]


@pytest.fixture
def responses(tmp_path):
    path = tmp_path / "responses.jsonl"
    path.write_text(json.dumps({"id": "r1", "context": ["A: Seen any good films lately?", "B: Not really. You?"],
                                "fact": "The first feature-length film was made in 1906.",
                                "response": "I watched an old silent film. Did you know the first feature film dates "
                                            "from 1906?", "human": {"naturalness": 3, "coherence": 2.5}}) + "\n")
    return str(path)


def scorer(name, *replies):
    return Recording(scripted(name, "fixed", params={"replies": list(replies)}))


def spec(path, agents, **params):
    return MatchSpec(key="s", game="chateval_scoring", agents=tuple(agents), seed=1, shuffle_seats=False,
                     params={"responses": path, "case": "r1", **params})


def summary(record):
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    return notice.data


async def test_debaters_score_every_dimension_and_the_debate_takes_their_mean(responses):
    agents = {"a": scorer("a", "Fine.\nnaturalness: 4\ncoherence: 2", "On reflection.\n**Naturalness**: 5\nCoherence: 3"),
              "b": scorer("b", "Good.\nNaturalness: 2\nCoherence: 4", "Still.\nNaturalness: 3\nCoherence: 4")}
    record = await play_match(spec(responses, agents, dimensions=["naturalness", "coherence"],
                                   strategy="simultaneous_talk"), agents)
    assert record.rounds == 2
    data = summary(record)
    assert data["scores"] == {"Debater 1": {"naturalness": 5.0, "coherence": 3.0},
                              "Debater 2": {"naturalness": 3.0, "coherence": 4.0}}  # the last word of each counts
    assert data["mean"] == {"naturalness": 4.0, "coherence": 3.5}
    assert data["human"] == {"naturalness": 3, "coherence": 2.5}
    assert record.payoffs == {}  # a single response has no right answer to pay for
    assert record.metrics["naturalness"] == {"Debater 1": 5.0, "Debater 2": 3.0}
    notice = next(m for m in record.messages if m.kind == "notice")
    assert notice.content == "Debate scores: naturalness 4, coherence 3.5."
    # what they were shown: the dialogue, the fact, the response, and how to answer
    rules = agents["a"].turns[0].history[0].content
    for part in ("A: Seen any good films lately?\nB: Not really. You?", "The first feature-length film was made in 1906.",
                 "[Response]\nI watched an old silent film.", "'naturalness: N', 'coherence: N'", "from 1 to 5"):
        assert part in rules, part


class Says(Agent):
    """Gives its replies in order, one per request (a retry gets the next)."""

    def __init__(self, name, *replies):
        super().__init__(name, None)
        self.replies = list(replies)

    async def reply(self, turn):
        return self.replies.pop(0)


async def test_a_missing_or_out_of_scale_score_is_asked_again(responses):
    agents = {"a": Says("a", "naturalness: 9\ncoherence: 3", "naturalness: 4\ncoherence: 3"),
              "b": Says("b", "naturalness: 2\ncoherence: 4")}
    record = await play_match(spec(responses, agents, dimensions=["naturalness", "coherence"], turns=1,
                                   strategy="simultaneous_talk"), agents)
    (failed,) = [e for e in record.events if e.type == "turn_failed"]
    assert failed.seat == "Debater 1" and "Give naturalness a score from 1 to 5" in failed.reason
    assert summary(record)["scores"]["Debater 1"] == {"naturalness": 4.0, "coherence": 3.0}


def test_dimensions_and_scale_are_checked(responses):
    agents = {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["x"]}} for n in "ab"}
    for params, expected in (({"scale": [5, 1]}, "give the lowest score first"),
                             ({"dimensions": ["coherence", "Coherence"]}, "named twice"),
                             ({"dimensions": ["payoff"]}, "names the payoff")):
        with pytest.raises(ConfigError, match=expected):
            parse_scenario({"name": "s", "agents": agents, "games": [{"game": "chateval_scoring", "params": {
                "responses": responses, **params}}]})


async def test_a_synthetic_judge_scores_what_the_response_shows():
    """Read as the synthetic reader reads it: a grounded, on-topic question back scores high, a
    one-word reply low; the scale is the one asked for."""
    rows = [json.loads(line) for line in DIALOGUES.read_text(encoding="utf-8").splitlines()]
    agents = {n: scripted(n, "synthetic_judge", params={"name": n}) for n in "ab"}
    for case, expected in (("c1-grounded", {"groundedness": 5, "engagingness": 5}),
                           ("c1-terse", {"groundedness": 1, "engagingness": 1})):
        record = await play_match(MatchSpec(key=f"s/{case}", game="chateval_scoring", agents=("a", "b"), seed=1,
                                            shuffle_seats=False, params={"responses": str(DIALOGUES), "case": case}),
                                  agents)
        scores = summary(record)["scores"]["Debater 1"]
        assert {d: scores[d] for d in expected} == expected
        row = next(r for r in rows if r["id"] == case)
        seen = read_response(row["context"], row["response"], row["fact"])
        assert scores == {d: float(max(1, min(5, int(1 + 4 * seen[d] + 0.5)))) for d in DIMENSIONS}


def test_the_offline_scenario_correlates_the_debate_with_human_scores(run_cli, tmp_path):
    result = run_cli("run", ROOT / "scenarios" / "chateval-scoring-synthetic.yaml", "--quiet", "--run-dir",
                     tmp_path / "run", cwd=ROOT)
    assert result.returncode == 0, result.stderr
    assert "12 of 12 matches finished" in result.stdout
    records = [json.loads(line) for line in run_cli("export", tmp_path / "run", cwd=tmp_path).stdout.splitlines()]
    human = {json.loads(line)["id"]: json.loads(line)["human"] for line in DIALOGUES.read_text().splitlines()}
    # the debaters' last scores, read from their words
    means: dict[str, dict[str, float]] = {}
    for record in records:
        (data,) = [m["data"] for m in record["messages"] if m["kind"] == "notice"]
        last = {}
        for m in record["messages"]:
            if m["kind"] == "reply":
                last[m["sender"]] = {d: float(line.split(":")[1]) for line in m["content"].splitlines()
                                     for d in DIMENSIONS if line.startswith(f"{d}:")}
        means[data["case"]] = {d: sum(s[d] for s in last.values()) / len(last) for d in DIMENSIONS}
        assert data["mean"] == pytest.approx(means[data["case"]])
    ranked = json.loads(run_cli("rank", tmp_path / "run", "--json", cwd=tmp_path).stdout)
    (found,) = ranked["summaries"]["dimension_scores"]
    assert found["responses"] == 12 and found["dimensions"] == DIMENSIONS
    by_dimension = {c["dimension"]: c for c in found["correlations"]}
    cases = sorted(means)
    for d in DIMENSIONS:
        x, y = [means[c][d] for c in cases], [human[c][d] for c in cases]
        assert by_dimension[d]["spearman"] == pytest.approx(stats.spearmanr(x, y).statistic)
        assert by_dimension[d]["kendall"] == pytest.approx(stats.kendalltau(x, y).statistic)
        assert by_dimension[d]["spearman"] > 0  # the synthetic readers see what the annotators saw, roughly
    assert by_dimension["average"]["spearman"] == pytest.approx(sum(by_dimension[d]["spearman"] for d in DIMENSIONS) / 4)
    assert set(found["debaters"]) == {"careful", "hasty", "fair"}
    careful = {c["dimension"]: c["spearman"] for c in found["debaters"]["careful"]}
    hasty = {c["dimension"]: c["spearman"] for c in found["debaters"]["hasty"]}
    assert careful["average"] > hasty["average"]  # less noise, closer to the annotators
    text = run_cli("rank", tmp_path / "run", cwd=tmp_path, env={**os.environ, "COLUMNS": "200"}).stdout
    row = next(line for line in text.splitlines() if line.startswith("│ groundedness"))
    assert f"{by_dimension['groundedness']['spearman']:.3f}" in row and f"{by_dimension['groundedness']['kendall']:.3f}" in row


def test_responses_repeated_over_matches_count_once_at_their_mean():
    from arena.contract.events import SeatInfo
    from arena.contract.messages import Message
    from arena.contract.records import MatchRecord

    def record(key, case, scores, human):
        data = {"case": case, "dimensions": ["clarity"], "scores": {"Debater 1": {"clarity": scores[0]},
                                                                   "Debater 2": {"clarity": scores[1]}},
                "mean": {"clarity": sum(scores) / 2}, "human": {"clarity": human}, "strategy": "one_by_one"}
        return MatchRecord(key=key, group="g", game="chateval_scoring", params={}, seed=1, status="finished", rounds=1,
                           payoffs={}, events=[],
                           seats=(SeatInfo(label="Debater 1", role="Debater", agent="x"),
                                  SeatInfo(label="Debater 2", role="Debater", agent="y")),
                           messages=(Message(index=0, round=1, sender="Referee", recipients=(), content="done",
                                             kind="notice", data=data),))

    records = [record("1", "a", (1, 2), 1.0), record("2", "a", (2, 3), 1.0), record("3", "b", (4, 4), 2.0),
               record("4", "c", (6, 4), 3.0)]
    (found,) = dimension_scores(records)
    # response a: matches 1 and 2, means 1.5 and 2.5: 2 once
    assert found.responses == 3 and found.mean == {"clarity": pytest.approx((2 + 4 + 5) / 3)}
    (clarity,) = found.correlations  # one dimension: no average row
    assert (clarity.responses, clarity.spearman, clarity.kendall) == (3, pytest.approx(1.0), pytest.approx(1.0))
    # x alone: 1.5, 4, 6 against 1, 2, 3: in order; y alone: 2.5, 4, 4: two tied
    assert found.debaters["x"][0].spearman == pytest.approx(1.0)
    assert found.debaters["y"][0].spearman == pytest.approx(stats.spearmanr([2.5, 4, 4], [1, 2, 3]).statistic)
    assert found.debaters["y"][0].spearman < 1
    # too few responses or figures all equal: no correlation rather than a number
    (two,) = dimension_scores(records[:3])
    assert two.correlations[0].spearman is None


def test_scores_are_read_from_the_messages_closing_lines_only(responses):
    import random

    from arena.contract import InvalidReply
    from arena.contract.plugins import load

    game_cls = load("game", "chateval_scoring")
    seats = ("Debater 1", "Debater 2")
    game = game_cls(game_cls.Params.model_validate({"responses": responses, "case": "r1",
                                                   "dimensions": ["naturalness", "coherence"]}),
                    seats, {s: "Debater" for s in seats}, random.Random(1))
    assert game.parse_verdict("Fine.\n- **Naturalness**: 4/5\ncoherence: 2 (it drifts)") == {"naturalness": 4, "coherence": 2}
    # a later line for a dimension is the one that counts; the closing lines may come in any order
    assert game.parse_verdict("x\nnaturalness: 1\ncoherence: 3\nnaturalness: 5") == {"naturalness": 5, "coherence": 3}
    for reply in ("naturalness: 4\ncoherence: 2\nThose are my scores.",  # scores, then more text
                  "Earlier I said naturalness: 4.\ncoherence: 2",  # a score inside a sentence
                  "End with 'naturalness: N', 'coherence: N'"):
        with pytest.raises(InvalidReply, match="as its last lines"):
            game.parse_verdict(reply)


def test_a_dimension_named_with_underscores_is_read_from_a_closing_line_with_emphasis(responses):
    import random

    from arena.contract.plugins import load

    game_cls = load("game", "chateval_scoring")
    seats = ("Debater 1", "Debater 2")
    game = game_cls(game_cls.Params.model_validate({"responses": responses, "case": "r1", "dimensions": ["topic_depth"]}),
                    seats, {s: "Debater" for s in seats}, random.Random(1))
    assert game.parse_verdict("It goes deep.\n__topic_depth__: 4") == {"topic_depth": 4}
