"""Panels of judges: the panel referee (vote, mean, weighted, quorum), pairwise review's panel of
judge seats, the members' agreement (Fleiss' kappa) and where a user reads it: `arena rank`,
`arena rank --json` and the report."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
import trio
import yaml

from arena.contract.errors import ConfigError
from arena.contract.panels import TIE, choice, vote
from arena.contract.records import MatchSettings, MatchSpec
from arena.contract.referee import RefereeSpec
from arena.engine.match import play_match
from arena.rank.agreement import fleiss_kappa, panel_agreement
from arena.results.summary import rank_json
from arena.run.runner import run_tournament
from arena.run.scenario import parse_scenario
from arena.store import RunStore

from conformance_kit import local_only, model_agent, play, scenario  # noqa: F401  (local_only: autouse)
from helpers import arena_offline, scripted
from mock_llm import OpenAIMock, body_text, is_probe

SOURCE = "Die Katze schläft auf dem warmen Fensterbrett, während es draußen regnet."
DRAFT = "The cat sleeps on the warm window sill while it rains."
POLISHED = "The cat sleeps on the warm windowsill while it rains outside."


@pytest.fixture
def texts(tmp_path):
    path = tmp_path / "texts.jsonl"
    path.write_text(json.dumps({"id": "t1", "source_lang": "de", "target_lang": "en", "source": SOURCE,
                                "reference": POLISHED}) + "\n", encoding="utf-8")
    return str(path)


def verdict_json(translator: int, proofreader: int) -> str:
    return json.dumps({"Translator": {"evaluation": "faithful", "score": translator},
                       "Proofreader": {"evaluation": "polished", "score": proofreader}})


def seats():
    return {"xavera": scripted("xavera", "fixed", params={"replies": [DRAFT]}),
            "yorick": scripted("yorick", "fixed", params={"replies": [POLISHED]})}


def judge(name: str, *replies: str):
    return scripted(name, "fixed", params={"replies": list(replies)})


def translation(texts: str, agents: dict, **panel) -> MatchSpec:
    return MatchSpec(key="t", game="translation", agents=("xavera", "yorick"), seed=1, shuffle_seats=False,
                     params={"texts": texts}, settings=MatchSettings(max_retries=0),
                     referees=(RefereeSpec(use="panel", params=panel),))


def verdict_of(record):
    (verdict,) = [m for m in record.messages if m.kind == "verdict" and m.data.get("referee") == "panel"]
    return verdict


# -- Fleiss' kappa and the combining rules ---------------------------------------------------------------
def test_fleiss_kappa_of_a_panel_against_a_hand_computed_case():
    # 3 members, 4 items. Agreement per item: 1, 1/3, 1, 0 -> mean 7/12. Shares over the 12 verdicts:
    # 0: 6/12, 1: 5/12, tie: 1/12 -> chance 62/144. Kappa = (84 - 62) / (144 - 62) = 11/41.
    items = [[0, 0, 0], [0, 0, 1], [1, 1, 1], [0, 1, TIE]]
    assert panel_agreement(items) == pytest.approx(11 / 41)
    numeric = [[{TIE: 2}.get(v, v) for v in item] for item in items]
    assert fleiss_kappa(__import__("numpy").array(numeric)) == pytest.approx(11 / 41)  # the same as the classic one
    # a member missing from an item: that item's agreement is over the two who gave a verdict; one verdict says nothing
    assert panel_agreement([[0, 0], [0, 1, 1], [1]]) == pytest.approx(
        ((1 + 1 / 3) / 2 - ((3 / 5) ** 2 + (2 / 5) ** 2)) / (1 - ((3 / 5) ** 2 + (2 / 5) ** 2)))
    assert panel_agreement([[0], []]) is None
    assert panel_agreement([[1, 1], [1, 1]]) == 1.0


def test_vote_and_choice():
    assert vote({"a": "X", "b": "X", "c": "Y"}) == "X"
    assert vote({"a": "X", "b": "Y", "c": None}) == TIE  # two lead together
    assert vote({"a": "X", "b": "Y", "c": "Y"}, weights={"a": 3.0, "b": 1.0, "c": 1.0}) == "X"
    assert vote({"a": None}) is None
    assert choice({"X": 7, "Y": 7}) == TIE and choice({"X": 2, "Y": 7}) == "Y" and choice({}) is None


# -- the panel referee ---------------------------------------------------------------------------------
async def test_the_panel_referee_gives_the_majority_and_records_each_member(texts):
    agents = {**seats(), "j1": judge("j1", verdict_json(8, 5)), "j2": judge("j2", verdict_json(7, 6)),
              "j3": judge("j3", verdict_json(2, 9))}
    record = await play_match(translation(texts, agents, members=["j1", "j2", "j3"]), agents)
    assert record.status == "finished", record.error
    # j1 and j2 scored the Translator higher, j3 the Proofreader: the panel's vote goes to the Translator
    assert record.metrics["panel"] == {"Translator": 1.0, "Proofreader": 0.0}
    verdict = verdict_of(record)
    assert verdict.recipients == ()
    assert verdict.data["verdicts"]["j3"]["Proofreader"] == {"score": 9, "evaluation": "polished"}
    assert verdict.data["panel"]["items"] == [{"item": "best", "options": ["Translator", "Proofreader"],
                                               "verdict": "Translator",
                                               "members": {"j1": "Translator", "j2": "Translator", "j3": "Proofreader"}}]
    assert "j3: Translator 2/10; Proofreader 9/10" in verdict.content


async def test_mean_and_weighted_rules(texts):
    agents = {**seats(), "j1": judge("j1", verdict_json(8, 5)), "j2": judge("j2", verdict_json(7, 6)),
              "j3": judge("j3", verdict_json(2, 10))}
    members = ["j1", "j2", "j3"]
    mean = await play_match(translation(texts, agents, members=members, rule="mean"), agents)
    assert mean.metrics["panel"] == pytest.approx({"Translator": 17 / 3, "Proofreader": 7.0})
    assert verdict_of(mean).data["panel"]["items"][0]["verdict"] == "Proofreader"  # the mean overrules the vote
    weighted = await play_match(translation(texts, agents, members=members, rule="weighted",
                                            weights={"j1": 2.0, "j2": 2.0, "j3": 0.5}), agents)
    # (2*8 + 2*7 + 0.5*2) / 4.5 and (2*5 + 2*6 + 0.5*10) / 4.5
    assert weighted.metrics["panel"] == pytest.approx({"Translator": 31 / 4.5, "Proofreader": 27 / 4.5})
    assert verdict_of(weighted).data["panel"]["weights"] == {"j1": 2.0, "j2": 2.0, "j3": 0.5}


async def test_the_quorum_leaves_a_match_unscored_rather_than_judged_by_a_minority(texts):
    agents = {**seats(), "j1": judge("j1", verdict_json(8, 5)), "j2": judge("j2", "I would rather not say."),
              "j3": judge("j3", "No comment.")}
    record = await play_match(translation(texts, agents, members=["j1", "j2", "j3"]), agents)  # default: 2 of 3
    assert record.status == "finished" and record.metrics["panel"] == {}
    verdict = verdict_of(record)
    assert verdict.content.startswith("The panel (vote) reached no verdict: 1 of 3 members gave one, 2 needed")
    assert verdict.data["scores"] is None and verdict.data["verdicts"]["j2"] is None
    assert verdict.data["panel"]["items"][0] == {"item": "best", "options": ["Translator", "Proofreader"],
                                                 "verdict": None, "members": {"j1": "Translator", "j2": None, "j3": None}}
    enough = await play_match(translation(texts, agents, members=["j1", "j2", "j3"], quorum=1), agents)
    assert enough.metrics["panel"] == {"Translator": 1.0, "Proofreader": 0.0}


async def test_weights_from_a_peer_rank_run(tmp_path, texts):
    # a peer review of the same three judges, ranked with --weighted's weights and saved as `arena rank --json` does
    questions = tmp_path / "questions.jsonl"
    questions.write_text("".join(json.dumps({"id": f"q{i}", "question": f"Question {i}?"}) + "\n" for i in range(3)))
    peers = {"j1": {"quality": 0.9, "skill": 0.0}, "j2": {"quality": 0.6, "skill": 0.0},
             "j3": {"quality": 0.2, "skill": 0.0, "position_bias": 0.9}}
    raw = {"name": "peers", "seed": 3, "tournament": {"role_swap": False},
           "agents": {n: {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": n, **p}}
                      for n, p in peers.items()},
           "games": [{"game": "pairwise_review", "params": {"questions": str(questions), "contestants": 3, "peer": True,
                                                            "swap": False}}]}
    parsed = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "peers", parsed.name, yaml.safe_dump(raw), parsed.fingerprint())
    try:
        await run_tournament(parsed, store)
        ranked = rank_json(store.read, weighted=True)
    finally:
        store.close()
    weights = next(m["weights"] for m in ranked["peer_rank"]["methods"] if m["weights"])
    (tmp_path / "rank.json").write_text(json.dumps(ranked), encoding="utf-8")

    agents = {**seats(), "j1": judge("j1", verdict_json(8, 5)), "j2": judge("j2", verdict_json(7, 6)),
              "j3": judge("j3", verdict_json(2, 10))}
    record = await play_match(translation(texts, agents, members=["j1", "j2", "j3"], rule="weighted",
                                          weights_from=str(tmp_path / "rank.json")), agents)
    total = sum(weights.values())
    expected = {"Translator": (8 * weights["j1"] + 7 * weights["j2"] + 2 * weights["j3"]) / total,
                "Proofreader": (5 * weights["j1"] + 6 * weights["j2"] + 10 * weights["j3"]) / total}
    assert weights["j1"] > weights["j3"]  # the peer review found the biased, weak judge out
    assert record.metrics["panel"] == pytest.approx(expected)
    assert verdict_of(record).data["panel"]["weights"] == pytest.approx(weights)


def translation_scenario(texts: str, **panel) -> dict:
    agents = {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["x"]}}
              for n in ("xavera", "yorick", "j1", "j2", "j3")}
    return {"name": "p", "agents": agents, "games": [{"game": "translation", "agents": ["xavera", "yorick"],
                                                      "params": {"texts": texts}, "referee": [{"use": "panel", **panel}]}],
            "tournament": {"role_swap": False}}


@pytest.mark.parametrize("panel, message", [
    ({"members": ["j1"]}, r"members.*at least 2"),
    ({"members": ["j1", "j2", "j1"]}, "members names j1 twice"),
    ({"members": ["j1", "j2", "nobody"]}, "nobody"),
    ({"members": ["j1", "j2"], "quorum": 3}, "quorum 3 is more than the panel's 2 members"),
    ({"members": ["j1", "j2"], "weights": {"j1": 1, "j2": 2}}, "weights is only read with rule: weighted"),
    ({"members": ["j1", "j2"], "rule": "weighted"}, "rule weighted needs the members' weights"),
    ({"members": ["j1", "j2"], "rule": "weighted", "weights": {"j1": 1}}, "weights give no weight for j2"),
    ({"members": ["j1", "j2"], "rule": "weighted", "weights": {"j1": -1, "j2": 0}}, "weights must be 0 or more"),
    ({"members": ["j1", "j2"], "rule": "weighted", "weights_from": "missing.json"}, "weights_from: no file at"),
    ({"members": ["j1", "j2"], "rule": "majority"}, "rule"),
])
def test_a_bad_panel_is_refused_with_a_sentence(texts, panel, message):
    with pytest.raises(ConfigError, match=message):
        parse_scenario(translation_scenario(texts, **panel))


@pytest.mark.parametrize("content, message", [
    ("not json", "is not JSON"),
    ('{"peer_rank": null}', "holds no peer rank"),
    ('{"peer_rank": {"methods": [{"weights": null}], "pairwise_weights": null}}', "holds no reviewer weights"),
])
def test_a_weights_file_that_is_no_weighted_peer_rank_is_refused(tmp_path, texts, content, message):
    path = tmp_path / f"rank-{abs(hash(content))}.json"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(ConfigError, match=message):
        parse_scenario(translation_scenario(texts, members=["j1", "j2"], rule="weighted", weights_from=str(path)))


def test_arena_validate_says_what_is_wrong_with_a_panel(tmp_path, texts):
    path = tmp_path / "bad.yaml"
    path.write_text(yaml.safe_dump(translation_scenario(texts, members=["j1", "j2"], rule="weighted")), encoding="utf-8")
    done = arena_offline("validate", path, cwd=tmp_path)
    assert done.returncode == 2
    assert "rule weighted needs the members' weights" in done.stdout + done.stderr
    assert "Traceback" not in done.stderr


# -- what the members are sent ---------------------------------------------------------------------------
def members_reply(body) -> str:
    leaning = {"judge-a": (8, 5), "judge-b": (7, 6), "judge-c": (3, 9)}[body["model"]]
    return verdict_json(*leaning)


async def test_members_are_asked_at_once_and_sent_the_anonymised_brief(tmp_path, texts):
    # every member's request is held at the server until all three have arrived: they were asked concurrently
    mock = OpenAIMock(responder=members_reply, script=lambda count, body: "ok" if is_probe(body) else "gate:panel")
    with mock:
        agents = {"xavera": {"backend": "scripted", "strategy": "fixed", "params": {"replies": [DRAFT]}},
                  "yorick": {"backend": "scripted", "strategy": "fixed", "params": {"replies": [POLISHED]}},
                  **{f"m{x}": model_agent("openai", mock, model=f"judge-{x}") for x in "abc"}}
        raw = scenario("panel", agents, "translation", {"texts": texts}, tournament={"role_swap": False},
                       referee=[{"use": "panel", "members": ["ma", "mb", "mc"]}])
        raw["games"][0]["agents"] = ["xavera", "yorick"]
        records = []

        async def run():
            records.extend(await play(tmp_path, raw))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            held = await trio.to_thread.run_sync(lambda: mock.wait_until(lambda m: len(m.turns()) >= 3))
            mock.open_gate("panel")
        assert held
        asked = mock.turns()
    (record,) = records
    assert record.metrics["panel"] == {"Translator": 1.0, "Proofreader": 0.0}
    assert sorted(r.body["model"] for r in asked) == ["judge-a", "judge-b", "judge-c"]  # one request each
    for request in asked:
        text = body_text(request.body)
        for part in (SOURCE, DRAFT, POLISHED, "Score each of Translator, Proofreader on a scale of 1 to 10"):
            assert part in text, part
        for name in ("xavera", "yorick", "ma", "mb", "mc"):  # who wrote what, and who else judges, is not said
            assert not re.search(rf"\b{name}\b", text), name
    verdict = verdict_of(record)
    assert verdict.data["panel"]["items"][0]["members"] == {"ma": "Translator", "mb": "Translator", "mc": "Proofreader"}


# -- a panel of judge seats in pairwise review -------------------------------------------------------------
@pytest.fixture
def questions(tmp_path):
    path = tmp_path / "questions.jsonl"
    path.write_text("".join(json.dumps({"id": f"q{i}", "question": f"How does thing {i} work?"}) + "\n"
                            for i in range(1, 4)), encoding="utf-8")
    return path


def fixed_round(name, *replies):
    return scripted(name, "fixed", params={"replies": list(replies), "cycle": "round"})


async def test_pairwise_review_panel_vote_and_mean(tmp_path, questions):
    agents = {"x": fixed_round("x", "Answer X."), "y": fixed_round("y", "Answer Y."),
              "j1": fixed_round("j1", "", "Fine.\n1 2"), "j2": fixed_round("j2", "", "Fine.\n1 2"),
              "j3": fixed_round("j3", "", "No.\n10 1")}

    def spec(**params):
        return MatchSpec(key="m", game="pairwise_review", agents=tuple(agents), seed=1, shuffle_seats=False,
                         params={"questions": str(questions), "case": "q1", "swap": False, **params})

    alone = await play_match(spec(), agents)
    assert alone.payoffs["Contestant 2"] == pytest.approx(2 / 3)  # each judge's verdict counts on its own
    voted = await play_match(spec(panel="vote"), agents)
    assert voted.payoffs["Contestant 1"] == 0.0 and voted.payoffs["Contestant 2"] == 1.0  # two of three: y
    (notice,) = [m for m in voted.messages if m.kind == "notice"]
    assert notice.data["panel"]["items"] == [{"item": "q1", "options": ["Contestant 1", "Contestant 2"],
                                              "verdict": "Contestant 2", "members": {
                                                  "Judge 1": "Contestant 2", "Judge 2": "Contestant 2",
                                                  "Judge 3": "Contestant 1"}}]
    assert notice.data["panel"]["members_are"] == "seats"
    meant = await play_match(spec(panel="mean"), agents)
    # the mean difference (1 + 1 - 9) / 3 < 0: x, whom only one judge preferred, but by far
    assert meant.payoffs["Contestant 1"] == 1.0 and meant.payoffs["Contestant 2"] == 0.0
    # the reviews are each judge's, for peer rank, whatever the panel decided
    assert {r.reviewer for r in meant.reviews} == {"j1", "j2", "j3"}


def test_a_pairwise_panel_needs_two_judges(questions):
    raw = {"name": "p", "agents": {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["x"]}}
                                   for n in ("x", "y", "j1")},
           "games": [{"game": "pairwise_review", "params": {"questions": str(questions), "panel": "vote"}}],
           "tournament": {"role_swap": False}}
    with pytest.raises(ConfigError, match="a panel needs two judges or more; this match has 1"):
        parse_scenario(raw)


SYNTHETIC = """\
name: biased-panel
seed: 7
agents:
  good:   {backend: scripted, strategy: synthetic_contestant, params: {name: good, quality: 0.9, verbosity: 0.5}}
  wordy:  {backend: scripted, strategy: synthetic_contestant, params: {name: wordy, quality: 0.3, verbosity: 3}}
  fair:   {backend: scripted, strategy: synthetic_judge, params: {name: fair}}
  firsty: {backend: scripted, strategy: synthetic_judge, params: {name: firsty, position_bias: 1.0}}
  lengthy: {backend: scripted, strategy: synthetic_judge, params: {name: lengthy, verbosity_bias: 0.5}}
games:
  - game: pairwise_review
    agents: [good, wordy, fair, firsty, lengthy]
    params: {questions: questions.jsonl, contestants: 2, output: choice, swap: false, panel: vote}
tournament: {role_swap: false}
"""


def test_three_synthetic_judges_with_known_biases_in_rank_and_report(tmp_path, questions):
    # good's answer is shown first and is better; firsty favours the first shown, lengthy the longer (wordy's):
    # fair and firsty outvote lengthy on every question
    (tmp_path / "panel.yaml").write_text(SYNTHETIC, encoding="utf-8")
    run_dir = tmp_path / "run"
    done = arena_offline("run", "panel.yaml", "--quiet", "--run-dir", run_dir, cwd=tmp_path)
    assert done.returncode == 0, done.stderr

    ranked = arena_offline("rank", run_dir, "--json", cwd=tmp_path)
    assert ranked.returncode == 0, ranked.stderr
    rank = json.loads(ranked.stdout)
    payoffs = {r["agent"]: r["mean"] for r in rank["payoffs"] if r["agent"] in ("good", "wordy")}
    assert payoffs == {"good": 1.0, "wordy": 0.0}
    (panel,) = rank["panels"]
    assert (panel["name"], panel["rule"], panel["items"], panel["decided"]) == ("judges", "vote", 3, 3)
    assert [v["verdict"] for v in panel["verdicts"]] == ["good"] * 3
    assert all(v["options"] == ["good", "wordy"] for v in panel["verdicts"])
    assert all(v["members"] == {"fair": "good", "firsty": "good", "lengthy": "wordy"} for v in panel["verdicts"])
    members = {m["agent"]: (m["items"], m["verdicts"], m["with_panel"]) for m in panel["members"]}
    assert members == {"fair": (3, 3, 1.0), "firsty": (3, 3, 1.0), "lengthy": (3, 3, 0.0)}
    # every item splits 2 to 1: agreement 1/3 per item, chance (2/3)^2 + (1/3)^2 = 5/9: kappa (1/3 - 5/9) / (4/9)
    assert panel["fleiss_kappa"] == pytest.approx(-0.5)

    shown = arena_offline("rank", run_dir, "--plain", cwd=tmp_path)
    assert shown.returncode == 0, shown.stderr
    assert "panel judges (vote), 3 of 3 items decided; the members' agreement, Fleiss' kappa -0.500" in shown.stdout
    lines = shown.stdout.splitlines()
    assert "lengthy\t3\t3\t0.000" in lines and "fair\t3\t3\t1.000" in lines

    made = arena_offline("report", run_dir, "-o", tmp_path / "report.html", cwd=tmp_path)
    assert made.returncode == 0, made.stderr
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    section = html[html.index('<section id="panels">'):]
    section = section[:section.index("</section>")]
    assert "Fleiss' κ over the items: -0.500" in unescape(section)
    assert re.search(r"<td[^>]*>lengthy</td><td[^>]*>3</td><td[^>]*>3</td><td[^>]*>0\.000</td>", section)
    assert section.count("<td>good / wordy</td>") == 3
    assert '<a href="#panels">Panels of judges</a>' in html


# -- a debate's debaters as a panel ------------------------------------------------------------------------
async def test_a_debates_debaters_are_recorded_as_a_panel(tmp_path):
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text('{"id": "p1", "question": "Q?", "answer_a": "A.", "answer_b": "B.", "label": 1}\n')
    said = {"ann": "1", "ben": "2", "cy": "2"}  # fixed choices: the majority says the second shown is better
    agents = {n: scripted(n, "fixed", params={"replies": [f"{n} argues.\nVerdict: {v}"]}) for n, v in said.items()}
    record = await play_match(MatchSpec(key="d", game="chateval_debate", agents=tuple(agents), seed=1, shuffle_seats=False,
                                        params={"pairs": str(pairs), "case": "p1", "turns": 1}), agents)
    (notice,) = [m for m in record.messages if m.kind == "notice"]
    assert notice.data["panel"] == {
        "name": "debaters", "rule": "vote", "members_are": "seats", "weights": None,
        "items": [{"item": "p1", "options": ["Assistant 1", "Assistant 2"], "verdict": "Assistant 2",
                   "members": {"Debater 1": "Assistant 1", "Debater 2": "Assistant 2", "Debater 3": "Assistant 2"}}]}


async def test_a_member_that_never_answers_is_left_out_at_the_turn_timeout(texts, autojump_clock):
    agents = {**seats(), "j1": judge("j1", verdict_json(8, 5)), "j2": judge("j2", verdict_json(3, 6)),
              "j3": scripted("j3", "hang")}
    spec = translation(texts, agents, members=["j1", "j2", "j3"], rule="mean")
    spec = spec.model_copy(update={"settings": MatchSettings(max_retries=0, turn_timeout=30)})
    record = await play_match(spec, agents)
    assert record.status == "finished", record.error
    assert record.metrics["panel"] == {"Translator": 5.5, "Proofreader": 5.5}  # the two who answered, in time
    data = verdict_of(record).data
    assert data["verdicts"]["j3"] is None and data["panel"]["items"][0]["members"]["j3"] is None
    assert data["panel"]["items"][0]["verdict"] == TIE


async def test_members_of_weight_zero_give_no_weighted_verdict(texts):
    agents = {**seats(), "j1": judge("j1", verdict_json(8, 5)), "j2": judge("j2", verdict_json(7, 6)),
              "j3": judge("j3", "No comment.")}
    record = await play_match(translation(texts, agents, members=["j1", "j2", "j3"], rule="weighted",
                                          weights={"j1": 0, "j2": 0, "j3": 1}), agents)
    assert record.metrics["panel"] == {}
    assert "reached no verdict: the members who gave one all weigh 0" in verdict_of(record).content
