"""The replay backend: replies from a JSONL record or another run, found by match, role and round."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from arena.contract import open_run

from conformance_kit import between, local_only, model_agent  # noqa: F401  (local_only: a fixture)
from helpers import ROOT
from mock_llm import OpenAIMock, body_text

VICUNA80 = ROOT.parent / "shared" / "data" / "prd" / "vicuna80"


def judge(body) -> str:
    text = body_text(body)
    first = between(text, "[Assistant 1]\n", "\n[End of Assistant 1]")
    second = between(text, "[Assistant 2]\n", "\n[End of Assistant 2]")
    if first is None or second is None:
        return "I was not shown two answers."
    return f"Compared.\n{'8 3' if len(first) > len(second) else '3 8'}"


def contestant(body) -> str:
    return "A live answer from the fallback model."


def responder(body) -> str:
    return contestant(body) if "You are Contestant" in body_text(body) else judge(body)


def scenario(tmp_path, agents: dict, questions: str, name: str = "replayed", **entry) -> str:
    raw = {"name": name, "agents": agents, "match": {"turn_timeout": 600},
           "games": [{"game": "pairwise_review", "params": {"questions": questions}, **entry}]}
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


def questions(tmp_path, ids=("q1", "q2")) -> str:
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps({"id": i, "question": f"Question {i}?"}) + "\n" for i in ids), encoding="utf-8")
    return str(path)


def lines(tmp_path, name: str, rows: list[dict]) -> str:
    path = tmp_path / name
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def records(run_dir):
    store = open_run(run_dir)
    try:
        return {r.key: r for r in store.records(status=None)}
    finally:
        store.close()


def test_jsonl_replies_are_found_by_case_role_and_round_whoever_sits_there(run_cli, tmp_path):
    ann = lines(tmp_path, "ann.jsonl", [{"case": "q1", "role": "Contestant", "round": 1, "reply": "Alpha one."},
                                        {"case": "q2", "role": "Contestant", "round": 1, "reply": "Alpha two, longer."}])
    bob = lines(tmp_path, "bob.jsonl", [{"case": "q1", "seat": "Contestant 1", "round": 1, "reply": "Beta first."},
                                        {"case": "q1", "seat": "Contestant 2", "round": 1, "reply": "Beta second."},
                                        {"case": "q2", "round": 1, "reply": "Beta two."}])
    with OpenAIMock(responder=responder) as mock:
        agents = {"ann": {"backend": "replay", "record": ann}, "bob": {"backend": "replay", "record": bob},
                  "judge": model_agent("openai", mock)}
        result = run_cli("run", scenario(tmp_path, agents, questions(tmp_path)), "--run-dir", tmp_path / "run", "--quiet")
        assert result.returncode == 0, result.stderr
        assert not any("You are Contestant" in r.text for r in mock.answered())  # only the judge was asked
        texts = [r.text for r in mock.answered()]
    found = records(tmp_path / "run")
    answers = {(k.split("#")[0], m.sender, m.content) for k, r in found.items()
               for m in r.messages if m.kind == "reply" and m.round == 1}
    assert ("pairwise_review/q1", "Contestant 2", "Beta second.") in answers  # bob's by the seat he sat in
    assert ("pairwise_review/q1", "Contestant 1", "Beta first.") in answers
    assert {("pairwise_review/q1", s, "Alpha one.") for s in ("Contestant 1", "Contestant 2")} <= answers
    # the judge reads the replayed answers (which name no agent: the anonymity filter would hide it)
    assert any("Alpha two, longer." in t and "Beta two." in t for t in texts)


def test_a_turn_the_record_lacks_names_the_match_and_the_turn_or_goes_to_the_fallback(run_cli, tmp_path):
    ann = lines(tmp_path, "ann.jsonl", [{"case": "q1", "role": "Contestant", "round": 1, "reply": "Ann."},
                                        {"case": "q2", "role": "Contestant", "round": 2, "reply": "Too late."}])
    bob = lines(tmp_path, "bob.jsonl", [{"case": c, "round": 1, "reply": "Bob."} for c in ("q1", "q2")])
    with OpenAIMock(responder=responder) as mock:
        agents = {"ann": {"backend": "replay", "record": ann}, "bob": {"backend": "replay", "record": bob},
                  "judge": model_agent("openai", mock)}
        path = scenario(tmp_path, agents, questions(tmp_path), tournament={"role_swap": False})
        result = run_cli("run", path, "--run-dir", tmp_path / "run", "--plain")
        assert result.returncode == 1
        (failed,) = [r for r in records(tmp_path / "run").values() if r.status == "failed"]
        assert failed.key == "pairwise_review/q2#1:Contestant=0+1,Judge=2"
        assert failed.error.endswith(f"has no reply for match {failed.key!r}, seat 'Contestant 1' (Contestant), round 1")
        assert "Traceback" not in result.stdout + result.stderr
        # with a fallback, the live model answers what the record lacks, and only that
        agents["ann"]["fallback"] = model_agent("openai", mock)
        path = scenario(tmp_path, agents, questions(tmp_path), tournament={"role_swap": False})
        mock.reset()
        result = run_cli("run", path, "--run-dir", tmp_path / "again", "--quiet")
        assert result.returncode == 0, result.stderr
        asked = [r for r in mock.answered() if "You are Contestant" in r.text]
        assert len(asked) == 1 and "Question q2?" in asked[0].text


def test_a_record_of_another_scenario_is_refused_in_a_sentence(run_cli, tmp_path):
    quick = ROOT / "scenarios" / "quickstart.yaml"
    assert run_cli("run", quick, "--run-dir", tmp_path / "goods", "--quiet", "--limit", "1").returncode == 0
    with OpenAIMock(responder=responder) as mock:
        agents = {"ann": {"backend": "replay", "record": str(tmp_path / "goods")},
                  "bob": {"backend": "replay", "record": str(tmp_path / "goods")}, "judge": model_agent("openai", mock)}
        path = scenario(tmp_path, agents, questions(tmp_path, ("q1",)), tournament={"role_swap": False})
        result = run_cli("run", path, "--run-dir", tmp_path / "run", "--plain")
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    (record,) = records(tmp_path / "run").values()
    assert "it was recorded for another scenario" in record.error
    assert "which has no entry 'pairwise_review'" in record.error
    # and a record that is no record stops the run before anything is played
    agents["ann"]["record"] = str(tmp_path)
    result = run_cli("run", scenario(tmp_path, agents, questions(tmp_path, ("q1",))), "--run-dir", tmp_path / "x")
    assert result.returncode == 2 and "agent 'ann' cannot replay" in result.stderr
    assert "is a folder without a run" in result.stderr and "Traceback" not in result.stderr


def test_bad_replay_configs_are_said_by_validate(run_cli, tmp_path):
    agents = {"ann": {"backend": "replay", "record": "a.jsonl", "fallback": {"backend": "nope"}},
              "bob": {"backend": "replay", "record": "b.jsonl", "fallback": {"backend": "scripted", "strategy": "fixed",
                                                                              "colour": 1}},
              "judge": {"backend": "replay", "record": "c.jsonl", "speed": 2}}
    result = run_cli("validate", scenario(tmp_path, agents, questions(tmp_path)))
    assert result.returncode == 2, result.stdout + result.stderr
    text = result.stdout + result.stderr
    assert "agents.ann.fallback.backend" in text and "nope" in text
    assert "agents.bob.fallback.colour" in text and "agents.judge.speed" in text


@pytest.mark.skipif(not VICUNA80.is_dir(), reason="PRD's data is not beside the checkout")
def test_prd_vicuna80_generations_are_a_replay_source_as_they_are(run_cli, tmp_path):
    generations = VICUNA80 / "generations"
    with OpenAIMock(responder=judge) as mock:
        agents = {"gpt4": {"backend": "replay", "record": str(generations / "answer_gpt4.jsonl"), "model": "gpt-4"},
                  "claude": {"backend": "replay", "record": str(generations / "answer_claude.jsonl"), "model": "claude"},
                  "judge": model_agent("openai", mock)}
        path = scenario(tmp_path, agents, str(VICUNA80 / "prompts" / "vicuna_questions.jsonl"), name="vicuna80")
        result = run_cli("run", path, "--run-dir", tmp_path / "run", "--quiet", "--limit", "4")
        assert result.returncode == 0, result.stderr
        requests = mock.answered()
    assert len(requests) == 4 * 2  # two matches per question (each order), two comparisons each
    first = json.loads((generations / "answer_gpt4.jsonl").read_text(encoding="utf-8").splitlines()[0])
    question = json.loads((VICUNA80 / "prompts" / "vicuna_questions.jsonl").read_text().splitlines()[0])["text"]
    shown = [r.text for r in requests if question in r.text]
    assert shown and all(first["text"][:200].replace("GPT-4", "[name withheld]")[:80] in t for t in shown)
    for text in shown:
        assert not re.search(r"\b(gpt-4|gpt4|claude)\b", text, re.I)


def test_a_game_of_many_rounds_replays_turn_by_turn_with_no_request(run_cli, tmp_path):
    with OpenAIMock() as mock:  # the mock's own public goods player: coins drawn from what it was sent
        raw = {"name": "goods", "agents": {n: model_agent("openai", mock, model=f"m-{n}") for n in ("ann", "bob", "cid")},
               "games": [{"game": "public_goods", "params": {"rounds": 3, "mode": 2}}],
               "tournament": {"repeats": 2}, "match": {"turn_timeout": 600}}
        (tmp_path / "goods.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        assert run_cli("run", tmp_path / "goods.yaml", "--run-dir", tmp_path / "source", "--quiet").returncode == 0
        asked = mock.count
        assert asked >= 2 * 3 * 3
        result = run_cli("rescore", tmp_path / "source", "-o", tmp_path / "replayed", "--quiet")
        assert result.returncode == 0, result.stderr
        assert mock.count == asked
    exports = [run_cli("export", run).stdout for run in (tmp_path / "source", tmp_path / "replayed")]
    assert exports[0].count("\n") == 2 and exports[0] == exports[1]


def test_lines_without_a_case_play_a_game_that_has_none(run_cli, tmp_path):
    steady = lines(tmp_path, "steady.jsonl", [{"round": r, "reply": json.dumps({"reason": "steady", "coins": r})}
                                                  for r in (1, 2, 3)])
    agents = {"ann": {"backend": "replay", "record": steady}, "bob": {"backend": "replay", "record": steady},
              "cid": {"backend": "scripted", "strategy": "free_rider"}}
    raw = {"name": "goods", "agents": agents, "games": [{"game": "public_goods", "params": {"rounds": 3}}]}
    (tmp_path / "goods.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = run_cli("run", tmp_path / "goods.yaml", "--run-dir", tmp_path / "run", "--quiet")
    assert result.returncode == 0, result.stderr
    (record,) = records(tmp_path / "run").values()
    played = [(e.round, record.agent_of(e.seat), e.action) for e in record.events if e.type == "action"]
    assert sorted(p for p in played if p[1] == "ann") == [(1, "ann", 1), (2, "ann", 2), (3, "ann", 3)]


def test_a_record_line_that_is_no_reply_stops_the_run_before_it_plays(run_cli, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"case": "q1", "reply": "Fine."}\n{"case": "q2", "reply": 7}\n', encoding="utf-8")
    agents = {"ann": {"backend": "replay", "record": str(bad)}, "bob": {"backend": "scripted", "strategy": "fixed",
                                                                         "params": {"replies": ["x"]}},
              "judge": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["8 3"]}}}
    result = run_cli("run", scenario(tmp_path, agents, questions(tmp_path)), "--run-dir", tmp_path / "run")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"agent 'ann' cannot replay: {bad}, line 2: a line needs a reply (or text), a string" in result.stderr
