"""Every built-in game, played by model agents against a local server that records what they are
sent (tests/mock_llm.py), through the OpenAI and the Anthropic API alike.

Each mock answers as a model would, from the request's text and nothing else: it finds the
question, the answers, the idiom chain, the code under review or the text to translate in what
it was sent, and its replies take the game through all its phases. Then every recorded request
is checked against the run store: it carries the seat's whole conversation up to that turn, in
order, nothing the seat was not meant to see, and, named game by game, what the seat must
decide on at that turn.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from itertools import permutations

import pytest

from arena.games.code_review import extract_code
from arena.games.idiom_solitaire import successors

from conformance_kit import (
    BACKENDS,
    actions,
    assert_conversation,
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
from mock_llm import body_text

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


def token(text: str) -> str:
    """A mark that makes each reply's words its own, so a test can tell who could have read them."""
    return hashlib.sha256(text.encode()).hexdigest()[:10]


def own_turns(body) -> int:
    """How many times this seat has spoken already: its assistant turns."""
    return sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")


def judge_verdict(text: str) -> dict:
    """An outside judge's answer: every seat it is asked about, scored, with a reason."""
    found = re.search(r"Score each of (.*?) on a scale of (\d+) to (\d+)", text)
    if not found:
        return {"error": "no seats to score"}
    seats, high = [s.strip() for s in found.group(1).split(",")], int(found.group(3))
    return {seat: {"evaluation": f"{seat} did what the brief describes", "score": high - 2 - i}
            for i, seat in enumerate(seats)}


# -- peer discussion ------------------------------------------------------------------------------
QUESTION = "Why does bread go stale when it is left out?"
ANSWER_A = "Starch molecules recrystallise as the loaf cools and dries, and the crumb turns firm."
ANSWER_B = "Because air is bad for it."


def pairs_file(tmp_path) -> str:
    path = tmp_path / "pairs.jsonl"
    path.write_text(json.dumps({"id": "p1", "question": QUESTION, "answer_a": ANSWER_A, "answer_b": ANSWER_B,
                                "label": -1}) + "\n", encoding="utf-8")
    return str(path)


def discussion_reply(body) -> str:
    """Reviewer 1 backs the longer answer throughout; Reviewer 2 backs the other until it has heard
    Reviewer 1 three times, then comes round."""
    text = body_text(body)
    seat = re.search(r"You are (Reviewer \d)", text).group(1)
    other = re.search(r"\(the other is (Reviewer \d)\)", text).group(1)
    question = between(text, "[Question]\n", "\n\n[Answer 1]")
    first = between(text, "[Answer 1]\n", "\n[End of Answer 1]")
    second = between(text, "[Answer 2]\n", "\n[End of Answer 2]")
    if question is None or first is None or second is None:
        return "I was not shown the question and both answers."
    longer = "1" if len(first) > len(second) else "2"
    heard = re.findall(rf"{other} said:\n.*?Preference: (1|2|tie)", text, re.S)
    if seat == "Reviewer 1":
        preference = longer
    else:
        preference = heard[-1] if len(heard) >= 3 else {"1": "2", "2": "1"}[longer]
    criteria = " I judged unsupported claims first." if "unsupported information" in text else ""
    return (f"{seat}, message {own_turns(body) + 1} [{token(text)}]: the question has {len(question.split())} words; "
            f"answer 1 has {len(first.split())}, answer 2 has {len(second.split())}.{criteria} "
            f"I have heard {other} {len(heard)} times.\nPreference: {preference}")


async def test_peer_discussion_keeps_the_material_in_every_turn(backend, tmp_path):
    with mock_server(backend, discussion_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock)}
        (record,) = await play(tmp_path, scenario("discussion", agents, "peer_discussion",
                                                  {"pairs": pairs_file(tmp_path), "case": "p1", "max_turns": 4}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    # both review, then they take turns until Reviewer 2 comes round at the fourth turn of talk
    assert [(t.round, t.seat) for t in turns] == [(1, "Reviewer 1"), (1, "Reviewer 2"), (2, "Reviewer 1"),
                                                  (3, "Reviewer 2"), (4, "Reviewer 1"), (5, "Reviewer 2")]
    (outcome,) = [m.data for m in record.messages if m.kind == "notice"]
    assert outcome["agreed"] and outcome["outcome"] == -1 and outcome["reviewers"]["Reviewer 2"]["altered"]
    for turn in turns:
        assert_conversation(record, turn)
        for fact in (QUESTION, ANSWER_A, ANSWER_B, "unsupported information (anything without support counts as false)"):
            assert fact in turn.text, (turn.seat, turn.round, fact)
        other = "Reviewer 2" if turn.seat == "Reviewer 1" else "Reviewer 1"
        heard = replies(record, other, before=turn.round)
        if turn.round > 1:
            assert heard[-1].content in turn.text  # the other's last review, which this turn answers
            assert f"Remember: you are {turn.seat}, and you answer {other}." in turn.asked
        else:
            assert not heard and f"{other} said:" not in turn.text  # the first reviews are written alone
        for mine in replies(record, turn.seat, before=turn.round):
            assert mine.content in turn.text


# -- public goods -------------------------------------------------------------------------------
def public_goods_reply(body) -> dict:
    text = body_text(body)
    seat = re.search(r"You are (Player \d+)", text).group(1)
    endowment = int(re.search(r"each player receives (\d+) coins", text).group(1))
    round_ = int(re.findall(r"Round (\d+) of \d+: you receive", text)[-1])
    reports = re.findall(r"Round \d+ is over: ([^.]*(?:\.\d+)?[^.]*)\.", text)
    coins = (3 * round_ + int(seat.split()[-1])) % (endowment + 1)
    return {"reason": f"{seat}, round {round_}, last report: {reports[-1] if reports else 'none yet'}", "coins": coins}


def pool_income(alpha: float, contributions: list[int]) -> str:
    value = alpha * sum(contributions) / len(contributions)
    return f"{value:.2f}".rstrip("0").rstrip(".")


@pytest.mark.parametrize("mode", [1, 2])
async def test_public_goods_rounds_carry_the_endowment_and_the_last_report(backend, mode, tmp_path):
    with mock_server(backend, public_goods_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        (record,) = await play(tmp_path, scenario("goods", agents, "public_goods",
                                                  {"rounds": 3, "endowment": 8, "alpha": 1.5, "mode": mode}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside and len(turns) == 3 * 3
    taken = {(a.round, a.seat): a.action for a in actions(record)}
    for turn in turns:
        assert_conversation(record, turn)
        assert "each player receives 8 coins" in turn.text and "multiplied by 1.5 and shared equally among all 3" in turn.text
        assert turn.asked.startswith(f"Round {turn.round} of 3: you receive 8 coins.")
        if turn.round == 1:
            assert "is over" not in turn.text
            continue
        last = [taken[(turn.round - 1, s)] for s in ("Player 1", "Player 2", "Player 3")]
        if mode == 1:
            report = f"Round {turn.round - 1} is over: the pool paid you {pool_income(1.5, last)} coins."
        else:
            report = f"Round {turn.round - 1} is over: the players put in {sorted(last, reverse=True)} coins (largest first)."
        assert report in turn.text
        others = [m for m in replies(record) if m.sender != turn.seat]
        assert not any(m.content in turn.text for m in others)  # contributions are private
    # the model read the report: its reason quotes it
    second = next(m for m in replies(record, "Player 1") if m.round == 2)
    assert "round 2, last report: " + ("the pool paid you" if mode == 1 else "the players put in") in second.content


# -- idiom solitaire ------------------------------------------------------------------------------
def idiom_reply(body) -> str:
    """The chain as the prompt gives it; an unused idiom that connects, the one with the most ways on."""
    prompt = current_prompt(body)
    chain = re.findall(r"「(.{4})」", between(prompt, "The chain so far", "The last idiom") or "")
    if not chain:
        return "不知"
    options = [i for i in successors(chain[-1][-1], False) if i not in chain]
    if not options:
        return "不知"
    return max(sorted(options), key=lambda i: len([n for n in successors(i[-1], False) if n not in chain and n != i]))


async def test_idiom_solitaire_shows_the_whole_chain_at_every_move(backend, tmp_path):
    with mock_server(backend, idiom_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock)}
        (record,) = await play(tmp_path, scenario("idioms", agents, "idiom_solitaire", {"max_moves": 6},
                                                  tournament={"role_swap": False}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside and [t.seat for t in turns] == ["Early", "Late"] * 3
    assert record.payoffs == {"Early": 0.5, "Late": 0.5} and record.metrics["hits"] == {"Early": 3.0, "Late": 3.0}
    (final,) = [m.data for m in record.messages if m.kind == "notice" and "chain" in (m.data or {})]
    chain = final["chain"]
    assert len(chain) == 7 and len(set(chain)) == 7 and all(b[0] == a[-1] for a, b in zip(chain, chain[1:]))
    played = [a.action for a in actions(record)]
    assert chain[1:] == played
    for k, turn in enumerate(turns):
        assert_conversation(record, turn)
        so_far = " → ".join(f"「{i}」" for i in chain[: k + 1])
        prompt = turn.asked
        assert prompt.startswith(f"Move {k + 1} of at most 6. The chain so far, none of which may be used again: "
                                 f"{so_far}. The last idiom is 「{chain[k]}」."), (turn.seat, turn.round)
        assert f"starting with 「{chain[k][-1]}」" in prompt
        assert f"The game starts with 「{chain[0]}」" in turn.text and "after 6 moves without a mistake" in turn.text


# -- code review --------------------------------------------------------------------------------------
PROBLEM = {"id": "add", "entry_point": "add",
           "prompt": 'def add(a: int, b: int) -> int:\n    """Return the sum of a and b.\n    >>> add(2, 3)\n    5\n    """\n',
           "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n    assert candidate(-1, 1) == 0\n"}


def code_review_reply(body) -> str | dict:
    text = body_text(body)
    if "You are the programmer" in text:
        signature = between(text, "Problem:\n", "\n\nWrite your solution.").rstrip() + "\n"
        fixes = re.findall(r"`(return [^`]+)`", text)
        body_line = fixes[-1] if "Revise your solution" in current_prompt(body) and fixes else "return None"
        return f"```python\n{signature}    {body_line}  # [{token(text)}]\n```"
    if "You are the code reviewer" in text:
        latest = text.rsplit("Programmer said:\n", 1)[-1].split("\n\nReview the programmer's latest code")[0]
        if "return None" in latest:
            return f"Correctness [{token(text)}]: the function returns None whatever it is given. Use `return a + b`."
        return "over"
    return judge_verdict(text)


async def test_code_review_seats_and_the_judge_see_the_latest_code_and_review(backend, tmp_path):
    problems = tmp_path / "problems.jsonl"
    problems.write_text(json.dumps(PROBLEM) + "\n", encoding="utf-8")
    with mock_server(backend, code_review_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock), "judge": model_agent(backend, mock)}
        raw = scenario("review", agents, "code_review", {"problems": str(problems), "max_reviews": 3},
                       referee=[{"use": "execution", "limits": {"wall_seconds": 30, "cpu_seconds": 10}},
                                {"use": "llm_judge", "agent": "judge"}],
                       tournament={"role_swap": False})
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,) = await play(tmp_path, raw)
        turns, outside = seat_turns(record, mock.answered())
    # write, review, revise, accept; then the revised code passes the tests
    assert [(t.round, t.seat) for t in turns] == [(1, "Programmer"), (2, "Reviewer"), (3, "Programmer"), (4, "Reviewer")]
    assert record.payoffs == {"Programmer": 1.0, "Reviewer": 1.0}
    assert record.metrics["judge"] == {"Programmer": 8.0, "Reviewer": 7.0}
    codes = [extract_code(m.content) for m in replies(record, "Programmer")]
    assert "return None" in codes[0] and "return a + b" in codes[1]
    for turn in turns:
        assert_conversation(record, turn)
        assert PROBLEM["prompt"] in turn.text
        assert ("the function `add`" in turn.text) == (turn.seat == "Programmer")
        written = [extract_code(m.content) for m in replies(record, "Programmer", before=turn.round)]
        reviews = [m.content for m in replies(record, "Reviewer", before=turn.round)]
        if turn.seat == "Reviewer":
            assert written[-1].strip() in turn.text and "reply with only 'over'" in turn.asked
        elif written:
            assert written[-1].strip() in turn.text and reviews[-1] in turn.text
            assert turn.asked.startswith("Revise your solution following the reviewer's comments.")
    # the judge's brief, asked through the match's desk: the problem, every version, every review, the acceptance
    (brief,) = outside
    for part in [PROBLEM["prompt"], *(c.strip() for c in codes), replies(record, "Reviewer")[0].content,
                 "[Reviewer]\nover", "Score each of Programmer, Reviewer on a scale of 1 to 10"]:
        assert part in brief.text, part
    assert current_prompt(brief.body).startswith("You are an experienced software developer")  # no speaker tag


# -- translation ---------------------------------------------------------------------------------------
SOURCE = "Die Katze schläft auf dem warmen Fensterbrett, während es draußen regnet."
REFERENCE = "The cat sleeps on the warm windowsill while it rains outside."


def translation_reply(body) -> str | dict:
    text = body_text(body)
    found = re.search(r"(\w+) text:\n(.*?)\n\n(?:Give your|Translator said:\n)", text, re.S)
    if "You are a professional translator" in text:
        source = found.group(2) if found else ""
        return f"Draft [{token(text)}] of {len(source.split())} words: " + " ".join(reversed(source.split()))
    if "You are a professional translation editor" in text:
        draft = between(text, "Translator said:\n", "\n\nGive the polished")
        return f"Polished [{token(text)}]: {draft}" if draft and found else ""
    return judge_verdict(text)


async def test_translation_proofreader_and_judge_see_the_source_and_the_draft(backend, tmp_path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text(json.dumps({"id": "t1", "source_lang": "de", "target_lang": "en", "source": SOURCE,
                                 "reference": REFERENCE}) + "\n", encoding="utf-8")
    with mock_server(backend, translation_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock), "judge": model_agent(backend, mock)}
        raw = scenario("translate", agents, "translation", {"texts": str(texts)},
                       referee=[{"use": "llm_judge", "agent": "judge"}, {"use": "rules", "metric": "chrf"}],
                       tournament={"role_swap": False})
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,) = await play(tmp_path, raw)
        turns, outside = seat_turns(record, mock.answered())
    translator, proofreader = turns
    assert (translator.seat, proofreader.seat) == ("Translator", "Proofreader")
    (draft,) = replies(record, "Translator")
    (polished,) = replies(record, "Proofreader")
    assert draft.content.startswith("Draft [") and draft.content.endswith(" ".join(reversed(SOURCE.split())))
    assert polished.content.startswith("Polished [") and draft.content in polished.content  # it read the draft
    for turn in turns:
        assert_conversation(record, turn)
        assert SOURCE in turn.text and "German" in turn.text and "English" in turn.text
        assert REFERENCE not in turn.text  # the reference scores them; it is shown to neither
    assert draft.content in proofreader.text and proofreader.asked == "Give the polished English translation."
    (brief,) = outside
    for part in [SOURCE, draft.content, polished.content, "German source text", "polished English translation",
                 "Score each of Translator, Proofreader on a scale of 1 to 10"]:
        assert part in brief.text, part
    assert REFERENCE not in brief.text
    assert record.metrics["judge"] == {"Translator": 8.0, "Proofreader": 7.0} and set(record.metrics["chrf"]) == {
        "Translator", "Proofreader"}


# -- chateval debate ------------------------------------------------------------------------------------
def debate_reply(body) -> str:
    text = body_text(body)
    first = between(text, "[Answer 1]\n", "\n[End of Answer 1]")
    second = between(text, "[Answer 2]\n", "\n[End of Answer 2]")
    if first is None or second is None:
        return "I was not shown the answers."
    heard = sorted(set(re.findall(r"(Debater \d+|Summarizer) said:\n", text)))
    if "You follow a debate" in text:
        return f"Summary [{token(text)}]: I have read {', '.join(heard) or 'nobody yet'}."
    seat = re.search(r"You are (Debater \d+)", text).group(1)
    verdict = "1" if len(first) > len(second) else "2"
    return f"{seat} [{token(text)}] has read {', '.join(heard) or 'nobody yet'}.\nVerdict: {verdict}"


@pytest.mark.parametrize("strategy", ["one_by_one", "simultaneous_talk", "simultaneous_talk_with_summarizer"])
async def test_chateval_debaters_hear_what_their_strategy_lets_them_and_no_more(backend, strategy, tmp_path):
    with mock_server(backend, debate_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        (record,) = await play(tmp_path, scenario("debate", agents, "chateval_debate",
                                                  {"pairs": pairs_file(tmp_path), "case": "p1", "strategy": strategy,
                                                   "turns": 2}, tournament={"role_swap": False}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    debaters = ["Debater 1", "Debater 2", "Debater 3"] if strategy != "simultaneous_talk_with_summarizer" else [
        "Debater 1", "Debater 2"]
    assert Counter(t.seat for t in turns) == Counter({**{d: 2 for d in debaters},
                                                      **({"Summarizer": 2} if len(debaters) == 2 else {})})
    for turn in turns:
        assert_conversation(record, turn)
        for fact in (QUESTION, ANSWER_A, ANSWER_B):
            assert fact in turn.text
        earlier = [m for m in replies(record) if m.sender != turn.seat and m.round < turn.round]
        now = [m for m in replies(record) if m.sender != turn.seat and m.round == turn.round]
        assert not any(m.content in turn.text for m in now)  # nothing said at the same time
        if strategy == "simultaneous_talk_with_summarizer" and turn.seat != "Summarizer":
            assert all((m.content in turn.text) == (m.sender == "Summarizer") for m in earlier)  # the summary, not the words
        else:
            assert all(m.content in turn.text for m in earlier)
    if strategy == "one_by_one":  # the third debater of a turn has heard the first two of it
        third = next(t for t in turns if t.seat == "Debater 3")
        assert "has read Debater 1, Debater 2." in next(m.content for m in replies(record, "Debater 3") if m.round == third.round)
    if strategy == "simultaneous_talk_with_summarizer":
        summarizer = [t for t in turns if t.seat == "Summarizer"]
        for t in summarizer:
            assert all(m.content in t.text for m in replies(record) if m.sender in debaters and m.round == t.round - 1)


# -- pairwise review -----------------------------------------------------------------------------------
def pairwise_reply(body) -> str:
    text = body_text(body)
    if "You are Contestant" in text:
        seat = re.search(r"You are (Contestant \d+)", text).group(1)
        question = between(text, "Question: ", "\n\nWrite your answer.")
        words = " ".join(["detail"] * (4 * int(seat.split()[-1])))
        return f"{seat} answers [{token(text)}] '{question}': {words}."
    first = between(text, "[Assistant 1]\n", "\n[End of Assistant 1]")
    second = between(text, "[Assistant 2]\n", "\n[End of Assistant 2]")
    if first is None or second is None:
        return "I was not shown two answers."
    scores = (8, 3) if len(first) > len(second) else (3, 8)
    return f"Assistant 1 writes {len(first.split())} words, Assistant 2 {len(second.split())}.\n{scores[0]} {scores[1]}"


async def test_pairwise_judges_see_the_question_and_both_answers_in_the_order_shown(backend, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": QUESTION}) + "\n", encoding="utf-8")
    with mock_server(backend, pairwise_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid", "dee")}
        (record,) = await play(tmp_path, scenario("pairwise", agents, "pairwise_review",
                                                  {"questions": str(questions), "contestants": 3, "swap": True},
                                                  tournament={"role_swap": False}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    answers = {m.content: record.agent_of(m.sender) for m in replies(record) if m.round == 1}
    assert len(answers) == 3
    judge = record.agent_of("Judge")
    shown = []
    for turn in turns:
        assert_conversation(record, turn, history=lambda m: m.kind == "rules")  # every comparison stands alone
        assert QUESTION in turn.text
        if turn.seat != "Judge":
            assert turn.asked == f"Question: {QUESTION}\n\nWrite your answer."
            continue
        assert turn.text.count("[Assistant 1]") == 1 and turn.text.count("[Question]") == 1
        first = between(turn.text, "[Assistant 1]\n", "\n[End of Assistant 1]")
        second = between(turn.text, "[Assistant 2]\n", "\n[End of Assistant 2]")
        shown.append((answers[first], answers[second]))
    assert sorted(shown) == sorted(permutations(sorted(answers.values()), 2))  # every pair, in both orders
    # the verdict tuples follow the order each pair was shown in: the longer answer won every time
    length = {agent: len(text) for text, agent in answers.items()}
    expected = sorted(("q1", a, b, judge, 1 if length[b] > length[a] else -1) for a, b in shown)
    assert sorted(r.battle for r in record.reviews) == expected
