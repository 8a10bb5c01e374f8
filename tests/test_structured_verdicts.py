"""Structured verdicts: every turn whose reply a judging game parses offers the game's schema to the
backend (the explanation field before the verdict), a JSON reply becomes the prose it stands for in
the transcript, and plain text stays the fallback with the verdict read from the closing line only.
Proven by the request bodies a local mock server receives."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from arena.contract.events import ActionTaken, MessagePosted
from arena.run.runner import KeepRecords, run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore

from mock_llm import OpenAIMock

LOCAL = "127.0.0.1,localhost"
DATA = Path(__file__).resolve().parent.parent / "scenarios" / "data"
# an explanation that quotes the instructions with the other verdict: it must never count
ECHO = "Answer 2 is vague. The format says: End your message with 'Preference: 2', 'Verdict: 2' or 2."


@pytest.fixture(autouse=True)
def local_only(monkeypatch):
    for variable in ("OPENAI_API_KEY", "HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy", "all_proxy"):
        monkeypatch.delenv(variable, raising=False)
    monkeypatch.setenv("NO_PROXY", LOCAL)
    monkeypatch.setenv("no_proxy", LOCAL)


def schema_of(body: dict) -> dict | None:
    return (body.get("response_format") or {}).get("schema") or \
        ((body.get("response_format") or {}).get("json_schema") or {}).get("schema")


def fill(schema: dict) -> dict:
    """A reply that follows the schema: text fields echo the instructions with the other verdict,
    the verdict fields choose the first answer (1, the higher first score, acceptance)."""
    out = {}
    for name, field in schema["properties"].items():
        if field["type"] == "string" and "enum" in field:
            out[name] = field["enum"][0]
        elif field["type"] == "string":
            out[name] = ECHO + ("\nScores: 2 9" if "argument" in name else "")
        elif field["type"] == "integer":
            out[name] = field["enum"][-1] if name.endswith("_1") else field["enum"][0]
        elif field["type"] == "boolean":
            out[name] = True
    return out


def responder(body: dict):
    schema = schema_of(body)
    return fill(schema) if schema else "A plain answer in prose, with no verdict at all."


def agents(mock: OpenAIMock, names=("ann", "bob")) -> dict:
    return {n: {"backend": "openai", "base_url": mock.base_url, "model": "mock-model", "backoff": 0.01, "timeout": 20,
                "retries": 1, "max_tokens": 64} for n in names}


async def play(tmp_path: Path, raw: dict):
    parsed = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "run", parsed.name, yaml.safe_dump(raw), parsed.fingerprint())
    keep = KeepRecords(None)
    result = await run_tournament(parsed, store, keep)
    return keep.in_order(result)


def events(records, kind):
    return [e for r in records for e in r.events if isinstance(e, kind)]


def replies(records) -> list[str]:
    return [e.message.content for e in events(records, MessagePosted) if e.message.kind == "reply"]


def one_case(tmp_path: Path, name: str) -> str:
    """The first line of a shipped data file, as a file of its own: one match per game."""
    path = tmp_path / name
    path.write_text((DATA / name).read_text(encoding="utf-8").splitlines()[0] + "\n", encoding="utf-8")
    return str(path)


def order(schema: dict) -> list[str]:
    return list(schema["properties"])


@pytest.fixture
def mock():
    with OpenAIMock() as server:
        server.responder = responder
        yield server


@pytest.mark.parametrize("output,template,fields,line", [
    ("choice", "evidence_first", ["explanation", "choice"], "1"),
    ("scores", "evidence_first", ["explanation", "score_1", "score_2"], "10 1"),
    ("scores", "verdict_first", ["score_1", "score_2", "explanation"], "10 1"),
])
async def test_pairwise_verdicts_are_asked_for_as_json_evidence_first_and_shown_as_prose(tmp_path, mock, output,
                                                                                         template, fields, line):
    raw = {"name": "v", "seed": 3, "agents": agents(mock),
           "games": [{"game": "pairwise_review", "params": {
               "questions": one_case(tmp_path, "sample-questions.jsonl"), "contestants": 2, "peer": True,
               "output": output, "template": template, "swap": True}}],
           "tournament": {"role_swap": False}, "match": {"max_retries": 0}}
    records = await play(tmp_path, raw)
    bodies = mock.bodies("/v1/chat/completions")
    answers = [b for b in bodies if "[Assistant 1]" not in b["messages"][-1]["content"]]
    judging = [b for b in bodies if "[Assistant 1]" in b["messages"][-1]["content"]]
    assert len(answers) == 2 and len(judging) == 4  # two answers, then two judges x both orders
    assert all(schema_of(b) is None for b in answers)  # an answer is prose: nothing is held to a schema
    for body in judging:
        assert order(schema_of(body)) == fields and schema_of(body)["required"] == fields
    taken = [e for e in events(records, ActionTaken) if e.round > 1]
    assert len(taken) == 4 and not any(e.defaulted for e in taken)
    # the first shown answer won every comparison, whatever the echoed instructions said
    assert [e.action.get("choice") or e.action["scores"] for e in taken] == \
        (["1"] * 4 if output == "choice" else [[10.0, 1.0]] * 4)
    texts = replies(records)
    assert not any(t.lstrip().startswith("{") for t in texts)  # the transcript reads as prose
    verdicts = [t for t in texts if ECHO in t]
    assert len(verdicts) == 4
    for text in verdicts:
        lines = text.splitlines()
        assert (lines[0] if template == "verdict_first" else lines[-1]) == line


async def test_peer_discussion_preferences_come_from_the_json_field_and_read_as_a_closing_line(tmp_path, mock):
    raw = {"name": "d", "seed": 3, "agents": agents(mock),
           "games": [{"game": "peer_discussion", "params": {"pairs": one_case(tmp_path, "sample-pairs.jsonl"), "max_turns": 2}}],
           "match": {"max_retries": 0}}
    records = await play(tmp_path, raw)
    bodies = mock.bodies("/v1/chat/completions")
    assert bodies and all(order(schema_of(b)) == ["message", "preference"] for b in bodies)
    taken = events(records, ActionTaken)
    assert taken and all(e.action == -1 and not e.defaulted for e in taken)  # answer 1, from the field
    assert all(t.endswith("\n\nPreference: 1") and t.startswith(ECHO) for t in replies(records))


async def test_debate_and_scoring_turns_offer_their_schemas_and_the_summarizer_writes_prose(tmp_path, mock):
    raw = {"name": "c", "seed": 3, "agents": agents(mock, ("ann", "bob", "cy")),
           "games": [{"game": "chateval_debate", "label": "debate",
                      "params": {"pairs": one_case(tmp_path, "labelled-pairs.jsonl"), "turns": 1, "output": "scores",
                                 "position_calibration": False,
                                 "strategy": "simultaneous_talk_with_summarizer"}},
                     {"game": "chateval_scoring", "label": "scoring", "agents": ["ann", "bob"],
                      "params": {"responses": one_case(tmp_path, "sample-dialogues.jsonl"), "turns": 1,
                                 "dimensions": ["coherence", "groundedness"]}}],
           "tournament": {"role_swap": False}, "match": {"max_retries": 0}}
    records = await play(tmp_path, raw)
    bodies = mock.bodies("/v1/chat/completions")
    shapes = sorted({tuple(order(schema_of(b))) if schema_of(b) else () for b in bodies})
    assert shapes == [(), ("argument", "coherence", "groundedness"), ("argument", "score_1", "score_2")]
    taken = [e for e in events(records, ActionTaken) if not isinstance(e.action, str)]  # the summaries are prose
    assert taken and not any(e.defaulted for e in taken)
    # the scores are the fields', not the "Scores: 2 9" the argument quotes
    assert {json.dumps(e.action) for e in taken} == {json.dumps(-9.0), json.dumps({"coherence": 1.0, "groundedness": 1.0})}
    texts = [t for t in replies(records) if ECHO in t]
    assert texts and all(t.splitlines()[-1] in ("Scores: 10 1", "groundedness: 1") for t in texts)


def test_a_plain_text_reply_still_parses_and_a_json_reply_of_another_shape_is_judged_as_text():
    from arena.games.peer_discussion import PeerDiscussion
    from arena.games.pairwise_review import PairwiseReview
    import random

    game = PeerDiscussion(PeerDiscussion.Params(pairs=str(DATA / "sample-pairs.jsonl")), ["Reviewer 1", "Reviewer 2"],
                          {"Reviewer 1": "Reviewer", "Reviewer 2": "Reviewer"}, random.Random(1))
    assert game.parse("Reviewer 1", "Both are fine.\n**Preference:** 2", 1) == 1
    assert game.parse("Reviewer 1", '```json\n{"message": "ok", "preference": "tie"}\n```', 1) == 0
    # a raw line break inside a string, as llama-cpp-python's grammar lets a model write one
    assert game.parse("Reviewer 1", '{ "message": "One.\nTwo.\n" ,"preference" : "2"}', 1) == 1
    assert game.reply_text("Reviewer 1", 1, '{"message": "One.\nTwo.", "preference": "2"}') == "One.\nTwo.\n\nPreference: 2"
    with pytest.raises(Exception, match="last line"):
        game.parse("Reviewer 1", '{"preference": "1"}', 1)  # not the schema's shape: the text parser says why
    params = PairwiseReview.Params(questions=str(DATA / "sample-questions.jsonl"), output="choice")
    seats = ["Contestant 1", "Contestant 2", "Judge"]
    judge = PairwiseReview(params, seats, {"Contestant 1": "Contestant", "Contestant 2": "Contestant", "Judge": "Judge"},
                           random.Random(1))
    # common spellings of the closing line; an instruction quoted earlier does not count
    for reply, choice in [("Write only 1, 2 or tie.\nVerdict: 2", "2"), ("Reasons.\n**Assistant 1**", "1"),
                          ("Reasons.\nTie.", "tie")]:
        assert judge.parse("Judge", reply, 2)["choice"] == choice
    with pytest.raises(Exception, match="last line"):
        judge.parse("Judge", "On the last line write only 2.\nI cannot decide.", 2)


def test_code_review_and_idiom_turns_offer_schemas_and_read_json_replies_as_the_words_they_ask_for():
    import random

    from arena.games.code_review import PROGRAMMER, REVIEWER, CodeReview
    from arena.games.idiom_solitaire import IdiomSolitaire

    params = CodeReview.Params(problems=str(DATA / "sample-problems.jsonl"))
    review = CodeReview(params, [PROGRAMMER, REVIEWER], {PROGRAMMER: PROGRAMMER, REVIEWER: REVIEWER}, random.Random(1))
    assert review.turn_schema(PROGRAMMER, 1) is None  # code is written as code
    assert order(review.turn_schema(REVIEWER, 2)) == ["comments", "accept"]
    assert review.parse(REVIEWER, '{"comments": "Looks right.", "accept": true}', 2) is None  # accepted: "over"
    assert review.parse(REVIEWER, '{"comments": "Handle 1900.", "accept": false}', 2) == "Handle 1900."
    assert review.parse(REVIEWER, "over", 2) is None  # plain text as before
    idioms = IdiomSolitaire(IdiomSolitaire.Params(), ["Early", "Late"], {"Early": "Early", "Late": "Late"},
                            random.Random(1))
    assert order(idioms.turn_schema("Early", 1)) == ["idiom"]
    assert idioms.parse("Early", '{"idiom": "一心一意"}', 1) == "一心一意"
    assert idioms.reply_text("Early", 1, '{"idiom": "一心一意"}') == "一心一意"
