"""Translation: chrF against the reference, one entry per language pair, the LLM judge, and the
role swap's agent x agent tables checked against hand-computed means."""

from __future__ import annotations

import random
from collections import defaultdict
from itertools import permutations

import pytest
from sacrebleu.metrics import CHRF

from arena.games.translation import Translation, TranslationParams, load_texts
from arena.engine.match import play_match
from arena.contract.records import MatchSpec
from arena.results.payoffs import role_tables, summarize
from arena.contract.referee import RefereeSpec
from arena.run.runner import run_tournament
from arena.run.scenario import load_scenario, parse_scenario

from helpers import ROOT, play, score_rows, scripted

TEXTS = str(ROOT / "scenarios" / "data" / "translation-samples.jsonl")


def test_the_sample_texts_cover_three_language_pairs_with_references():
    texts = load_texts(TEXTS)
    assert {t.pair for t in texts.values()} == {"de-en", "en-fr", "en-zh"}
    assert all(t.reference for t in texts.values())
    assert Translation.cases(TranslationParams(texts=TEXTS, language_pair="en-zh")) == ["en-zh-1", "en-zh-2", "en-zh-3"]
    with pytest.raises(ValueError, match=r"no text of language pair 'fr-de'.*de-en, en-fr, en-zh"):
        Translation.cases(TranslationParams(texts=TEXTS, language_pair="fr-de"))


async def test_chrf_scores_the_draft_and_the_polished_text_against_the_reference():
    text = load_texts(TEXTS)["de-en-1"]
    draft = "The train was twenty minutes late because a tree fell on the rails."
    agents = {"t": scripted("t", "fixed", params={"replies": [draft]}),
              "p": scripted("p", "fixed", params={"replies": [text.reference]})}  # its first turn, in round 2
    spec = MatchSpec(key="tr", game="translation", agents=("t", "p"), seed=1, shuffle_seats=False,
                     params={"texts": TEXTS, "case": "de-en-1"}, referees=(RefereeSpec(use="rules", params={"metric": "chrf"}),))
    record = await play_match(spec, agents)
    assert record.status == "finished", record.error
    expected = CHRF().sentence_score(draft, [text.reference]).score
    assert record.payoffs["Translator"] == pytest.approx(expected) and 30 < expected < 100
    assert record.payoffs["Proofreader"] == pytest.approx(100.0)  # polished to the reference itself
    assert record.metrics == {"chrf": record.payoffs}
    # the proofreader saw the source and the draft, nothing else
    prompt_seen = [m for m in record.messages if m.kind == "reply" and m.sender == "Translator"][0]
    assert prompt_seen.recipients == ("Proofreader",)


def test_the_judge_is_shown_source_draft_and_polished_text():
    g = Translation(TranslationParams(texts=TEXTS, case="en-fr-2"), ["Translator", "Proofreader"],
                    {"Translator": "Translator", "Proofreader": "Proofreader"}, random.Random(0))
    g.apply(1, {"Translator": "Ma grand-mère faisait pousser des tomates."})
    g.apply(2, {"Proofreader": "Ma grand-mère cultivait des tomates."})
    request = g.judge_request()
    assert request.seats == ("Translator", "Proofreader")
    assert "My grandmother grew tomatoes" in request.text and "faisait pousser" in request.text and "cultivait" in request.text
    assert "English" in request.text and "French" in request.text


async def test_every_ordered_pair_plays_both_roles_and_the_tables_match_hand_computed_means(monkeypatch):
    monkeypatch.chdir(ROOT)  # the scenario names its texts relative to the project
    scenario = load_scenario(ROOT / "scenarios" / "translation.yaml")
    result, records = await play(scenario)
    assert all(r.status == "finished" for r in records) and len(records) == 3 * 3 * 6 * 2
    agents = ["careful", "fluent", "hasty"]
    for group in ("de-en", "en-fr", "en-zh"):
        members = [r for r in records if r.group == group]
        played = {(r.agent_of("Translator"), r.agent_of("Proofreader")) for r in members}
        assert played == set(permutations(agents, 2))  # every ordered pair, i.e. both roles for each pair
        for metric in ("judge", "chrf"):
            (table,) = [t for t in role_tables(score_rows(records, metric), metric=metric) if t.group == group]
            cells, rows, cols = defaultdict(list), defaultdict(list), defaultdict(list)
            for r in members:
                t, p = r.agent_of("Translator"), r.agent_of("Proofreader")
                ts, ps = r.metrics[metric]["Translator"], r.metrics[metric]["Proofreader"]
                cells[(t, p)].append((ts, ps))
                rows[t].append(ts)
                cols[p].append(ps)
            for (t, p), values in cells.items():
                assert table.cells[t][p].scores == pytest.approx((sum(v[0] for v in values) / len(values),
                                                                  sum(v[1] for v in values) / len(values)))
            assert table.row_means == pytest.approx({a: sum(v) / len(v) for a, v in rows.items()})
            assert table.column_means == pytest.approx({a: sum(v) / len(v) for a, v in cols.items()})
            for a in agents:
                low, high = table.row_intervals[a]
                assert low <= table.row_means[a] <= high
    # the judge is the payoff: the payoff summary is the judge metric's
    judge_rows = {(s.group, s.agent, s.role): s.mean for s in summarize(score_rows(records, "judge"), metric="judge")}
    assert {(s.group, s.agent, s.role): s.mean for s in summarize(score_rows(records))} == judge_rows
    # skill shows: the most skilled writer's drafts come out on top in chrF
    chrf = [s for s in summarize(score_rows(records, "chrf"), metric="chrf") if s.group == "de-en" and s.role == "Translator"]
    assert max(chrf, key=lambda s: s.mean).agent == "fluent"


def test_a_judge_referee_naming_an_unknown_agent_is_caught_before_running():
    from arena.contract.errors import ConfigError

    raw = {"name": "t", "agents": {"a": {"backend": "scripted", "strategy": "writer_editor"},
                                   "b": {"backend": "scripted", "strategy": "writer_editor"}},
           "games": [{"game": "translation", "params": {"texts": TEXTS},
                      "referee": [{"use": "llm_judge", "agent": "jugde"}, {"use": "rules", "metrc": "chrf"}]}]}
    with pytest.raises(ConfigError) as caught:
        parse_scenario(raw)
    text = str(caught.value)
    assert "games[0].referee[0].agent" in text and "no agent named 'jugde'" in text
    assert "games[0].referee[1]" in text and "metrc" in text
    raw["games"][0]["referee"] = ["rules", {"use": "llm_judge", "agent": "a", "metric": "payoff"}]
    with pytest.raises(ConfigError, match=r"games\[0\]\.referee\[1\]\.metric: referees 0 and 1 both report the metric 'payoff'"):
        parse_scenario(raw)


def test_a_translator_that_gives_nothing_ends_the_match_and_arena_show_says_the_proofreader_was_not_asked(
        run_cli, tmp_path):
    import json

    import yaml

    agents = {"mute": {"backend": "scripted", "strategy": "fixed", "params": {"replies": [""]}},
              "editor": {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["Polished."]}}}
    raw = {"name": "mute", "seed": 1, "agents": agents,
           "games": [{"game": "translation", "agents": ["mute", "editor"],
                      "params": {"texts": TEXTS, "language_pair": "de-en", "limit": 1}}],
           "tournament": {"role_swap": False}, "match": {"max_retries": 1}}
    (tmp_path / "mute.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    result = run_cli("run", tmp_path / "mute.yaml", "--quiet", "--run-dir", tmp_path / "run", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    (record,) = [json.loads(line) for line in run_cli("export", tmp_path / "run", cwd=tmp_path).stdout.splitlines()]
    assert record["status"] == "finished" and record["rounds"] == 1
    assert [m["recipients"] for m in record["messages"] if m["kind"] == "prompt"] == [["Translator"]]
    assert record["payoffs"] == {"Translator": 0.0}  # chrF of no translation; the proofreader had no turn
    shown = run_cli("show", tmp_path / "run", "--match", record["key"], cwd=tmp_path,
                    env={**__import__("os").environ, "COLUMNS": "200"})
    assert shown.returncode == 0, shown.stderr
    text = " ".join(shown.stdout.split())
    assert "→ Translator action: None (default) — no valid reply in 2 attempts" in text
    assert "The translator gave no translation, so the proofreader was not asked: there was nothing to polish." in text


def test_the_judge_rates_only_the_translator_when_there_was_no_draft():
    import random

    params = TranslationParams(texts=TEXTS, case="de-en-1")
    game = Translation(params, ("Translator", "Proofreader"), {"Translator": "Translator", "Proofreader": "Proofreader"},
                       random.Random(1))
    (notice,) = game.apply(1, {"Translator": game.default_action("Translator", 1)})
    assert game.is_over(1) and notice.data == {"draft": None, "polished": None, "skipped": "Proofreader"}
    request = game.judge_request()
    assert request.seats == ("Translator",) and "gave no translation" in request.text
    assert load_texts(TEXTS)["de-en-1"].source in request.text
