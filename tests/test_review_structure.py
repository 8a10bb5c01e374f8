"""Reviews keep their structure (issue 14): every review a game gives carries its sample, its order
and its repeat, so that `arena rank` calibrates one judge's samples of a pair into the verdict the
game itself reached (FairEval's MEC and BPC), counts each repeat as a battle of its own, and its
bias table sees every swap whatever the samples and repeats.

The judges are models behind the local OpenAI mock (tests/mock_llm.py): what the reviews say is
checked against what each judge was actually sent and what it answered.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import sqlite3
from collections import Counter

import pytest
import yaml

from arena.cli.commands import main
from arena.rank.reviews import Reviews
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.contract import open_run
from arena.store import RunStore

from conformance_kit import between, local_only, model_agent  # noqa: F401  (local_only: an autouse fixture)
from mock_llm import OpenAIMock, body_text

QUESTIONS = {"q1": "How do the tides work?", "q2": "Why do cats purr?"}
CONTESTANTS = ("ann", "bob", "cid")


def write_questions(folder, ids=tuple(QUESTIONS)):
    path = folder / "questions.jsonl"
    path.write_text("".join(json.dumps({"id": q, "question": QUESTIONS[q]}) + "\n" for q in ids), encoding="utf-8")
    return path


def contestant_reply(text: str) -> str | None:
    """A contestant's answer: longer the higher its seat, and its own for each question."""
    seat = re.search(r"You are Contestant (\d)\. You will be asked", text)
    if seat is None:
        return None
    question = between(text, "Question: ", "\n\nWrite your answer.")
    return f"On '{question}', contestant {seat.group(1)} says: " + " ".join(["more"] * (8 * int(seat.group(1)) ** 2)) + "."


def shown_pair(text: str) -> tuple[str, str]:
    return between(text, "[Assistant 1]\n", "\n[End of Assistant 1]"), between(text, "[Assistant 2]\n", "\n[End of Assistant 2]")


def noisy(output: str):
    """A judge that answers at random (from the request's text and its sampling seed), and now and
    then not in the form asked for, so that some samples are missing."""

    def reply(body) -> str:
        text = body_text(body)
        answer = contestant_reply(text)
        if answer is not None:
            return answer
        rng = random.Random(hashlib.sha256(f"{text}|{body.get('seed')}".encode()).digest())
        if rng.random() < 0.15:
            return "Both answers have merit; I cannot decide."
        verdict = f"{rng.randint(1, 10)} {rng.randint(1, 10)}" if output == "scores" else rng.choice(["1", "2", "tie"])
        return f"Assistant 1 and Assistant 2 each say something.\n{verdict}"

    return reply


def position_biased(body) -> str:
    """A judge that prefers the answer shown first unless the second is clearly longer: it flips
    its verdict on the two shorter answers when they swap places, and on no other pair."""
    text = body_text(body)
    answer = contestant_reply(text)
    if answer is not None:
        return answer
    first, second = shown_pair(text)
    scores = "3 8" if len(second) > len(first) + 150 else "8 3"
    return f"Assistant 1 writes {len(first)} characters, Assistant 2 {len(second)}.\n{scores}"


def difference_of(reply: str, output: str) -> float | None:
    """What the game reads from a judge's reply: the second shown's score minus the first's, or the choice."""
    line = reply.strip().splitlines()[-1]
    if output == "choice":
        return {"1": -1.0, "2": 1.0, "tie": 0.0}.get(line)
    found = re.fullmatch(r"(\d+) (\d+)", line)
    return float(int(found.group(2)) - int(found.group(1))) if found else None


async def play(folder, mock, judges, params, seed=1, repeats=1) -> list:
    raw = {"name": "reviews", "seed": seed,
           "agents": {name: model_agent("openai", mock) for name in CONTESTANTS + judges},
           "games": [{"game": "pairwise_review", "params": {"contestants": len(CONTESTANTS), **params}}],
           "tournament": {"role_swap": False, "repeats": repeats},
           "match": {"turn_timeout": 600, "max_retries": 0}}
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(folder / "run", scenario.name, yaml.safe_dump(raw), scenario.fingerprint())
    try:
        await run_tournament(scenario, store)
        records = list(store.read.records(status=None))
    finally:
        store.close()
    assert records and all(r.status == "finished" for r in records), [r.error for r in records]
    return records


def stored_reviews(folder) -> list:
    store = open_run(folder / "run")
    try:
        return store.review_rows()
    finally:
        store.close()


def rank_json(folder, *options) -> dict:
    """`arena rank RUN --json`, as a user runs it, and its peer rank."""
    import contextlib
    import io

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["rank", str(folder / "run"), "--json", "--bootstrap", "0", "--orderings", "10", *options])
    assert code == 0
    return json.loads(out.getvalue())["peer_rank"]


def winner(first: str, second: str, score: int) -> str | None:
    """Who a verdict on (first, second) favours (score +1: the second); None for a tie."""
    return None if score == 0 else (second if score > 0 else first)


# -- the calibrated verdict is the game's --------------------------------------------------------
@pytest.mark.parametrize("samples, output", [(1, "scores"), (3, "scores"), (3, "choice")])
@pytest.mark.parametrize("seed", [1, 2, 3])
async def test_rank_calibrates_each_judges_samples_into_the_games_own_verdict(tmp_path, samples, output, seed):
    judges = ("jay", "kim")
    with OpenAIMock(responder=noisy(output)) as mock:
        records = await play(tmp_path, mock, judges, {"questions": str(write_questions(tmp_path)), "samples": samples,
                                                      "swap": True, "output": output}, seed=seed)
        requests = mock.answered()
    rows = stored_reviews(tmp_path)

    # every review is a comparison a judge was sent, with what it answered, its sample and its order
    sent = Counter()
    per_order = Counter()
    for record in records:
        question = QUESTIONS[record.params["case"]]
        answers = {m.content: record.agent_of(m.sender) for m in record.messages if m.kind == "reply" and m.round == 1}
        for request in requests:
            text = request.text
            if question not in text or "[Assistant 1]" not in text:
                continue
            judge = record.agent_of(re.search(r"You are (Judge \d)", text).group(1))
            first, second = (answers[t] for t in shown_pair(text))
            per_order[(record.key, judge, first, second)] += 1
            difference = difference_of(request.reply, output)
            if difference is not None:
                sent[(record.key, record.params["case"], first, second, judge, difference)] += 1
    assert set(per_order.values()) == {samples}  # each pair, in each order, k times
    assert len(per_order) == len(records) * len(judges) * 3 * 2
    assert Counter((r.match, r.question, r.a, r.b, r.reviewer, r.difference) for r in rows) == sent
    assert all(r.score == (r.difference > 0) - (r.difference < 0) and r.repeat == 1 for r in rows)
    for key in {(r.match, r.reviewer, r.a, r.b) for r in rows}:
        mine = [r for r in rows if (r.match, r.reviewer, r.a, r.b) == key]
        assert len({r.sample for r in mine}) == len(mine) and {r.sample for r in mine} <= set(range(samples))
        assert len({r.order for r in mine}) == 1
        swapped = [r for r in rows if (r.match, r.reviewer, r.a, r.b) == (key[0], key[1], key[3], key[2])]
        assert all(r.order == 1 - mine[0].order for r in swapped)

    # rank's verdict on each judge, pair and match is the one in the game's final notice
    game = {}
    for record in records:
        (notice,) = [m for m in record.messages if m.kind == "notice"]
        for item in notice.data["verdicts"]:
            a, b = (record.agent_of(s) for s in item["pair"])
            if item["verdict"] is not None:
                game[(record.key, record.agent_of(item["judge"]), frozenset((a, b)))] = winner(a, b, item["verdict"])
    battles = list(Reviews.from_rows(rows).battles().rows())
    ranked = {(r.match, r.reviewer, frozenset((r.a, r.b))): winner(r.a, r.b, r.score) for r in battles}
    assert len(battles) == len(ranked) == len(game) > 0
    assert ranked == game
    assert len(set(game.values())) > 1  # the verdicts differ: the test could tell a wrong one

    # and the leaderboard counts those verdicts, one battle each: its win rate is theirs
    board = rank_json(tmp_path)
    assert board["reviews"] == len(game)
    rates = {}
    for judge in judges:
        won, met = Counter(), Counter()
        for (_, j, pair), best in game.items():
            if j == judge:
                for c in pair:
                    won[c] += 0.5 if best is None else float(best == c)
                    met[c] += 1
        rates[judge] = {c: won[c] / met[c] for c in met}
    expected = {c: sum(rates[j][c] for j in judges if c in rates[j]) / sum(c in rates[j] for j in judges) for c in CONTESTANTS}
    winrate = next(m for m in board["methods"] if m["method"] == "winrate")
    assert winrate["scores"] == pytest.approx(expected)


# -- repeats are battles of their own, and the bias table sees every swap --------------------------
async def test_repeats_and_samples_change_no_figure_of_a_steady_judge(tmp_path):
    """A judge that answers the same comparison the same way every time: whatever the samples and
    repeats, the leaderboard and the bias table say the same, with every swap counted."""
    boards = {}
    with OpenAIMock(responder=position_biased) as mock:
        for samples in (1, 3):
            for repeats in (1, 3):
                folder = tmp_path / f"k{samples}-r{repeats}"
                records = await play(folder, mock, ("jay",), {"questions": str(write_questions(tmp_path, ["q1"])),
                                                              "samples": samples, "swap": True}, repeats=repeats)
                assert len(records) == repeats
                boards[(samples, repeats)] = rank_json(folder)
        requests = mock.answered()
    # what the judge was sent: each pair in both orders, k times, in every repeat; it flipped on one pair
    judged = [r for r in requests if "[Assistant 1]" in r.text]
    assert len(judged) == sum(3 * 2 * samples * repeats for samples, repeats in boards)
    winners: dict[frozenset, set] = {}
    for request in judged:
        first, second = shown_pair(request.text)
        winners.setdefault(frozenset((first, second)), set()).add(first if request.reply.endswith("8 3") else second)
    assert sorted(len(w) for w in winners.values()) == [1, 1, 2]  # whoever was shown first won, on one pair of three
    for (samples, repeats), board in boards.items():
        (bias,) = board["bias"]
        assert bias["reviewer"] == "jay"
        assert bias["swapped_pairs"] == 3 * repeats  # three pairs, each shown both ways, in every repeat
        assert bias["flip_rate"] == pytest.approx(1 / 3)
        assert bias["first_shown_wins"] == pytest.approx((2 + 1 + 1) / 6)
        assert bias["reviews"] == 3 * 2 * samples * repeats
        assert board["reviews"] == 3 * repeats  # one calibrated verdict per pair and repeat
    # the BPC verdicts: a tie between the two short answers (the flip cancels out), cid over either; win
    # rates are shares, so more repeats of the same verdicts leave them be (Elo and Bradley-Terry's prior
    # count battles, so they firm up with more)
    for board in boards.values():
        winrate = next(m["scores"] for m in board["methods"] if m["method"] == "winrate")
        assert winrate == pytest.approx({"ann": 0.25, "bob": 0.25, "cid": 1.0})
        assert board["pairwise"] == [[None, 0.5, 0.0], [0.5, None, 0.0], [1.0, 1.0, None]]


# -- stores and files from before keep their meaning -------------------------------------------------
async def test_a_store_written_before_reviews_had_structure_reads_them_as_battles(tmp_path):
    with OpenAIMock(responder=position_biased) as mock:
        await play(tmp_path, mock, ("jay",), {"questions": str(write_questions(tmp_path, ["q1"])), "swap": True})
    before = stored_reviews(tmp_path)
    assert all(r.sample == 0 for r in before) and rank_json(tmp_path)["reviews"] == 3
    db = sqlite3.connect(tmp_path / "run" / "run.sqlite")  # as format 4 wrote it: no structure
    db.executescript("ALTER TABLE reviews DROP COLUMN sample; ALTER TABLE reviews DROP COLUMN shown_order; "
                     "ALTER TABLE reviews DROP COLUMN difference; PRAGMA user_version = 4;")
    db.close()
    after = stored_reviews(tmp_path)
    assert after == [r._replace(sample=None, order=0, difference=None) for r in before]
    board = rank_json(tmp_path)
    assert board["reviews"] == 6  # each order a battle of its own, as such a store was ranked when it was written
    assert board["bias"][0]["swapped_pairs"] == 3 and board["bias"][0]["flip_rate"] == pytest.approx(1 / 3)


def test_a_reviews_file_keeps_the_structure_and_old_files_read_as_they_were(tmp_path):
    rows = [("q1", "x", "y", "j", -1, 0, 0, 2, -3.0, "m#2"), ("q1", "y", "x", "j", 1, 0, 1, 2, 0.5, "m#2"),
            ("q1", "x", "y", "j", 1, 0, 0, 1, 2.0, "m#1"), ("q1", "y", "x", "j", 1, 0, 1, 1, 1.0, "m#1")]
    reviews = Reviews.from_rows(rows)
    reviews.write_jsonl(tmp_path / "reviews.jsonl")
    assert list(Reviews.read_jsonl(tmp_path / "reviews.jsonl").rows()) == list(reviews.rows())
    # repeat 2: x better by 3, and by .5 when swapped: x; repeat 1: y better by 2, then x by 1: y by .5 on average
    assert sorted(b.battle for b in reviews.battles().rows()) == [("q1", "x", "y", "j", -1), ("q1", "x", "y", "j", 1)]
    plain = tmp_path / "plain.jsonl"
    plain.write_text("".join(json.dumps({"question": "q1", "a": a, "b": b, "reviewer": "j", "score": s}) + "\n"
                             for _, a, b, _, s, *_ in rows))
    old = Reviews.read_jsonl(plain)
    assert all(r.sample is None and r.match == "" and r.repeat == 1 for r in old.rows())
    old.write_jsonl(tmp_path / "again.jsonl")
    assert (tmp_path / "again.jsonl").read_text() == plain.read_text()  # no field it did not have
    # without structure the same (question, A, B) twice makes a pool of voters: one verdict, x by three votes of four
    assert [b.battle for b in old.battles().rows()] == [("q1", "x", "y", "j", -1)]


async def test_a_human_verdict_replaces_a_judges_samples_by_one_calibrated_verdict(tmp_path):
    with OpenAIMock(responder=position_biased) as mock:
        (record,) = await play(tmp_path, mock, ("jay",), {"questions": str(write_questions(tmp_path, ["q1"])),
                                                          "samples": 3, "swap": True})
    store = RunStore.open(tmp_path / "run")
    try:
        assert store.override_review(record.key, "jay", "bob", "ann", "q1", 1)  # a person: ann is better
        battles = {frozenset((b.a, b.b)): winner(b.a, b.b, b.score) for b in Reviews.from_rows(store.read.review_rows()).battles().rows()}
    finally:
        store.close()
    assert battles == {frozenset(("ann", "bob")): "ann", frozenset(("ann", "cid")): "cid", frozenset(("bob", "cid")): "cid"}
