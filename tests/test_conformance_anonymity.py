"""Judges do not learn who they judge, and read the referee's own text as it was written: with the
anonymity filter (on by default: agent names, their models and vendor names scrubbed from what agents
wrote) and contestants whose words say who they are, no request a judge is sent, seated (pairwise
review, peer discussion) or outside the match (llm_judge, through the match's desk), names anyone;
the rules, the questions and a dataset's answers reach it unaltered: a few MT-Bench questions and
LFQA cases through both mocks, and every MT-Bench question (both turns) and every LFQA case through
the OpenAI mock, every request recorded."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from arena.run.scenario import VENDOR_TERMS

from conformance_kit import (
    BACKENDS,
    between,
    current_prompt,
    local_only,  # noqa: F401  (an autouse fixture)
    mock_server,
    model_agent,
    play,
    replies,
    scenario,
    seat_turns,
)
from helpers import ROOT
from mock_llm import body_text

both = pytest.mark.parametrize("backend", BACKENDS)
openai_only = pytest.mark.parametrize("backend", ["openai"])  # a whole data set runs once; the few cases run on both

# who is behind each model: the mock reads the request's model, as a model knows its own name
WHO = {"gpt-4o": ("alice", "OpenAI"), "claude-3-5-sonnet": ("bob", "Anthropic"), "mistral-large": ("carol", "Mistral")}
WITHHELD = "[name withheld]"


def names_in(body) -> list[str]:
    """Every agent name, model or vendor name a request's text holds (its own `model` field aside)."""
    text = body_text(body).lower()
    terms = [t for agent, vendor in WHO.values() for t in (agent, vendor)] + list(WHO) + list(VENDOR_TERMS)
    return [t for t in terms if re.search(rf"(?<![a-z]){re.escape(t.lower())}", text)]


def signed(body, words: str) -> str:
    agent, vendor = WHO[body["model"]]
    return f"Answer by {body['model']} ({vendor}), that is {agent}: {words}"


def pairwise_reply(body) -> str:
    text = body_text(body)
    if "Write your answer." in current_prompt(body):
        return signed(body, "boil it for " + ("eight minutes, then cool it in cold water." if "gpt" in body["model"]
                                              else "a while."))
    first = between(text, "[Assistant 1]\n", "\n[End of Assistant 1]") or ""
    second = between(text, "[Assistant 2]\n", "\n[End of Assistant 2]") or ""
    return "The longer one is better.\n" + ("8 3" if len(first) > len(second) else "3 8")


@both
async def test_seated_judges_read_no_names_of_the_contestants(backend, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": "How do I boil an egg?"}) + "\n", encoding="utf-8")
    with mock_server(backend, pairwise_reply) as mock:
        agents = {agent: model_agent(backend, mock, model=model) for model, (agent, _) in WHO.items()}
        raw = scenario("anonymous", agents, "pairwise_review", {"questions": str(questions), "peer": True},
                       tournament={"role_swap": False}, anonymity={})
        raw["games"][0]["agents"] = ["alice", "bob", "carol"]  # two contestants who also judge, and a judge
        (record,) = await play(tmp_path, raw)
        turns, _ = seat_turns(record, mock.answered())
    answers = [m.content for m in replies(record) if m.round == 1]
    assert len(answers) == 2 and all(names_in({"messages": [{"content": a}]}) for a in answers)  # they did sign
    judging = [t for t in turns if t.round > 1]
    assert len(judging) == 3 * 2  # three judges, one pair in both orders
    for turn in judging:
        assert names_in(turn.request.body) == [], (turn.seat, turn.round)
        assert turn.text.count(WITHHELD) >= 2  # the signatures, scrubbed
        assert "boil it for eight minutes, then cool it in cold water." in turn.text  # the substance is all there
    assert {r[3] for r in record.reviews} == {"alice", "bob", "carol"}  # and they judged


def code_reply(body) -> str | dict:
    text = body_text(body)
    if "You are the programmer" in text:
        return "```python\ndef add(a, b):\n    # written by alice, running gpt-4o from OpenAI\n    return a + b\n```"
    if "You are the code reviewer" in text:
        return "over"
    found = re.search(r"Score each of (.*?) on a scale", text)
    return {seat.strip(): {"evaluation": "fine", "score": 7} for seat in found.group(1).split(",")}


@both
async def test_the_outside_judge_reads_no_names_either(backend, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps({"id": "add", "entry_point": "add", "prompt": "def add(a, b):\n",
                                    "test": "def check(candidate):\n    assert candidate(1, 2) == 3\n"}) + "\n")
    with mock_server(backend, code_reply) as mock:
        agents = {agent: model_agent(backend, mock, model=model) for model, (agent, _) in WHO.items()}
        raw = scenario("anonymous-judge", agents, "code_review", {"problems": str(problems)},
                       referee=[{"use": "llm_judge", "agent": "carol"}], tournament={"role_swap": False}, anonymity={})
        raw["games"][0]["agents"] = ["alice", "bob"]
        (record,) = await play(tmp_path, raw)
        turns, outside = seat_turns(record, mock.answered())
    assert record.metrics["judge"] == {"Programmer": 7.0, "Reviewer": 7.0}
    (brief,) = outside
    assert names_in(brief.body) == [] and WITHHELD in brief.text and "return a + b" in brief.text
    reviewer = next(t for t in turns if t.seat == "Reviewer")
    assert names_in(reviewer.request.body) == [] and WITHHELD in reviewer.text  # the other seat did not learn it either


# -- the referee's own text, whole; every spelling of a name, gone ------------------------------------------
# Agents whose words say who they are in every spelling the filter must catch: the agent's model joined,
# spaced and dashed ("my-finetune"), a short id ("o3"), fullwidth letters, and the names themselves. The
# judge agent is called `judge`, as in scenarios/faireval-bpc.yaml: its seat's rules say "You are Judge".
DATA = ROOT.parent / "shared" / "data"
MODELS = {"my-finetune": "alice", "o3": "bob", "gpt-4o": "judge"}
SIGNATURE = ("Signed {agent}: I am MyFinetune, also written my finetune or my-finetune; "
             "a cousin of \uff27\uff30\uff34-\uff14 and of o3, made at OpenAI.")
SPELLINGS = [r"MyFinetune", r"my finetune", r"my-finetune", r"\bo3\b", "\uff27\uff30\uff34", r"\bOpenAI\b", r"\balice\b",
             r"\bbob\b", r"\bjudge\b"]


def spellings_in(text: str, material: list[str]) -> list[str]:
    """The spellings of a name the text holds once the referee's own material is taken out of it."""
    for passage in sorted(material, key=len, reverse=True):
        text = text.replace(passage, "")
    return [s for s in SPELLINGS if re.search(s, text, re.IGNORECASE)]


def mt_bench_questions(tmp_path, ids: set[int] | None = None) -> tuple[Path, dict[str, str]]:
    """MT-Bench's questions as a question set: each of a question's two turns a question of its own."""
    texts = {}
    for line in (DATA / "mt_bench" / "question.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        if ids is None or raw["question_id"] in ids:
            for n, turn in enumerate(raw["turns"], start=1):
                texts[f"{raw['question_id']}-{n}"] = turn
    path = tmp_path / "mt_bench.jsonl"
    path.write_text("".join(json.dumps({"id": k, "question": q}) + "\n" for k, q in texts.items()), encoding="utf-8")
    return path, texts


def echoing_contestant(body) -> str:
    """A contestant that repeats the question on a line of its own (the referee's words: they stay), then
    answers and signs (its own: they go); a judge that scores."""
    last = body_text({"messages": body["messages"][-1:]})  # this turn's prompt (Anthropic: after the rules)
    asked = last[max(last.find("Question: "), 0):]  # the first: a question may quote "Question: " itself
    if asked.startswith("Question: ") and asked.endswith("\n\nWrite your answer."):
        question = asked.removeprefix("Question: ").removesuffix("\n\nWrite your answer.")
        return f"{question}\n\nMy answer: it depends.\n\n" + SIGNATURE.format(agent=MODELS[body["model"]])
    return "Both are fine.\n7 7"


async def play_pairwise(backend, tmp_path, questions: Path, concurrency: int = 1):
    with mock_server(backend, echoing_contestant) as mock:
        agents = {agent: model_agent(backend, mock, model=model) for model, agent in MODELS.items()}
        raw = scenario("referee-text", agents, "pairwise_review", {"questions": str(questions), "contestants": 2},
                       tournament={"role_swap": False}, concurrency=concurrency)
        records = await play(tmp_path, raw)  # no `anonymity` block: the filter is on by default
        return records, mock.answered()


def judged(records, requests, texts):
    """Each match's judge turns (its requests told apart from other matches' by its question), with the
    rules that seat was given."""
    for record in records:
        question = texts[record.params["case"]]
        mine = [r for r in requests if f"Question: {question}\n\nWrite your answer." in r.text
                or f"[Question]\n{question}\n\n[Assistant 1]" in r.text]
        turns, outside = seat_turns(record, mine)
        assert outside == []
        rules = next(m.content for m in record.messages if m.kind == "rules" and m.recipients == ("Judge",))
        yield record, rules, [t for t in turns if t.seat == "Judge"]


@both
async def test_the_question_and_rules_reach_the_judge_as_written_and_no_spelling_of_a_name_does(backend, tmp_path):
    """A few MT-Bench questions through the mock: the two whose text names a vendor (98: "GPT-4", 138:
    "Google"), and one that names none. The contestants quote the question back, then sign."""
    questions, texts = mt_bench_questions(tmp_path, {81, 98, 138})
    records, requests = await play_pairwise(backend, tmp_path, questions)
    assert len(records) == len(texts) == 6
    for record, rules, turns in judged(records, requests, texts):
        question = texts[record.params["case"]]
        assert rules.startswith("You are Judge, a careful and impartial reviewer.")  # not "You are [name withheld]"
        assert len(turns) == 2  # the pair in both orders
        for turn in turns:
            text = turn.text
            assert rules in text
            assert text.count(question) == 3  # asked, and quoted back by both contestants: all as written
            assert f"[Question]\n{question}\n\n[Assistant 1]\n{question}\n\nMy answer: it depends.\n\n" in text
            assert spellings_in(text, [question, rules]) == [], (record.key, text)
            assert text.count(WITHHELD) == 2 * 7  # each signature: alice or bob, the model's three spellings, ＧＰＴ-４, o3, OpenAI
    # and what the contestants wrote is kept as they wrote it, for the record
    assert any("\uff27\uff30\uff34-\uff14" in m.content for r in records for m in replies(r))


@openai_only
async def test_every_mt_bench_question_reaches_the_judge_unaltered(backend, tmp_path):
    """All 80 questions, both turns of each (160 matches, 640 requests), through the mock."""
    questions, texts = mt_bench_questions(tmp_path)
    records, requests = await play_pairwise(backend, tmp_path, questions, concurrency=16)
    assert len(records) == len(texts) == 160
    checked = 0
    for record, rules, turns in judged(records, requests, texts):
        question = texts[record.params["case"]]
        for turn in turns:
            assert rules in turn.text
            assert turn.text.count(question) == 3 and f"[Question]\n{question}\n\n[Assistant 1]\n" in turn.text
            assert spellings_in(turn.text, [question, rules]) == []
            checked += 1
    assert checked == 320


def lfqa_pairs(tmp_path, limit: int | None = None, naming_only: bool = False) -> tuple[Path, list[dict]]:
    """LFQA's expert file as it is (every line, or the first lines), or only the cases whose texts name a vendor."""
    lines = (DATA / "prd" / "lfqa" / "experts_pairwise_human_preferences.jsonl").read_text(encoding="utf-8").splitlines()
    rows = [json.loads(line) for line in lines if line.strip()]
    if naming_only:
        distinct = {(r["question"], r["answer_a"], r["answer_b"]): r for r in rows
                    if re.search(r"\bgoogle\b", r["question"] + r["answer_a"] + r["answer_b"], re.I)}
        rows = list(distinct.values())[:3]
    rows = rows[:limit]
    path = tmp_path / "lfqa.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path, rows


def echoing_reviewer(body) -> str:
    """A reviewer that quotes a line of each answer (the dataset's words: they stay), signs, and prefers."""
    text = body_text(body)
    quoted = [between(text, f"[Answer {n}]\n", f"\n[End of Answer {n}]") or "" for n in (1, 2)]
    lines = [q.splitlines()[0] for q in quoted if q.strip()]
    return "\n".join(lines + [SIGNATURE.format(agent=MODELS[body["model"]]), "Preference: 1"])


async def play_lfqa(backend, tmp_path, pairs: Path, concurrency: int = 1):
    with mock_server(backend, echoing_reviewer) as mock:
        agents = {MODELS[m]: model_agent(backend, mock, model=m) for m in ("my-finetune", "o3")}
        raw = scenario("lfqa", agents, "peer_discussion", {"pairs": str(pairs), "max_turns": 2, "stop": "turns"},
                       tournament={"role_swap": False}, concurrency=concurrency)
        records = await play(tmp_path, raw)
        return records, mock.answered()


def assert_lfqa_material_whole(records, requests, rows) -> int:
    cases = {}
    for r in rows:
        cases.setdefault((r["question"], r["answer_a"], r["answer_b"]), r)
    material = {f"[Question]\n{q}\n\n[Answer 1]\n{a}\n[End of Answer 1]\n\n[Answer 2]\n{b}\n[End of Answer 2]": (q, a, b)
                for q, a, b in cases}
    checked = 0
    for record in records:
        given = "\n".join(m.content for m in record.messages if m.kind in ("rules", "prompt"))
        (block,) = [b for b in material if b in given]  # the match's case, as the referee wrote it
        mine = [r for r in requests if block in r.text]
        turns, outside = seat_turns(record, mine)
        rules = [m.content for m in record.messages if m.kind == "rules"]
        prompts = [m.content for m in record.messages if m.kind == "prompt"]  # the referee's alone: no reply quoted
        for turn in turns:
            whole = [block for block in material if block in turn.text]
            assert len(whole) == 1, (record.key, turn.seat, turn.round)  # the case's question and answers, as written
            assert all(r in turn.text for r in rules if r.startswith(f"You are {turn.seat},"))
            own = [m.content for m in replies(record, turn.seat)]  # a seat gets its own words back as it wrote them
            assert spellings_in(turn.text, [*prompts, *material[whole[0]], *rules, *own]) == [], (record.key, turn.text)
            if turn.round > 1:  # what the others said came through, its signatures withheld
                assert WITHHELD in turn.text
            checked += 1
    return checked


@both
async def test_lfqa_texts_that_name_a_vendor_reach_the_reviewers_unaltered(backend, tmp_path):
    """Three LFQA cases whose question or answers say "google": the reviewers quote them and sign."""
    pairs, rows = lfqa_pairs(tmp_path, naming_only=True)
    records, requests = await play_lfqa(backend, tmp_path, pairs)
    assert len(records) == 3
    assert assert_lfqa_material_whole(records, requests, rows) == 3 * 4  # two initial reviews, two turns of discussion


@openai_only
async def test_every_lfqa_text_reaches_the_reviewers_unaltered(backend, tmp_path):
    """LFQA's whole expert file (260 judgments, 140 distinct cases), through the mock."""
    pairs, rows = lfqa_pairs(tmp_path)
    records, requests = await play_lfqa(backend, tmp_path, pairs, concurrency=16)
    assert len(records) == len({(r["question"], r["answer_a"], r["answer_b"]) for r in rows})
    assert assert_lfqa_material_whole(records, requests, rows) == 4 * len(records)


def debater_or_summarizer(body) -> str:
    """ChatEval's debaters quote a line of each answer and sign; the summarizer, who reads them, signs too."""
    text = body_text(body)
    signature = SIGNATURE.format(agent=MODELS[body["model"]])
    if text.endswith("Summarize this turn of the debate."):
        return f"Both reviewers prefer Answer 1.\n{signature}"
    quoted = [between(text, f"[Answer {n}]\n", f"\n[End of Answer {n}]") or "" for n in (1, 2)]
    return "\n".join([q.splitlines()[0] for q in quoted if q.strip()] + [signature, "Verdict: 1"])


@both
async def test_a_debate_and_its_summary_carry_the_case_as_written_and_no_name(backend, tmp_path):
    """ChatEval's debate with a summarizer over the LFQA cases that say "google": every debater and the
    summarizer get the question and answers as written, and no spelling of anyone's name."""
    pairs, rows = lfqa_pairs(tmp_path, naming_only=True)
    with mock_server(backend, debater_or_summarizer) as mock:
        agents = {agent: model_agent(backend, mock, model=model) for model, agent in MODELS.items()}
        raw = scenario("debate", agents, "chateval_debate",
                       {"pairs": str(pairs), "strategy": "simultaneous_talk_with_summarizer", "turns": 2},
                       tournament={"role_swap": False})
        records = await play(tmp_path, raw)
        requests = mock.answered()
    assert len(records) == 3
    assert assert_lfqa_material_whole(records, requests, rows) == 3 * (2 + 2 + 2)  # two debaters and a summary, two turns


def scorer(body) -> str:
    """A ChatEval scorer that quotes the response's first line (the dataset's words) and signs."""
    text = body_text(body)
    dimensions = re.findall(r"'(\w+): N'", text)
    quoted = (between(text, "[Response]\n", "\n[End of Response]") or "").splitlines()[:1]
    return "\n".join(quoted + [SIGNATURE.format(agent=MODELS[body["model"]])] + [f"{d}: 3" for d in dimensions])


@openai_only
async def test_every_mt_bench_dialogue_and_reference_answer_reaches_the_scorers_unaltered(backend, tmp_path):
    """ChatEval's scoring over all 80 MT-Bench questions (both turns as the dialogue), each scoring GPT-4's
    reference answer where MT-Bench has one (30), a fixed reply otherwise: the dataset's text, as written."""
    references = {}
    for line in (DATA / "mt_bench" / "reference_answer_gpt-4.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        references[raw["question_id"]] = raw["choices"][0]["turns"][0]
    cases = {}
    for line in (DATA / "mt_bench" / "question.jsonl").read_text(encoding="utf-8").splitlines():
        raw = json.loads(line)
        cases[str(raw["question_id"])] = {"id": str(raw["question_id"]), "context": raw["turns"],
                                          "response": references.get(raw["question_id"], "I would rather not say."),
                                          "source": "gpt-4"}
    path = tmp_path / "responses.jsonl"
    path.write_text("".join(json.dumps(c) + "\n" for c in cases.values()), encoding="utf-8")
    with mock_server(backend, scorer) as mock:
        agents = {MODELS[m]: model_agent(backend, mock, model=m) for m in ("my-finetune", "o3")}
        raw = scenario("scoring", agents, "chateval_scoring", {"responses": str(path), "turns": 2},
                       tournament={"role_swap": False}, concurrency=16)
        records = await play(tmp_path, raw)
        requests = mock.answered()
    assert len(records) == 80 and len(references) == 30
    checked = 0
    for record in records:
        case = cases[record.params["case"]]
        block = "[Dialogue]\n" + "\n".join(case["context"]) + f"\n[End of Dialogue]\n\n[Response]\n{case['response']}\n[End of Response]"
        turns, outside = seat_turns(record, [r for r in requests if block in r.text])
        referee = [m.content for m in record.messages if m.kind in ("rules", "prompt")]
        for turn in turns:
            own = [m.content for m in replies(record, turn.seat)]
            assert block in turn.text and spellings_in(turn.text, [*referee, *own]) == [], (record.key, turn.seat)
            checked += 1
    assert checked == 80 * 2 * 2  # two scorers, two turns
