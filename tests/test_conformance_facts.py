"""Scripted and synthetic players know no more than a model: every fact a game hands them in
structured form (a turn's ``prompt_data``, the ``data`` of a message they can see) is also in the
text a model would be sent at that turn (``turn.as_chat()``), for every game and every turn.

The walk is generic: strings must appear as they are, numbers as they are written; names of
choices (a task, an output format, a language code, a preference code) must appear as the words
the game uses for them, listed per game below. A fact with no way to show it fails the test.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from arena.agents.writer_editor_strategies import answer_book
from arena.contract.agent import Agent
from arena.contract.messages import Turn
from arena.contract.records import MatchSpec
from arena.contract.referee import RefereeSpec
from arena.engine.match import play_match
from arena.games.translation import language, load_texts

from helpers import ROOT, scripted

DATA = ROOT / "scenarios" / "data"
PAIRS, QUESTIONS, PROBLEMS, TEXTS, DIALOGUES = (str(DATA / n) for n in (
    "sample-pairs.jsonl", "sample-questions.jsonl", "sample-problems.jsonl", "translation-samples.jsonl",
    "sample-dialogues.jsonl"))
Shows = Callable[[Any], "list[str] | Callable[[str], bool]"]  # a fact -> texts any one of which must appear, or a test


def words(table: dict) -> Shows:
    """A choice shown as the words the game uses for it."""
    return lambda value: [table[value]]


PREFERENCE = {-1: "1", 0: "tie", 1: "2"}
SCORES_OR_CHOICE = {
    "pairwise": {"scores": "two scores from 1 to 10", "choice": "1 if Assistant 1's answer is better, 2 if Assistant 2's is, or tie"},
    "debate": {"scores": "'Scores: X Y'", "choice": "'Verdict: 1', 'Verdict: 2' or 'Verdict: tie'"},
}
def last_words(text: str, seat: str) -> str:
    """What ``seat`` said last in a conversation as a model reads it (a synthetic reply is one paragraph;
    messages are joined by a blank line)."""
    heard = f"{seat} said:\n"
    return text.rsplit(heard, 1)[-1].split("\n\n")[0].rstrip() if heard in text else ""


def said_verdict(words: str, value: float) -> bool:
    scores = re.findall(r"Scores: (\d+) (\d+)", words)
    if scores:
        first, second = map(int, scores[-1])
        return second - first == value
    return words.endswith(f"Verdict: {PREFERENCE[value]}")


JUDGE = {"task": words({"judge": "Score each of"}), "scale": lambda v: [f"on a scale of {v[0]} to {v[1]}"]}  # llm_judge's

SHOWS: dict[str, dict[str, Shows]] = {
    "public_goods": {
        "players": lambda n: [f"one of {n} players"], "rounds": lambda n: [f"a game of {n} rounds"],
        "endowment": lambda n: [f"receives {n} coins"], "alpha": lambda a: [f"multiplied by {a:g}"],
        "mode": words({1: "how many coins the pool paid you", 2: "what every player put into the pool"}),
        "round": lambda r: [f"Round {r} is over"],
        "income": lambda x: [f"paid you {f'{x:.2f}'.rstrip('0').rstrip('.')} coins"],
        "contributions": lambda c: [f"put in {c} coins"],
    },
    "pairwise_review": {
        "task": words({"answer": "Write your answer.", "judge": "[Assistant 1]"}),
        "output": words(SCORES_OR_CHOICE["pairwise"]),
        "template": words({"evidence_first": "First explain, point by point", "verdict_first": "On the first line write only"}),
    },
    "peer_discussion": {
        "task": words({"review": "Write your review", "discuss": "Continue the discussion"}),
        # the other reviewer's last stated preference: the last one its own words give
        "others": lambda others: lambda text: all(
            last_words(text, seat).endswith(f"Preference: {PREFERENCE[p]}")
            for seat, p in others.items()),
    },
    "chateval_debate": {
        "task": words({"debate": "Your turn in the debate", "summarize": "Summarize this turn"}),
        "output": words(SCORES_OR_CHOICE["debate"]),
        # each debater heard: its last verdict, as its own words give it (a choice, or the gap of its two scores)
        "others": lambda others: lambda text: all(said_verdict(last_words(text, seat), v) for seat, v in others.items()),
    },
    "chateval_scoring": {
        "task": words({"score": "then your scores", "summarize": "Summarize this turn"}),
        "others": lambda others: lambda text: all(f"\n{d}: {x:g}" in "\n" + last_words(text, seat)
                                                  for seat, scores in others.items() for d, x in scores.items()),
        "dimensions": lambda names: lambda text: all(f"'{n}: N'" in text for n in names),
        "scale": lambda scale: [f"a whole number from {scale[0]} to {scale[1]}"],
    },
    "idiom_solitaire": {
        "task": words({"idiom": "Reply with only your idiom"}),
        "homophone": words({True: "sounds the same (same pinyin, any tone)",
                            False: "whose first character is the last character of the previous one"}),
        "round": lambda r: [f"Move {r}:"], "ok": words({True: " played 「", False: " loses: "}),
    },
    "code_review": {
        "task": words({"code": "Problem:\n"}),
        "stage": words({"write": "Write your solution", "revise": "Revise your solution",
                        "review": "Review the programmer's latest code"}),
        "accepted": lambda yes: (lambda text: ("The reviewer accepted the code." in text or "[Reviewer]\nover" in text) == yes),
    },
    "translation": {
        "task": words({"translation": "translation"}),
        "stage": words({"write": "Give your", "edit": "Give the polished"}),
        "source_lang": lambda code: [f"{language(code)} text"], "target_lang": lambda code: [f"into {language(code)}"],
        "pair": lambda pair: lambda text: all(language(code) in text for code in pair.split("-")),
    },
}


def leaves(value: Any, key: str) -> Iterator[tuple[str, Any]]:
    """The facts under a key: its strings and numbers, however deep, each with the key it came under."""
    if isinstance(value, dict):
        for inner in value.values():
            yield from leaves(inner, key)
    elif isinstance(value, (list, tuple)):
        for inner in value:
            yield from leaves(inner, key)
    else:
        yield key, value


def missing(game: str, data: dict[str, Any], text: str) -> list[str]:
    """The facts of ``data`` the text does not carry."""
    table = {**SHOWS[game], **JUDGE} if data.get("task") == "judge" and "seats" in data else SHOWS[game]  # llm_judge's brief
    lost = []
    for key, value in data.items():
        shows = table.get(key)
        if shows is not None:
            found = shows(value)
            ok = found(text) if callable(found) else any(f in text for f in found)
            if not ok:
                lost.append(f"{key}={value!r}")
            continue
        for _, leaf in leaves(value, key):
            if leaf is None or leaf == "":
                continue  # no fact: nothing written yet
            if isinstance(leaf, bool):
                lost.append(f"{key}={leaf!r} (no words for it)")
            elif isinstance(leaf, (int, float)):
                if str(leaf) not in text and f"{leaf:g}" not in text:
                    lost.append(f"{key}={leaf!r}")
            elif str(leaf).strip() not in text:
                lost.append(f"{key}={str(leaf)[:80]!r}")
    return lost


class Witness(Agent):
    """Plays as the agent it wraps, after checking what that agent may read against what a model reads."""

    def __init__(self, inner: Agent, game: str, checked: list, lost: list):
        super().__init__(inner.name, inner.config)
        self.inner, self.game, self.checked, self.lost = inner, game, checked, lost

    async def reply(self, turn: Turn) -> str:
        text = "\n\n".join(m["content"] for m in turn.as_chat())
        where = f"{turn.seat}, round {turn.round}"
        if turn.prompt_data:
            self.checked.append(("prompt_data", where, dict(turn.prompt_data)))
            self.lost += [f"{where}: {fact}" for fact in missing(self.game, turn.prompt_data, text)]
        for message in turn.history:
            if message.data:
                self.checked.append((message.kind, where, dict(message.data)))
                self.lost += [f"{where}, {message.kind} {message.index}: {fact}"
                              for fact in missing(self.game, message.data, message.content)]
        return await self.inner.reply(turn)


async def witnessed(game: str, agents: dict[str, Agent], params: dict, judge: Agent | None = None,
                    referees=(), seed: int = 1) -> tuple[list, list]:
    checked: list = []
    lost: list = []
    wrapped = {name: Witness(agent, game, checked, lost) for name, agent in agents.items()}
    if judge is not None:
        wrapped[judge.name] = Witness(judge, game, checked, lost)
    spec = MatchSpec(key=f"facts/{game}", game=game, agents=tuple(agents), seed=seed, shuffle_seats=False,
                     params=params, referees=tuple(referees))
    record = await play_match(spec, wrapped)
    assert record.status == "finished", record.error
    assert not [e for e in record.events if e.type == "turn_failed"]
    return checked, lost


def synthetic(name: str, **params) -> Agent:
    return scripted(name, "synthetic_judge", params={"name": name, **params})


# -- each game, with the players that read structured data --------------------------------------
@pytest.mark.parametrize("mode", [1, 2])
async def test_public_goods_players_read_only_what_the_rules_and_reports_say(mode):
    agents = {n: scripted(n, s) for n, s in [("t", "tit_for_tat"), ("c", "conditional_cooperator"),
                                             ("a", "always_all"), ("r", "random_contributor")]}
    checked, lost = await witnessed("public_goods", agents, {"rounds": 4, "endowment": 12, "alpha": 1.8, "mode": mode})
    assert not lost
    kinds = {kind for kind, _, _ in checked}
    assert kinds == {"rules", "notice"} and len(checked) >= 4 * 4 * 2  # every turn: its rules and the last reports


@pytest.mark.parametrize("output, template", [("scores", "evidence_first"), ("choice", "verdict_first")])
async def test_pairwise_contestants_and_judges_read_only_their_prompt(output, template):
    agents = {"x": scripted("x", "synthetic_contestant", params={"quality": 0.3}),
              "y": scripted("y", "synthetic_contestant", params={"quality": 0.8, "verbosity": 0.5}),
              "j": synthetic("j", skill=0.1, position_bias=0.2)}
    checked, lost = await witnessed("pairwise_review", agents, {"questions": QUESTIONS, "case": "s2", "output": output,
                                                                "template": template, "samples": 2})
    assert not lost
    judged = [data for kind, _, data in checked if kind == "prompt_data" and data["task"] == "judge"]
    assert len(judged) == 4 and all(len(data["answers"]) == 2 for data in judged)


async def test_peer_reviewers_read_only_the_material_and_the_others_words():
    # one of them favours whichever answer it is shown first, so they disagree and discuss
    agents = {"a": synthetic("a", position_bias=0.8, openness=0.3), "b": synthetic("b", openness=0.3)}
    checked, lost = await witnessed("peer_discussion", agents, {"pairs": PAIRS, "case": "d2", "max_turns": 4}, seed=4)
    assert not lost
    discussed = [data for kind, _, data in checked if kind == "prompt_data" and data["task"] == "discuss"]
    assert discussed and all(data["others"] for data in discussed)


@pytest.mark.parametrize("strategy", ["one_by_one", "simultaneous_talk", "simultaneous_talk_with_summarizer"])
@pytest.mark.parametrize("output", ["choice", "scores"])
async def test_debaters_read_only_the_material(strategy, output):
    agents = {n: synthetic(n, skill=0.2) for n in ("a", "b", "c")}
    checked, lost = await witnessed("chateval_debate", agents, {"pairs": PAIRS, "case": "d3", "strategy": strategy,
                                                                "turns": 2, "output": output})
    assert not lost and len(checked) >= 4


@pytest.mark.parametrize("strategy", ["one_by_one", "simultaneous_talk", "simultaneous_talk_with_summarizer"])
async def test_debaters_scoring_a_response_read_only_the_dialogue_and_what_to_score(strategy):
    agents = {n: synthetic(n, skill=0.2) for n in ("a", "b", "c")}
    checked, lost = await witnessed("chateval_scoring", agents, {"responses": DIALOGUES, "case": "c2-curious",
                                                                 "strategy": strategy, "turns": 2, "scale": [0, 3]})
    assert not lost
    scored = [data for kind, _, data in checked if kind == "prompt_data" and data["task"] == "score"]
    assert len(scored) == 4 if strategy == "simultaneous_talk_with_summarizer" else 6
    assert all(data["fact"] and len(data["context"]) == 3 for data in scored)


@pytest.mark.parametrize("homophone", [False, True])
async def test_idiom_players_read_the_chain_from_the_prompt(homophone):
    agents = {"a": scripted("a", "idiom_player"), "b": scripted("b", "idiom_player", params={"vocabulary": 300})}
    checked, lost = await witnessed("idiom_solitaire", agents, {"max_moves": 12, "homophone": homophone}, seed=2)
    assert not lost
    chains = [data["used"] for kind, _, data in checked if kind == "prompt_data"]
    assert len(chains) >= 2 and len(chains[-1]) == len(chains)  # the whole chain, at every move


JUDGED = RefereeSpec(use="llm_judge", params={"agent": "judge"})


async def test_writers_editors_and_their_judge_read_only_the_conversation():
    # code review: the canonical solution is the stand-ins' own knowledge (`answers`), not the game's to pass
    stand_in = {"answers": PROBLEMS, "write": 0.0, "fix": 1.0, "edit": 1.0}
    agents = {"p": scripted("p", "writer_editor", params=stand_in), "r": scripted("r", "writer_editor", params=stand_in)}
    judge = scripted("judge", "reference_judge", params={"answers": PROBLEMS})
    checked, lost = await witnessed("code_review", agents, {"problems": PROBLEMS, "case": "is-leap", "max_reviews": 2},
                                    judge=judge, referees=(RefereeSpec(use="rules"), JUDGED))
    assert not lost
    stages = [w for kind, w, keys in checked if kind == "prompt_data"]
    assert len(stages) == 4 + 1  # write, review, revise, accept; and the judge
    # translation
    stand_in = {"answers": TEXTS, "write": 0.0, "edit": 1.0}
    agents = {"t": scripted("t", "writer_editor", params=stand_in), "p": scripted("p", "writer_editor", params=stand_in)}
    judge = scripted("judge", "reference_judge", params={"answers": TEXTS})
    checked, lost = await witnessed("translation", agents, {"texts": TEXTS, "case": "en-zh-2"}, judge=judge,
                                    referees=(JUDGED,))
    assert not lost and len([c for c in checked if c[0] == "prompt_data"]) == 3


async def test_stand_ins_that_know_the_answers_still_play_to_their_skill():
    """Knowing the right answers by heart (and reading nothing else), a perfect writer and editor
    hand in right work; without `answers` they know none, and the judge gives middling scores."""
    text = load_texts(TEXTS)["de-en-1"]
    assert answer_book(TEXTS)[text.source] == text.reference  # looked up by what it is shown
    perfect = {"answers": TEXTS, "write": 1.0, "edit": 1.0}
    agents = {"t": scripted("t", "writer_editor", params=perfect), "p": scripted("p", "writer_editor", params=perfect)}
    record = await play_match(MatchSpec(key="k", game="translation", agents=("t", "p"), seed=1, shuffle_seats=False,
                                        params={"texts": TEXTS, "case": "de-en-1"},
                                        referees=(RefereeSpec(use="rules", params={"metric": "chrf"}),)), agents)
    assert record.payoffs == {"Translator": pytest.approx(100.0), "Proofreader": pytest.approx(100.0)}
    blind = {"t": scripted("t", "writer_editor"), "p": scripted("p", "writer_editor"),
             "judge": scripted("judge", "reference_judge")}
    record = await play_match(MatchSpec(key="k", game="translation", agents=("t", "p"), seed=1, shuffle_seats=False,
                                        params={"texts": TEXTS, "case": "de-en-1"}, referees=(JUDGED,)), blind)
    assert record.payoffs == {"Translator": 6.0, "Proofreader": 6.0}  # 1 + 9 x 0.5, rounded: nothing to compare with


def test_an_answers_file_that_is_not_there_is_reported_when_the_scenario_is_read(tmp_path):
    from arena.contract.errors import ConfigError
    from arena.run.scenario import parse_scenario

    raw = {"name": "t", "agents": {"a": {"backend": "scripted", "strategy": "writer_editor",
                                         "params": {"answers": str(tmp_path / "nowhere.jsonl")}},
                                   "b": {"backend": "scripted", "strategy": "writer_editor"}},
           "games": [{"game": "translation", "params": {"texts": TEXTS}}]}
    with pytest.raises(ConfigError, match=r"agents\.a\.params\.answers.*no answers file at .*nowhere\.jsonl"):
        parse_scenario(raw)
    broken = tmp_path / "broken.jsonl"
    broken.write_text(json.dumps({"source": "Hallo.", "reference": "Hello."}) + "\n{not json\n", encoding="utf-8")
    raw["agents"]["a"]["params"]["answers"] = str(broken)
    with pytest.raises(ConfigError, match=r"agents\.a\.params\.answers.*broken\.jsonl, line 2: not JSON"):
        parse_scenario(raw)
