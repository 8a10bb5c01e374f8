"""`arena run --dry-run` against a run of the same scenario on the OpenAI mock server, for every
built-in game: the estimate's calls and tokens must be those of the run, within 15%.

Nothing here leaves 127.0.0.1.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import yaml

from arena.contract import Agent, AgentConfig, Game, InvalidReply, Notice, plugins
from arena.games.idiom_solitaire import successors
from arena.run.dryrun import estimate, prompt_tokens, reply_tokens
from arena.run.scenario import parse_scenario

from conformance_kit import local_only  # noqa: F401  (an autouse fixture: no real key, no proxy)
from helpers import ROOT, arena_offline
from mock_llm import OpenAIMock

DATA = ROOT / "scenarios" / "data"



def flat(text: str) -> str:
    return " ".join(text.split())


# -- how a model might answer each game, from the request text alone -------------------------------------
# Replies of the lengths a chat model writes: a review of a couple of hundred words, a debate turn of
# about a hundred and fifty, a one-line idiom. Written here, not taken from the games' examples.

def words(n: int, about: str) -> str:
    sentence = (f"On {about}, the text gets the main point right but leaves one step unexplained, "
                "and a reader would need that step to trust the conclusion.")
    return " ".join([sentence] * (n // len(sentence.split()) + 1))


def chat(body) -> tuple[str, str]:
    """(the whole conversation as one text, the latest prompt)."""
    messages = body["messages"]
    return "\n".join(m["content"] for m in messages), messages[-1]["content"]


def seat_number(text: str) -> int:
    found = re.search(r"You are \w+ (\d+)", text)
    return int(found.group(1)) if found else 1


def judge_verdict(prompt: str) -> dict:
    seats = re.findall(r'"([^"]+)": \{"evaluation"', prompt)
    return {seat: {"evaluation": words(40, f"the work of {seat}"), "score": 7} for seat in seats}


def public_goods(body):
    _, prompt = chat(body)
    most = int(re.findall(r"<0 to (\d+)>", prompt)[-1])
    return {"reason": "Putting in a bit more than half, since the pool multiplies what goes in and the others seem to "
                      "cooperate.",
            "coins": most * 3 // 5}


def pairwise_review(body):
    text, prompt = chat(body)
    if "Write your answer." in prompt:
        return words(200, "the question asked")
    return words(120, "both answers") + "\n8 6"


def peer_discussion(body):
    text, prompt = chat(body)
    side = seat_number(text)  # Reviewer 1 holds to answer 1, Reviewer 2 to answer 2: they never agree
    length = 200 if "Write your review" in prompt else 120
    return f"{words(length, 'the two answers')}\n\nPreference: {side}"


def chateval_debate(body):
    text, prompt = chat(body)
    if "Summarize this turn" in prompt:
        return words(100, "the turn just argued")
    return f"{words(150, 'which answer is better')}\n\nVerdict: {2 - seat_number(text) % 2}"


def chateval_scoring(body):
    text, prompt = chat(body)
    if "Summarize this turn" in prompt:
        return words(100, "the turn just argued")
    dimensions = re.findall(r"'([\w -]+): N'", text)
    return words(150, "how the response reads") + "\n\n" + "\n".join(f"{d}: {seat_number(text) % 5 + 1}" for d in dimensions)


def idiom_solitaire(body):
    text, prompt = chat(body)
    used = set(re.findall(r"「(\w{4})」", text))
    last = re.findall(r"starting with 「(\w)」", prompt)[-1]
    options = sorted(i for i in successors(last, False) if i not in used and successors(i[-1], False))
    return options[-1]


def code_review(body):
    text, prompt = chat(body)
    if "Review the programmer's latest code" in prompt:
        return words(100, "this code")
    if "Score each of" in prompt:
        return judge_verdict(prompt)
    problem = text.split("Problem:\n", 1)[1].split("\nWrite your solution", 1)[0].rstrip()
    body_lines = "\n".join(f"    step_{i} = {i}  # working towards the result" for i in range(4))
    return f"```python\n{problem}\n{body_lines}\n    return []\n```"


def translation(body):
    text, prompt = chat(body)
    if "Score each of" in prompt:
        return judge_verdict(prompt)
    source = text.split(" text:\n", 1)[1].split("\n", 1)[0]
    return " ".join(reversed(source.split()))  # a text of the source's length stands in for its translation


def model(mock, **extra) -> dict:
    return {"backend": "openai", "base_url": mock.base_url, "model": "gpt-4o-mini", "backoff": 0.01, "timeout": 20,
            **extra}


def write_jsonl(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return str(path)


def entry(game: str, tmp_path: Path) -> tuple[dict, list[str]]:
    """The game entry of each test, and the agents it seats."""
    two, three = ["alice", "bob"], ["alice", "bob", "carol"]
    pair = write_jsonl(tmp_path / "pairs.jsonl", [{
        "id": "p1", "question": "Why does bread go stale?",
        "answer_a": words(150, "what staling is: starch crystallising as the bread dries"),
        "answer_b": words(120, "moisture moving from the crumb to the crust"), "label": -1}])
    if game == "public_goods":
        return {"game": game, "params": {"rounds": 4, "mode": 2}, "tournament": {"repeats": 2}}, two
    if game == "pairwise_review":
        questions = write_jsonl(tmp_path / "questions.jsonl", [{"id": "q1", "question": "How do tides work?"}])
        return {"game": game, "params": {"questions": questions, "contestants": 2}}, three
    if game == "peer_discussion":
        return {"game": game, "params": {"pairs": pair, "max_turns": 4}, "tournament": {"repeats": 2}}, two
    if game == "chateval_debate":
        return {"game": game, "params": {"pairs": pair, "strategy": "simultaneous_talk_with_summarizer", "turns": 2}}, three
    if game == "chateval_scoring":
        return {"game": game, "params": {"responses": str(DATA / "sample-dialogues.jsonl"), "turns": 2}}, three
    if game == "idiom_solitaire":
        return {"game": game, "params": {"max_moves": 12}}, two
    if game == "code_review":
        return {"game": game, "params": {"problems": str(DATA / "sample-problems.jsonl"), "limit": 1, "max_reviews": 2},
                "referee": [{"use": "llm_judge", "agent": "judge"}]}, two
    if game == "translation":
        return {"game": game, "params": {"texts": str(DATA / "translation-samples.jsonl"), "language_pair": "de-en",
                                         "limit": 1},
                "referee": [{"use": "llm_judge", "agent": "judge"}, {"use": "rules", "metric": "chrf"}]}, two
    raise KeyError(game)


GAMES = {"public_goods": public_goods, "pairwise_review": pairwise_review, "peer_discussion": peer_discussion,
         "chateval_debate": chateval_debate, "chateval_scoring": chateval_scoring, "idiom_solitaire": idiom_solitaire,
         "code_review": code_review, "translation": translation}


def test_every_built_in_game_is_covered():
    assert set(GAMES) == set(plugins.names("game"))


def mock_figures(mock: OpenAIMock) -> tuple[int, float, float]:
    """Calls, prompt tokens and reply tokens of what the mock was sent and answered, counted as the dry run counts."""
    prompt = completion = 0.0
    for request in mock.answered():
        messages = request.messages
        system = messages[0]["content"] if messages and messages[0]["role"] == "system" else None
        prompt += prompt_tokens(system, messages[1:] if system is not None else messages)
        completion += reply_tokens(request.reply)
    return len(mock.answered()), prompt, completion


def dry_figures(output: str) -> tuple[int, int, int]:
    found = re.search(r"Total: (\d+) calls, (\d+) prompt tokens, about (\d+) reply tokens", flat(output))
    assert found, output
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


@pytest.mark.parametrize("game", sorted(GAMES))
def test_the_dry_run_is_within_15_percent_of_a_run(game, tmp_path):
    """The same scenario, estimated by ``--dry-run`` and played against the OpenAI mock, whose
    responder answers every turn validly from the request text, at a chat model's lengths.

    Like is compared with like. The mock reports usage as len(json)/4 of the messages, which
    counts JSON quotes, keys and escapes (a Chinese character becomes six characters) rather
    than the text a model reads; a real API counts with its tokenizer. Neither is what a dry run
    can know. What it can know is the text each backend will send: the system prompt and the
    whole conversation, turn after turn, on the path the game takes. So the text the mock
    actually received (every request body, as recorded) and the replies it gave are counted
    with the dry run's own rule (``prompt_tokens``, ``reply_tokens``), and the dry run's calls,
    prompt tokens and expected reply tokens must be within 15% of those.

    The run asks without the response cache. A dry run estimates what a run asks; it cannot know
    that two matches will ask the very same thing, which this responder, deterministic and blind
    to who is seated, makes happen (the summaries of a debate and of its role swap), so a cache
    hit would be a saving it does not predict.
    """
    with OpenAIMock(responder=GAMES[game]) as mock:
        raw_entry, seated = entry(game, tmp_path)
        agents = {name: model(mock) for name in seated}
        agents["alice"]["system"] = "You are a careful, concise assistant."
        if "referee" in raw_entry:
            agents["judge"] = model(mock, max_tokens=600)
        raw = {"name": f"dry-{game}", "seed": 11, "agents": agents, "games": [{**raw_entry, "agents": seated}],
               "match": {"max_retries": 0}}
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")

        dry = arena_offline("run", path, "--dry-run", "--run-dir", tmp_path / "run", cwd=tmp_path)
        assert dry.returncode == 0, dry.stdout + dry.stderr
        assert mock.count == 0 and not (tmp_path / "run").exists()
        assert "no valid example reply" not in dry.stdout  # the game's examples were all accepted
        estimated = dry_figures(dry.stdout)

        ran = arena_offline("run", path, "--quiet", "--no-cache", "--run-dir", tmp_path / "run", cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        assert mock.count == len(mock.answered()) > 0
        sent = mock_figures(mock)

    finished = re.search(r"(\d+) of (\d+) matches finished", flat(ran.stdout))
    assert finished and finished.group(1) == finished.group(2) != "0", ran.stdout
    for what, guess, actual in zip(("calls", "prompt tokens", "reply tokens"), estimated, sent):
        assert abs(guess - actual) <= 0.15 * actual, f"{game}: dry run {guess} {what}, the run {actual:.0f}"


def test_peer_discussion_is_estimated_at_every_turn_it_takes(tmp_path):
    """The issue's case: reviewers who never agree take the initial reviews and all max_turns,
    2 + 4 calls a match, not the 2 of a dry run whose empty replies agreed at once."""
    raw_entry, seated = entry("peer_discussion", tmp_path)
    raw = {"name": "pd", "seed": 3, "agents": {n: {"backend": "openai", "model": "gpt-4o-mini"} for n in seated},
           "games": [raw_entry]}
    found = estimate(parse_scenario(raw))
    (only,) = found.entries
    assert (only.matches, only.calls_per_match, only.defaulted) == (2, 6, 0)
    assert [a.calls for a in found.agents] == [6, 6]


class Strict(Game):
    """A game with no example replies whose rules reject an empty reply."""

    def rules(self, seat):
        return f"You are {seat}. Say a word each round."

    def prompt(self, seat, round):
        return "Your word:"

    def parse(self, seat, reply, round):
        if not reply.strip():
            raise InvalidReply("Say a word.")
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions):
        return [Notice(to=tuple(self.seats), text=f"Round {round} done.")]

    def is_over(self, round):
        return round >= 3

    def payoffs(self):
        return {s: 0.0 for s in self.seats}


def test_a_game_without_examples_is_estimated_and_its_defaults_reported():
    plugins.register("game", "strict", Strict)
    try:
        raw = {"name": "strict", "seed": 1, "agents": {n: {"backend": "openai", "model": "gpt-4o-mini"} for n in "ab"},
               "games": [{"game": "strict"}]}
        found = estimate(parse_scenario(raw))
    finally:
        plugins.unregister("game", "strict")
    (only,) = found.entries
    assert only.calls_per_match == 6 and only.defaulted == 6  # 3 rounds x 2 seats, each a default
    assert only.completion_tokens_per_match == 0 and all(a.completion_tokens == 0 for a in found.agents)


def test_a_judge_is_estimated_with_its_referees_example_verdict():
    raw = {"name": "tr", "seed": 2,
           "agents": {n: {"backend": "openai", "model": "gpt-4o-mini"} for n in ("ann", "ben", "judge")},
           "games": [{"game": "translation", "agents": ["ann", "ben"],
                      "params": {"texts": str(DATA / "translation-samples.jsonl"), "language_pair": "de-en", "limit": 1},
                      "referee": [{"use": "llm_judge", "agent": "judge"}]}]}
    found = estimate(parse_scenario(raw))
    (only,) = found.entries
    assert only.matches == 2 and only.calls_per_match == 3 and only.defaulted == 0  # translate, polish, judge
    judge = next(a for a in found.agents if a.agent == "judge")
    assert judge.calls == 2 and 0 < judge.completion_tokens < judge.completion_tokens_max
    assert judge.cost is not None and 0 < judge.cost < judge.cost_max


def test_a_seated_judge_is_estimated_at_the_calls_the_plan_seats_it_for(tmp_path):
    """faireval-bpc's shape: roles do not rotate, so the judge holds the judging seat of every match,
    asked 3 samples x 2 orders a match while each contestant answers once. Each agent's calls in the
    dry run are those the mock counts for its model in the run, not an even spread over the seats."""
    questions = write_jsonl(tmp_path / "questions.jsonl",
                            [{"id": f"q{i}", "question": f"Question {i}: how do tides work?"} for i in range(3)])
    with OpenAIMock(responder=pairwise_review) as mock:
        agents = {name: model(mock, model=f"model-{name}") for name in ("alice", "bob", "judge")}
        raw = {"name": "seated-judge", "seed": 5, "agents": agents,
               "games": [{"game": "pairwise_review", "agents": ["alice", "bob", "judge"],
                          "params": {"questions": questions, "contestants": 2, "samples": 3, "swap": True}}],
               "tournament": {"role_swap": False}, "match": {"max_retries": 0}}
        path = tmp_path / "s.yaml"
        path.write_text(yaml.safe_dump(raw, sort_keys=False), encoding="utf-8")
        found = {a.agent: a.calls for a in estimate(parse_scenario(raw)).agents}
        ran = arena_offline("run", path, "--quiet", "--no-cache", "--run-dir", tmp_path / "run", cwd=tmp_path)
        assert ran.returncode == 0, ran.stdout + ran.stderr
        made = {name: sum(1 for r in mock.answered() if r.body["model"] == f"model-{name}") for name in agents}
    assert made == {"alice": 3, "bob": 3, "judge": 18}  # 3 questions: one answer each, 6 verdicts a match
    assert found == made


class _Unbounded(AgentConfig):
    """A plugin's config without ``max_tokens``: the contract does not ask for one."""
    backend: str = "unbounded"
    model: str = "house-model"


class _UnboundedBackend(Agent):
    Config = _Unbounded
    makes_calls = True

    async def reply(self, turn):
        raise AssertionError("a dry run asks no backend")


def test_a_plugin_backend_without_max_tokens_is_estimated_with_no_upper_bound(tmp_path):
    plugins.register("agent backend", "unbounded", _UnboundedBackend)
    try:
        raw = {"name": "unbounded", "seed": 1, "agents": {n: {"backend": "unbounded"} for n in "ab"},
               "games": [{"game": "public_goods", "params": {"rounds": 2}}]}
        found = estimate(parse_scenario(raw))
    finally:
        plugins.unregister("agent backend", "unbounded")
    assert {a.agent for a in found.agents} == {"a", "b"}
    for a in found.agents:
        assert a.calls > 0 and a.completion_tokens > 0
        assert a.completion_tokens_max is None and a.cost_max is None  # no cap known: no "at most"
