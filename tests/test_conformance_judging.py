"""The judging games' new flows, played by model agents against the local OpenAI and Anthropic
mocks (tests/mock_llm.py), checked at every turn against what the request bodies carried:
peer discussion run to PRD's fixed number of turns with reviewers who agree and then change
their minds, each reviewer's own initial review listed before the other's; ChatEval's debate with position calibration, each
order in a match of its own; and ChatEval's scoring of one dialogue response on named dimensions.
The responders answer from the request text alone."""

from __future__ import annotations

import json
import re
from collections import Counter

import pytest
import yaml

from arena.contract import plugins
from arena.contract.messages import SIMULTANEOUS
from arena.games.dimension_scores import dimension_scores
from arena.games.discussion_summary import discussion_summaries
from arena.games.debate_verdicts import verdict_scores
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore

from conformance_kit import (
    BACKENDS,
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
from test_conformance import ANSWER_A, ANSWER_B, QUESTION, judge_verdict, own_turns, pairs_file, token

pytestmark = pytest.mark.parametrize("backend", BACKENDS)


# -- peer discussion: PRD's four turns, agreement and a change of mind after it ----------------------
def discussion_reply(body) -> str:
    """Reviewer 1 first backs answer 1, Reviewer 2 answer 2. In the discussion the leader holds its
    view once, then goes over to the other answer; the follower adopts the leader's last word. A
    reviewer knows it leads when it has heard the other as often as it has spoken."""
    text = body_text(body)
    seat = re.search(r"You are (Reviewer \d)", text).group(1)
    other = re.search(r"\(the other is (Reviewer \d)\)", text).group(1)
    heard = re.findall(rf"{other} said:\n.*?Preference: (1|2|tie)", text, re.S)
    own = re.findall(r"Preference: (1|2|tie)", "\n".join(m["content"] for m in body["messages"]
                                                         if m["role"] == "assistant" and isinstance(m["content"], str)))
    spoken = own_turns(body)
    if spoken == 0:
        preference, why = ("1" if seat == "Reviewer 1" else "2"), "my first reading"
    elif len(heard) == spoken:  # the leader
        preference = own[-1] if spoken == 1 else {"1": "2", "2": "1"}[own[-1]]
        why = "I hold my view" if spoken == 1 else "on reflection I change my mind"
    else:
        preference, why = heard[-1], f"{other} convinced me"
    return f"{seat}, message {spoken + 1} [{token(text)}]: {why}; I have heard {other} {len(heard)} times.\nPreference: {preference}"


@pytest.mark.parametrize("seed, leader", [(3, "Reviewer 1"), (4, "Reviewer 2")])
async def test_peer_discussion_runs_its_turns_past_agreement_and_every_request_carries_the_whole_talk(
        backend, seed, leader, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "max_turns": 4, "leader": "drawn"}
    with mock_server(backend, discussion_reply) as mock:
        agents = {"ann": model_agent(backend, mock), "bob": model_agent(backend, mock)}
        (record,) = await play(tmp_path, scenario("discussion", agents, "peer_discussion", params, seed=seed))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    follower = "Reviewer 2" if leader == "Reviewer 1" else "Reviewer 1"
    game = plugins.load("game", "peer_discussion")
    assert record.rounds == 5 == game.rounds_needed(game.Params.model_validate(params), 2)
    assert [(t.round, t.seat) for t in turns] == sorted([(1, leader), (1, follower), (2, leader), (3, follower),
                                                        (4, leader), (5, follower)])
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    first, second = ("1", "2") if leader == "Reviewer 1" else ("2", "1")
    code = {"1": -1, "2": 1}
    # they agree at turn 2; the leader changes its mind at turn 3; the follower follows at turn 4
    assert [(x["turn"], x["seat"], x["preference"]) for x in data["said"]] == [
        (0, leader, code[first]), (0, follower, code[second]), (1, leader, code[first]), (2, follower, code[first]),
        (3, leader, code[second]), (4, follower, code[second])]
    assert data["leader"] == leader and data["agreed_at"] == 2 and data["agreed"]
    assert all(r["changed_after_agreement"] for r in data["reviewers"].values())  # both left what they agreed on
    assert (data["reviewers"][leader]["changes"], data["reviewers"][follower]["changes"]) == (1, 2)
    for turn in turns:
        assert_conversation(record, turn)
        for fact in (QUESTION, ANSWER_A, ANSWER_B):
            assert fact in turn.text
        if turn.round == 1:
            assert " said:\n" not in turn.text  # nobody else's words yet
            continue
        # the initial reviews: the seat's own first, as it wrote it without the other's in front of it,
        # then the other's, introduced as written at the same time (so the leader's comes first for the
        # leader, as PRD lists them, and second for the follower)
        reviews = [m.content for m in replies(record) if m.round == 1]
        assert reviews[0].startswith(f"{leader}, message 1")
        own, others = sorted(reviews, key=lambda r: not r.startswith(f"{turn.seat},"))
        at = [turn.text.find(p) for p in (own, f"\n\n{SIMULTANEOUS}\n\n", others)]
        assert min(at) >= 0 and at == sorted(at) and turn.text.count(SIMULTANEOUS) == 1
        other = follower if turn.seat == leader else leader
        assert replies(record, other, before=turn.round)[-1].content in turn.text
        assert f"Remember: you are {turn.seat}, and you answer {other}." in turn.asked
    # the leader's change of mind came with the agreement in front of it
    change = next(t for t in turns if t.round == 4)
    agreed = next(m for m in replies(record, follower) if m.round == 3)
    assert agreed.content.endswith(f"Preference: {first}") and agreed.content in change.text


# -- ChatEval's debate with position calibration --------------------------------------------------
def debate_reply(body) -> str:
    """Scores the longer answer 8 and the other 4, in the order shown; says whom it has read."""
    text = body_text(body)
    first = between(text, "[Answer 1]\n", "\n[End of Answer 1]")
    second = between(text, "[Answer 2]\n", "\n[End of Answer 2]")
    if first is None or second is None:
        return "I was not shown the answers."
    heard = sorted(set(re.findall(r"(Debater \d+|Summarizer) said:\n", text)))
    if "You follow a debate" in text:
        return f"Summary [{token(text)}]: I have read {', '.join(heard) or 'nobody yet'}."
    seat = re.search(r"You are (Debater \d+)", text).group(1)
    scores = "8 4" if len(first) > len(second) else "4 8"
    return f"{seat} [{token(text)}] has read {', '.join(heard) or 'nobody yet'}.\nScores: {scores}"


async def test_a_calibrated_debate_shows_each_order_in_its_own_match_at_every_turn(backend, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "strategy": "one_by_one", "turns": 2, "output": "scores",
              "position_calibration": True}
    with mock_server(backend, debate_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        records = await play(tmp_path, scenario("debate", agents, "chateval_debate", params,
                                                tournament={"role_swap": False}))
        requests = mock.answered()
    assert sorted(r.params["case"] for r in records) == ["p1", "p1@swapped"]
    claimed = 0
    for record in records:
        turns, outside = seat_turns(record, [q for q in requests if any(
            m.content in q.text for m in record.messages if m.kind == "rules")])
        assert not outside and len(turns) == 6
        claimed += len(turns)
        swapped = record.params["case"].endswith("@swapped")
        shown_first, shown_second = (ANSWER_B, ANSWER_A) if swapped else (ANSWER_A, ANSWER_B)
        for turn in turns:
            assert_conversation(record, turn)
            assert f"[Answer 1]\n{shown_first}\n[End of Answer 1]" in turn.text
            assert f"[Answer 2]\n{shown_second}\n[End of Answer 2]" in turn.text
            assert "'Scores: X Y'" in turn.text
            # nothing of the other order's debate reaches this one
            other = next(r for r in records if r is not record)
            assert not any(m.content in turn.text for m in replies(other))
        (data,) = [m.data for m in record.messages if m.kind == "notice"]
        # the longer answer (A) scored 8 wherever it was shown
        assert data["verdict"] == (4.0 if swapped else -4.0) and data["label"] == (1 if swapped else -1)
    assert claimed == len(requests)  # every request belongs to one seat of one of the two matches
    (score,) = verdict_scores(records)
    assert (score.calibrated, score.examples, score.accuracy, score.as_shown_accuracy) == (True, 1, 1.0, 1.0)


# -- ChatEval's scoring of one response on named dimensions -------------------------------------------
DIALOGUE = ["A: I finally planted a vegetable garden this spring.", "B: Nice! What did you grow?",
            "A: Mostly tomatoes and beans. The tomatoes are taking forever to ripen."]
FACT = "Tomatoes ripen faster when night temperatures stay above about 10 degrees Celsius."
RESPONSE = "Cold nights slow them down; they ripen faster once nights stay above ten degrees. Are your nights chilly?"


def scoring_reply(body) -> str:
    """Reads the dimensions and the scale from the rules and gives each a score from the response's
    length and the dimension's place: all from the text."""
    text = body_text(body)
    heard = sorted(set(re.findall(r"(Debater \d+|Summarizer) said:\n", text)))
    if "You follow a debate" in text:
        return f"Summary [{token(text)}]: I have read {', '.join(heard) or 'nobody yet'}."
    seat = re.search(r"You are (Debater \d+)", text).group(1)
    response = between(text, "[Response]\n", "\n[End of Response]")
    scale = re.search(r"a whole number from (\d+) to (\d+)", text)
    dimensions = re.findall(r"'([\w -]+): N'", text)
    if response is None or scale is None or not dimensions or between(text, "[Dialogue]\n", "\n[End of Dialogue]") is None:
        return "I was not shown the dialogue, the response and what to score."
    low, high = int(scale.group(1)), int(scale.group(2))
    n = int(seat.split()[-1])
    lines = [f"{d}: {low + (len(response.split()) + i + n) % (high - low + 1)}" for i, d in enumerate(dimensions)]
    return f"{seat} [{token(text)}] has read {', '.join(heard) or 'nobody yet'}.\n" + "\n".join(lines)


@pytest.mark.parametrize("strategy", ["one_by_one", "simultaneous_talk", "simultaneous_talk_with_summarizer"])
async def test_scoring_debaters_see_the_dialogue_the_fact_and_the_response_at_every_turn(backend, strategy, tmp_path):
    responses = tmp_path / "responses.jsonl"
    responses.write_text(json.dumps({"id": "g1", "context": DIALOGUE, "fact": FACT, "response": RESPONSE,
                                     "human": {"naturalness": 3, "groundedness": 1}}) + "\n", encoding="utf-8")
    params = {"responses": str(responses), "dimensions": ["naturalness", "groundedness"], "scale": [0, 3],
              "strategy": strategy, "turns": 2}
    with mock_server(backend, scoring_reply) as mock:
        agents = {name: model_agent(backend, mock) for name in ("ann", "bob", "cid")}
        (record,) = await play(tmp_path, scenario("scoring", agents, "chateval_scoring", params,
                                                  tournament={"role_swap": False}))
        turns, outside = seat_turns(record, mock.answered())
    assert not outside
    debaters = ["Debater 1", "Debater 2", "Debater 3"] if strategy != "simultaneous_talk_with_summarizer" else [
        "Debater 1", "Debater 2"]
    assert Counter(t.seat for t in turns) == Counter({**{d: 2 for d in debaters},
                                                      **({"Summarizer": 2} if len(debaters) == 2 else {})})
    for turn in turns:
        assert_conversation(record, turn)
        for fact in ("\n".join(DIALOGUE), FACT, RESPONSE):
            assert fact in turn.text
        if turn.seat != "Summarizer":
            assert "'naturalness: N', 'groundedness: N'" in turn.text and "a whole number from 0 to 3" in turn.text
            assert turn.asked == "Your turn in the debate: give your arguments, then your scores."
        now = [m for m in replies(record) if m.sender != turn.seat and m.round == turn.round]
        assert not any(m.content in turn.text for m in now)
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    words = len(RESPONSE.split())
    expected = {d: {"naturalness": float((words + int(d.split()[-1])) % 4),
                    "groundedness": float((words + 1 + int(d.split()[-1])) % 4)} for d in debaters}
    assert data["scores"] == expected
    assert data["mean"] == {k: pytest.approx(sum(e[k] for e in expected.values()) / len(debaters))
                            for k in ("naturalness", "groundedness")}
    assert data["human"] == {"naturalness": 3, "groundedness": 1}
    (found,) = dimension_scores([record])
    assert found.responses == 1 and all(c.spearman is None for c in found.correlations)  # one response: no correlation


# -- a verdict only when the model gave one; no turn on nothing -------------------------------------
async def play_with_defaults(tmp_path, raw: dict):
    """Run the scenario into a run store; the finished matches and the reviews peer rank would read
    from it. Unlike ``play``, refused replies are allowed: they are what is under test."""
    parsed = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "run", parsed.name, yaml.safe_dump(raw), parsed.fingerprint())
    try:
        await run_tournament(parsed, store)
        records, reviews = list(store.read.records(status=None)), store.read.review_rows()
    finally:
        store.close()
    assert all(r.status == "finished" for r in records), [r.error for r in records]
    return records, reviews


def by_rules(requests, marker: str) -> list:
    """The requests whose text holds ``marker`` (a seat's own rules), in the order they came."""
    return [r for r in requests if marker in r.text]


def asked_again(requests: list) -> list[tuple]:
    """(refused request, the request that asked again) for each re-ask among one seat's requests:
    the second holds the first's reply, then the referee's reason."""
    return [(first, second) for first, second in zip(requests, requests[1:])
            if first.reply and 0 <= second.text.find(first.reply) < second.text.rfind(closing(second))]


def closing(request) -> str:
    """The text of a request's last message: the referee's reason and the prompt again, after a re-ask."""
    return body_text({"messages": request.messages[-1:]})


def quiet_reviewer(kind: str):
    """Reviewer 1 states 'Preference: 1' every time. Reviewer 2 never states a preference: it
    hesitates ('silent'), or echoes the instruction from its rules on one line ('echo') or spread
    over several ('echo_lines'), as small models do."""
    def reply(body) -> str:
        text = body_text(body)
        seat = re.search(r"You are (Reviewer \d)", text).group(1)
        if seat == "Reviewer 1" and kind != "both":
            return f"Answer 1 explains the staling [{token(text)}].\nPreference: 1"
        rule = re.search(r"End every message with[^\n]*", text).group(0)
        if kind == "silent":
            return f"Both answers have something to them [{token(text)}]; I cannot decide yet."
        if kind == "echo_lines":
            return f"Understood [{token(text)}].\n" + rule.replace(": ", ":\n").replace(", ", ",\n").replace(" or ", " or\n")
        return f"Understood [{token(text)}]. {rule}"
    return reply


@pytest.mark.parametrize("kind", ["silent", "echo", "echo_lines"])
async def test_a_reviewer_that_never_states_a_preference_is_asked_again_and_gives_no_review(backend, kind, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "max_turns": 2}
    with mock_server(backend, quiet_reviewer(kind)) as mock:
        agents = {"ann": model_agent(backend, mock, model="ann-model"), "bob": model_agent(backend, mock, model="bob-model")}
        raw = scenario("quiet", agents, "peer_discussion", params, tournament={"role_swap": False})
        raw["match"]["max_retries"] = 1
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,), reviews = await play_with_defaults(tmp_path, raw)
        requests = mock.answered()
    quiet = by_rules(requests, "You are Reviewer 2,")
    # rounds 1 and 3 are Reviewer 2's: each asked, refused, asked again with the reason, refused again
    assert len(quiet) == 4 and len(by_rules(requests, "You are Reviewer 1,")) == 2
    again = asked_again(quiet)
    assert [(quiet.index(a), quiet.index(b)) for a, b in again] == [(0, 1), (2, 3)]
    for refused, retry in again:
        reason = current_prompt(retry.body)  # what the referee said after the refused reply
        assert "End your message with your preference alone on its last line: 'Preference: 1'" in reason
        assert "Your last line was" in reason
    taken = [(e.round, e.seat, e.action, e.defaulted) for e in record.events if e.type == "action"]
    assert [t for t in taken if t[1] == "Reviewer 2"] == [(1, "Reviewer 2", None, True), (3, "Reviewer 2", None, True)]
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    data = notice.data
    assert notice.content == "Outcome: none: Reviewer 2 stated no preference."
    assert data["outcome"] is None and not data["agreed"]
    assert data["agreed_at_start"] is None and data["disagreed_at_start"] is None
    assert data["reviewers"]["Reviewer 2"]["initial"] is None and data["reviewers"]["Reviewer 2"]["final"] is None
    assert data["missed"] == {"Reviewer 1": [], "Reviewer 2": [0, 2]}
    assert [x["seat"] for x in data["said"]] == ["Reviewer 1", "Reviewer 1"]
    assert record.payoffs == {"Reviewer 1": 1.0, "Reviewer 2": 0.0}
    # peer rank reads one review: the reviewer that stated a preference
    assert [(r.reviewer, r.score) for r in record.reviews] == [("ann", -1)]
    assert [(r.reviewer, r.score) for r in reviews] == [("ann", -1)]
    (summary,) = discussion_summaries([record])
    assert (summary.agreed_at_start, summary.agreed_at_end, summary.no_outcome) == (0, 0, 1)
    assert summary.discussion_accuracy is None and summary.initial_accuracy == 1.0  # ann's, the only one stated
    bob = next(r for r in summary.reviewers if r.agent == "bob" and r.position == "any")
    assert bob.no_preference == 1 and bob.initial_accuracy is None and bob.final_accuracy is None


async def test_two_reviewers_that_only_echo_the_instruction_do_not_agree_at_the_start(backend, tmp_path):
    # under stop: agreement two "ties" read from the echoes used to end the match at once, agreed
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "max_turns": 2, "stop": "agreement"}
    with mock_server(backend, quiet_reviewer("both")) as mock:
        agents = {"ann": model_agent(backend, mock, model="ann-model"), "bob": model_agent(backend, mock, model="bob-model")}
        raw = scenario("echoes", agents, "peer_discussion", params, tournament={"role_swap": False})
        raw["match"]["max_retries"] = 1
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,), reviews = await play_with_defaults(tmp_path, raw)
        requests = mock.answered()
    assert record.rounds == 3  # every turn taken: nobody agreed
    assert len(requests) == 2 * 4 and all(r.reply.endswith("'Preference: tie'.") for r in requests)
    assert len(asked_again(by_rules(requests, "You are Reviewer 1,"))) == 2
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    assert data["agreed_at_start"] is None and not data["agreed"] and data["agreed_at"] is None
    assert data["outcome"] is None and data["said"] == []
    assert record.reviews == [] and reviews == []
    (summary,) = discussion_summaries([record])
    assert (summary.agreed_at_start, summary.agreed_at_end, summary.no_outcome) == (0, 0, 1)


def echoing_debater(body) -> str:
    """Debater 1 backs answer 1; Debater 2 only repeats the instruction from its rules."""
    text = body_text(body)
    seat = re.search(r"You are (Debater \d)", text).group(1)
    if seat == "Debater 1":
        return f"Answer 1 is the better one [{token(text)}].\nVerdict: 1"
    rule = re.search(r"End each message with[^\n]*", text).group(0)
    return f"I will follow the format [{token(text)}]. {rule}"


async def test_a_debater_that_echoes_the_instruction_gives_no_verdict(backend, tmp_path):
    params = {"pairs": pairs_file(tmp_path), "case": "p1", "strategy": "one_by_one", "turns": 2}
    with mock_server(backend, echoing_debater) as mock:
        agents = {"ann": model_agent(backend, mock, model="ann-model"), "bob": model_agent(backend, mock, model="bob-model")}
        raw = scenario("debate", agents, "chateval_debate", params, tournament={"role_swap": False})
        raw["match"]["max_retries"] = 1
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,), reviews = await play_with_defaults(tmp_path, raw)
        requests = mock.answered()
    echoes = by_rules(requests, "You are Debater 2,")
    assert all("'Verdict: tie'" in r.reply for r in echoes) and len(echoes) == 4
    again = asked_again(echoes)
    assert len(again) == 2
    assert all(current_prompt(b.body).startswith("End your message with your verdict alone on its last line")
               for _, b in again)
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    assert data["finals"] == {"Debater 1": -1} and data["firsts"] == {"Debater 1": -1} and data["verdict"] == -1
    assert [(r.reviewer, r.score) for r in reviews] == [("ann", -1)]
    (score,) = verdict_scores([record])
    assert [(d.agent, d.examples) for d in score.debaters] == [("ann", 1)]


def echoing_judge(body) -> str:
    """Contestants answer; the judge repeats the instruction of its prompt instead of judging."""
    text = body_text(body)
    if "careful and impartial reviewer" not in text:
        return f"An answer [{token(text)}]."
    return f"Let me restate the task [{token(text)}].\n" + current_prompt(body).rsplit("\n", 1)[-1]


async def test_a_judge_that_echoes_the_instruction_gives_no_review(backend, tmp_path):
    questions = tmp_path / "questions.jsonl"
    questions.write_text(json.dumps({"id": "q1", "question": QUESTION}) + "\n", encoding="utf-8")
    params = {"questions": str(questions), "contestants": 2, "output": "choice", "swap": False}
    with mock_server(backend, echoing_judge) as mock:
        agents = {n: model_agent(backend, mock, model=f"{n}-model") for n in ("ann", "bob", "judge")}
        raw = scenario("pairwise", agents, "pairwise_review", params, tournament={"role_swap": False})
        raw["match"]["max_retries"] = 1
        raw["games"][0]["agents"] = ["ann", "bob", "judge"]
        (record,), reviews = await play_with_defaults(tmp_path, raw)
        requests = mock.answered()
    judged = by_rules(requests, "careful and impartial reviewer")
    assert len(judged) == 2 and "or tie" in judged[0].reply.splitlines()[-1]
    assert asked_again(judged) and current_prompt(judged[1].body).startswith("The last line must be only 1, 2 or tie")
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    assert [v["verdict"] for v in data["verdicts"]] == [None]
    assert record.reviews == [] and reviews == []


def editor_after_a_silent_writer(body) -> str | dict:
    """The editor polishes or reviews whatever it is sent; the judge scores whom it is asked about."""
    text = body_text(body)
    if "You are a professional translation editor" in text or "You are the code reviewer" in text:
        return f"Edited [{token(text)}]."
    return judge_verdict(text)


@pytest.mark.parametrize("game", ["translation", "code_review"])
async def test_the_editor_is_not_asked_to_edit_nothing_after_the_writer_gave_nothing(backend, game, tmp_path):
    if game == "translation":
        source = tmp_path / "texts.jsonl"
        source.write_text(json.dumps({"id": "t1", "source_lang": "de", "target_lang": "en", "source": "Die Katze schläft.",
                                      "reference": "The cat sleeps."}) + "\n", encoding="utf-8")
        params, writer, editor = {"texts": str(source)}, "Translator", "Proofreader"
        referees = [{"use": "llm_judge", "agent": "judge"}, {"use": "rules", "metric": "chrf"}]
    else:
        source = tmp_path / "problems.jsonl"
        source.write_text(json.dumps({"id": "add", "entry_point": "add", "prompt": "def add(a, b):\n",
                                      "test": "def check(candidate):\n    assert candidate(2, 3) == 5\n"}) + "\n")
        params, writer, editor = {"problems": str(source)}, "Programmer", "Reviewer"
        referees = [{"use": "execution", "limits": {"wall_seconds": 30, "cpu_seconds": 10}}, {"use": "llm_judge", "agent": "judge"}]
    with mock_server(backend, editor_after_a_silent_writer) as mock:
        agents = {"ann": {"backend": "scripted", "strategy": "fixed", "params": {"replies": [""]}},
                  "bob": model_agent(backend, mock), "judge": model_agent(backend, mock)}
        raw = scenario("silent", agents, game, params, referee=referees, tournament={"role_swap": False})
        raw["match"]["max_retries"] = 1
        raw["games"][0]["agents"] = ["ann", "bob"]
        (record,), _ = await play_with_defaults(tmp_path, raw)
        requests = mock.answered()
    # the editor was never sent a request: only the judge's brief reached the server
    (brief,) = requests
    assert "Edited [" not in brief.reply and f"Score each of {writer} on a scale" in brief.text
    assert f"{editor}" not in re.search(r"Score each of .*", brief.text).group(0)
    assert [(e.round, e.seat, e.defaulted) for e in record.events
            if e.type == "action" and e.seat in (writer, editor)] == [(1, writer, True)]
    assert record.rounds == 1 and not [m for m in record.messages if m.kind == "prompt" and m.recipients == (editor,)]
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    assert notice.data["skipped"] == editor and f"the {editor.lower()} was not asked" in notice.content
    assert editor not in record.payoffs and set(record.metrics["judge"]) == {writer}
