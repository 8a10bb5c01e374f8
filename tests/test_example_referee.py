"""The worked example of docs/writing-a-referee.md: a referee that asks a judge agent which seat did
the best work (docs/examples/pick_best.py), installed as a package of its own through the guide's
entry point, scores a translation match from the command line. Its scores, its verdict, the judge's
calls and every request the judge's model was sent (recorded by tests/mock_llm.py) are checked."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import tomllib
from pathlib import Path

import pytest
import yaml

from arena.contract import MatchSettings, MatchSpec, RefereeSpec, plugins
from arena.engine.match import play_match
from arena.contract import open_run
from arena.store import RunStore

from conformance_kit import LOCAL, content, local_only  # noqa: F401  (local_only: a fixture)
from helpers import scripted
from mock_llm import OpenAIMock

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = ROOT / "docs" / "examples" / "pick_best.py"
GUIDE = ROOT / "docs" / "writing-a-referee.md"
SEATS = "Translator, Proofreader"


def guide_blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```$", GUIDE.read_text(encoding="utf-8"), re.MULTILINE | re.DOTALL)


def guide_file(language: str, first_line: str) -> str:
    (block,) = [b for b in guide_blocks(language) if b.startswith(first_line)]
    return block


def make_site(root: Path) -> Path:
    """site-packages as the guide's package leaves it: the module and its entry points."""
    project = tomllib.loads(guide_blocks("toml")[0])["project"]
    site = root / "site"
    dist = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    dist.mkdir(parents=True)
    shutil.copy(EXAMPLE, site / EXAMPLE.name)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\nVersion: {project['version']}\n")
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {target}\n" for name, target in eps.items())
        for group, eps in project["entry-points"].items()))
    return site


@pytest.fixture
def installed(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(make_site(tmp_path)))
    plugins.refresh()
    yield
    monkeypatch.undo()
    sys.modules.pop("pick_best", None)
    plugins.refresh()


def arena(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "160", "NO_PROXY": LOCAL, "no_proxy": LOCAL}
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=300)


def test_the_guide_shows_the_example_file_verbatim():
    assert guide_blocks("python")[0] == EXAMPLE.read_text(encoding="utf-8")


def test_every_other_snippet_of_the_guide_is_a_piece_of_this_file():
    here = Path(__file__).read_text(encoding="utf-8")
    for block in guide_blocks("python")[1:]:
        assert any(textwrap.indent(block, "    " * depth) in here for depth in range(3)), block[:200]


def judge_reply(body) -> str:
    """The first answer names no seat; asked again with the reason, the judge picks the proofreader."""
    said = [content(m) for m in body["messages"] if m["role"] == "assistant"]
    return "The polished text reads more naturally.\nBest: Proofreader" if said else "Both are fine translations."


def test_the_referee_judges_a_translation_from_its_entry_point(tmp_path):
    site = make_site(tmp_path)
    listed = arena(tmp_path, site, "referees", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "pick_best" in {r["name"] for r in json.loads(listed.stdout)}

    (tmp_path / "texts.jsonl").write_text(guide_file("json", '{"id": "cat"'), encoding="utf-8")
    raw = yaml.safe_load(guide_file("yaml", "# judged.yaml"))
    with OpenAIMock(responder=judge_reply) as mock:
        raw["agents"]["judge"]["base_url"] = mock.base_url  # the guide's judge, on the local server
        (tmp_path / "judged.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
        estimated = arena(tmp_path, site, "run", "judged.yaml", "--dry-run", "--json")
        assert estimated.returncode == 0 and not mock.requests, estimated.stderr  # priced on example_reply, offline
        assert [(a["agent"], a["calls"]) for a in json.loads(estimated.stdout)["agents"]] == [("judge", 1)]
        done = arena(tmp_path, site, "run", "judged.yaml", "--quiet", "--run-dir", "run")
        assert done.returncode == 0, done.stdout + done.stderr
        first, again = mock.answered()
    store = open_run(tmp_path / "run")
    try:
        (record,) = store.records()
        calls = list(store.calls())
    finally:
        store.close()

    # the scores: the seat the judge named scores 1, the other 0, beside the rules' chrF
    assert record.metrics["best"] == {"Translator": 0.0, "Proofreader": 1.0}
    assert set(record.metrics["chrf"]) == {"Translator", "Proofreader"}
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.recipients == () and verdict.data == {"referee": "pick_best", "agent": "judge", "best": "Proofreader"}
    assert verdict.content == "judge judged Proofreader best."

    # what the judge was sent: the game's brief with both texts, then the referee's question; no agent's name
    source = json.loads(guide_file("json", '{"id": "cat"'))["source"]
    draft, polished = (m.content for m in record.messages if m.kind == "reply")
    asked = content(first.messages[-1])
    assert [m["role"] for m in first.messages] == ["user"] and asked.startswith("You are a translation expert")
    for part in (source, draft, polished):
        assert part in asked
    assert asked.endswith(f"\n\nWhich of {SEATS} did the best work? Explain briefly, then end with a line of its "
                          f"own: 'Best: <one of {SEATS}>'.")
    assert not any(name in asked for name in ("wren", "finch"))
    # asked again: its own answer, then the reason and the same question
    reason = f"End your reply with a line 'Best: <seat>' naming one of {SEATS}."
    assert again.messages[:-2] == first.messages
    assert again.messages[-2] == {"role": "assistant", "content": "Both are fine translations."}
    assert content(again.messages[-1]) == f"{reason} {asked}"
    (failed,) = [e for e in record.events if e.type == "turn_failed"]
    assert failed.reason == reason

    # the run logged both of the judge's calls under its name, without an error
    assert [(c.agent, c.error, c.attempt) for c in sorted(calls, key=lambda c: c.attempt)] == [
        ("judge", None, 0), ("judge", None, 1)]


def test_validate_refuses_the_referee_for_a_game_with_nothing_to_judge(tmp_path):
    site = make_site(tmp_path)
    raw = yaml.safe_load(guide_file("yaml", "# judged.yaml"))
    raw["agents"]["judge"] = {"backend": "scripted", "strategy": "fixed", "params": {"replies": ["Best: Player 1"]}}
    raw["games"] = [{"game": "public_goods", "agents": ["wren", "finch"],
                     "referee": [{"use": "pick_best", "agent": "judge"}]}]
    (tmp_path / "pg.yaml").write_text(yaml.safe_dump(raw), encoding="utf-8")
    refused = arena(tmp_path, site, "validate", "pg.yaml")
    assert refused.returncode == 2 and "judge_request" in refused.stdout + refused.stderr


async def test_a_judge_that_names_no_seat_leaves_the_match_unscored(installed, tmp_path):
    texts = tmp_path / "texts.jsonl"
    texts.write_text(guide_file("json", '{"id": "cat"'), encoding="utf-8")
    agents = {"wren": scripted("wren", "fixed", params={"replies": ["The cat sleeps."]}),
              "finch": scripted("finch", "fixed", params={"replies": ["The cat is sleeping."]}),
              "judge": scripted("judge", "fixed", params={"replies": ["Best: the cat"]})}
    spec = MatchSpec(key="t#1", game="translation", params={"texts": str(texts), "case": "cat"}, agents=("wren", "finch"),
                     seed=1, shuffle_seats=False, referees=(RefereeSpec(use="pick_best", params={"agent": "judge"}),),
                     settings=MatchSettings(turn_timeout=30, max_retries=1))
    record = await play_match(spec, agents)
    assert record.status == "finished", record.error
    assert record.metrics["best"] == {} and record.payoffs == {}
    (verdict,) = [m for m in record.messages if m.kind == "verdict"]
    assert verdict.data["best"] is None and verdict.content == "judge named no seat."
    assert len([e for e in record.events if e.type == "turn_failed"]) == 2  # asked, and asked once more
