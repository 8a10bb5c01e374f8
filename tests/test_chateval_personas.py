"""ChatEval's debaters with personas from a file (`personas: FILE`): the file's text reaches each
debater's request bodies, sent to the local mock (tests/mock_llm.py); a bad file is refused plainly."""

from __future__ import annotations

import re

import pytest
import yaml

from arena.contract.errors import ConfigError
from arena.run.runner import run_tournament
from arena.run.scenario import load_scenario
from arena.store import RunStore

from conformance_kit import BACKENDS, local_only, mock_server, model_agent, seat_turns  # noqa: F401  (local_only: autouse)
from helpers import ROOT
from test_conformance import pairs_file
from test_conformance_judging import debate_reply

PAPER = ROOT / "scenarios" / "data" / "chateval-paper-personas.yaml"
BUILT_IN = ("Everyday reader", "Domain expert", "Teacher")  # Arena's own personas: none of them may show


def write_scenario(folder, agents, personas, debaters=("ann", "bob", "cal")):
    (folder / "data").mkdir(exist_ok=True)
    pairs = pairs_file(folder / "data")
    raw = {"name": "personas", "seed": 5, "agents": agents,
           "games": [{"game": "chateval_debate", "agents": list(debaters),
                      "params": {"pairs": "data/" + pairs.rsplit("/", 1)[-1], "turns": 1, "output": "scores",
                                 "personas": personas}}],
           "tournament": {"role_swap": False}, "match": {"turn_timeout": 600, "max_retries": 0}}
    path = folder / "s.yaml"
    path.write_text(yaml.safe_dump(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize("backend", BACKENDS)
async def test_a_personas_file_reaches_each_debaters_requests(backend, tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "roles.yaml").write_text(PAPER.read_text(encoding="utf-8"), encoding="utf-8")
    paper = yaml.safe_load(PAPER.read_text(encoding="utf-8"))
    with mock_server(backend, debate_reply) as mock:
        agents = {n: model_agent(backend, mock, model=f"{n}-model") for n in ("ann", "bob", "cal")}
        scenario = load_scenario(write_scenario(tmp_path, agents, "data/roles.yaml"))  # read from the scenario's folder
        store = RunStore.create_or_resume(tmp_path / "run", scenario.name, "name: personas\n", scenario.fingerprint())
        try:
            await run_tournament(scenario, store)
            (record,) = list(store.read.records(status=None))
        finally:
            store.close()
        requests = [r for r in mock.answered() if not r.is_probe]
    assert record.status == "finished", record.error
    turns, outside = seat_turns(record, requests)
    assert not outside and len(turns) == 3
    # the debaters take the file's personas in its order, each sent its own name and description
    expected = list(paper.items())[:3]
    for turn in turns:
        n = int(re.fullmatch(r"Debater (\d)", turn.seat).group(1))
        name, description = expected[n - 1]
        assert f"You are {turn.seat}, a reviewer in a debate, speaking as: {name}. {' '.join(description.split())}" \
            in turn.text
        assert not any(other in turn.text for other, _ in expected if other != name)
        assert not any(built_in in turn.text for built_in in BUILT_IN)
    (data,) = [m.data for m in record.messages if m.kind == "notice"]
    assert data["personas"] == {"Debater 1": "General Public", "Debater 2": "Critic", "Debater 3": "News Author"}


def test_the_papers_roles_file_names_its_five_roles_in_our_own_words():
    paper = yaml.safe_load(PAPER.read_text(encoding="utf-8"))
    assert list(paper) == ["General Public", "Critic", "News Author", "Psychologist", "Scientist"]
    # written afresh: none of the paper's role prompts' phrasing ("one of the referees in this task")
    assert not any("one of the referees" in text or text.startswith("You are now") for text in paper.values())


@pytest.mark.parametrize("content, words", [
    ("- General Public\n- Critic\n", "expected a mapping of persona names to descriptions"),
    ("Critic: ''\n", "expected a mapping of persona names to descriptions"),
    ("Critic: [unclosed\n", "cannot be read"),
    ("Critic: You question everything.\n", "3 debaters but only 1 personas: add personas"),
])
def test_a_bad_personas_file_is_refused_when_the_scenario_is_read(tmp_path, content, words):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "roles.yaml").write_text(content, encoding="utf-8")
    agents = {n: {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": n}} for n in ("ann", "bob", "cal")}
    with pytest.raises(ConfigError, match=re.escape(words)):
        load_scenario(write_scenario(tmp_path, agents, "data/roles.yaml"))


def test_a_missing_personas_file_is_named_with_the_folder_it_was_read_from(tmp_path):
    agents = {n: {"backend": "scripted", "strategy": "synthetic_judge", "params": {"name": n}} for n in ("ann", "bob", "cal")}
    with pytest.raises(ConfigError, match="personas") as found:
        load_scenario(write_scenario(tmp_path, agents, "data/nowhere.yaml"))
    assert "relative paths are read from the scenario's folder" in str(found.value)
