"""Scenario input that never slips through, and validation of what would otherwise fail only
after paying: every malformed file of tests/bad_scenarios is refused (exit 2) with a short
message naming the file, the field and a fix; paths are read from the scenario's folder;
names stay inside the output folder; sizes are counted, not built; a referee's needs, a game's
rotating roles and its rounds are checked before play."""

from __future__ import annotations

import ast
import json
import math
import os
import shutil
import textwrap
from pathlib import Path

import pytest
import trio
import yaml

from arena.cli.commands import main
from arena.contract import Game, Judged, Notice, WritesCode, plugins
from arena.contract.capabilities import has
from arena.contract.errors import ConfigError
from arena.engine.match import play_match
from arena.run import tournament
from arena.run.runner import build_agents, run_tournament
from arena.run.scenario import MAX_MATCHES, load_scenario, name_problem, parse_scenario
from arena.run.yamlfile import MAX_BYTES, parse_yaml
from arena.store import RunStore

from helpers import ROOT, play
from mock_llm import OpenAIMock

CORPUS = Path(__file__).parent / "bad_scenarios"
EXPECTED = yaml.safe_load((CORPUS / "expected.yaml").read_text(encoding="utf-8"))
LONGEST = 1500  # characters: an error says what is wrong, it does not quote a megabyte back
DATA = ROOT / "scenarios" / "data"
TWO = {"a": {"backend": "scripted", "strategy": "free_rider"}, "b": {"backend": "scripted", "strategy": "always_all"}}


def flat(text: str) -> str:
    return " ".join(text.split())


def validate(path: Path, capsys) -> tuple[int, str, str]:
    code = main(["validate", str(path)])
    out = capsys.readouterr()
    return code, out.out, out.err


def write(folder: Path, text: str, name: str = "s.yaml") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


# -- the corpus ---------------------------------------------------------------------------
def test_the_corpus_lists_every_file_it_holds_and_holds_forty():
    files = {p.name for p in CORPUS.iterdir() if p.name.endswith(".yaml")} - {"expected.yaml"}
    assert files == set(EXPECTED)
    assert len(files) >= 40
    assert all(entry["exit"] == 2 and entry["says"] for entry in EXPECTED.values())


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_a_malformed_scenario_is_refused_with_a_short_message_naming_file_field_and_fix(name, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)  # the corpus is read from its own folder, not from where arena runs
    path = CORPUS / name
    code, out, err = validate(path, capsys)
    message = flat(err)
    assert code == EXPECTED[name]["exit"], err
    assert message.startswith(f"error: {path}: "), message
    for fragment in EXPECTED[name]["says"]:
        assert fragment in message, f"{fragment!r} not in {message!r}"
    assert len(err) <= LONGEST
    assert out == "" and "Traceback" not in err
    assert list(tmp_path.iterdir()) == []  # nothing is written for a bad scenario


@pytest.mark.parametrize("name", sorted(n for n, e in EXPECTED.items() if e.get("run")))
def test_the_command_refuses_it_for_validate_and_run_without_a_traceback_or_a_run_directory(name, run_cli, tmp_path):
    for command in ("validate", "run"):
        result = run_cli(command, CORPUS / name, cwd=tmp_path)
        assert result.returncode == 2, (command, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and len(result.stderr) <= LONGEST
        for fragment in EXPECTED[name]["says"]:
            assert fragment in flat(result.stderr), (command, fragment, result.stderr)
    assert list(tmp_path.iterdir()) == []  # `arena run` made no runs/ folder


def test_a_misspelt_key_is_pointed_at_instead_of_a_missing_field(tmp_path, capsys):
    for name, wrong, missing in (("misspelt-backend-key.yaml", "agents.a.backnd", "agents.a.backend"),
                                 ("misspelt-top-key.yaml", "agnets", "agents")):
        code, _, err = validate(CORPUS / name, capsys)
        assert code == 2 and f"{wrong}: unknown field" in err
        assert f"{missing}: required field is missing" not in err


def test_a_file_over_the_size_limit_is_refused_before_it_is_read(tmp_path, capsys):
    path = tmp_path / "big.yaml"
    path.write_bytes(b"name: t\n" + b"# padding\n" * (MAX_BYTES // 10 + 1))
    code, _, err = validate(path, capsys)
    assert code == 2 and f"a scenario file may be at most {MAX_BYTES:,}" in flat(err) and len(err) <= LONGEST


def test_a_pipe_is_not_a_scenario_and_is_never_opened(run_cli, tmp_path):
    pipe = tmp_path / "pipe.yaml"
    os.mkfifo(pipe)  # opening it would wait for a writer forever
    result = run_cli("validate", pipe, cwd=tmp_path, timeout=60)
    assert result.returncode == 2 and "is not a regular file" in result.stderr


def test_an_error_lists_at_most_25_problems_and_counts_the_rest(tmp_path, capsys):
    agents = "".join(f"  p{i}: {{backend: scripted, strategy: nope{i}}}\n" for i in range(200))
    path = write(tmp_path, "name: t\nagents:\n" + agents + "games: [{game: public_goods}]\n")
    code, _, err = validate(path, capsys)
    assert code == 2 and "200 problem(s)" in err and "… and 175 more" in err
    assert len(err.splitlines()) == 1 + 25 + 1


# -- the YAML reader ----------------------------------------------------------------------
def test_merge_keys_may_override_what_they_merge_and_duplicates_are_found_at_any_depth():
    assert parse_yaml("base: &b {x: 1, y: 2}\nthis:\n  <<: *b\n  x: 3\n", "f") == {"base": {"x": 1, "y": 2}, "this": {"x": 3, "y": 2}}
    with pytest.raises(ConfigError) as caught:
        parse_yaml("a:\n  - {k: 1}\n  - b:\n      c: 1\n      c: 2\n", "f.yaml")
    assert str(caught.value) == "f.yaml: a[1].b.c: the key 'c' is given twice (lines 4 and 5); YAML would keep only the last: keep one"


def test_an_alias_bomb_is_stopped_before_it_is_built():
    levels = ["l0: &l0 [x, x, x, x, x, x, x, x, x, x]"] + [
        f"l{i}: &l{i} [{', '.join([f'*l{i - 1}'] * 10)}]" for i in range(1, 12)]  # 10^12 values once expanded
    with pytest.raises(ConfigError) as caught:
        parse_yaml("\n".join(levels), "bomb.yaml")
    assert "more than 100,000 values once its aliases" in str(caught.value) and len(str(caught.value)) < 300


# -- paths resolve against the scenario file --------------------------------------------------
@pytest.mark.parametrize("path", sorted((ROOT / "scenarios").glob("*.yaml")), ids=lambda p: p.name)
def test_an_example_plans_from_any_folder_the_matches_validate_counts(path, tmp_path, monkeypatch, capsys):
    if "../shared/data" in path.read_text() and not (ROOT.parent / "shared" / "data").is_dir():
        pytest.skip("this scenario reads ../shared/data, which is not beside this checkout")
    monkeypatch.chdir(tmp_path)
    code, out, _ = validate(path, capsys)
    specs = tournament.plan(load_scenario(path))
    assert code == 0 and f"{len(specs)} matches" in out
    for spec in specs:  # every data file the matches read is a real file beside the example
        for value in spec.params.values():
            if isinstance(value, str) and value.endswith(".jsonl"):
                assert Path(value).is_absolute() and Path(value).is_file()


def test_data_paths_are_read_from_the_scenario_folder_whatever_folder_arena_runs_in(tmp_path, monkeypatch, capsys):
    here, elsewhere = tmp_path / "here", tmp_path / "elsewhere"
    text = """
        name: discuss
        agents:
          a: {backend: scripted, strategy: synthetic_judge, params: {name: a}}
          b: {backend: scripted, strategy: synthetic_judge, params: {name: b}}
        games:
          - {game: peer_discussion, params: {pairs: pairs.jsonl, max_turns: 1}}
        prices: prices.yaml
        """
    path = write(here, text)
    shutil.copy(DATA / "sample-pairs.jsonl", here / "pairs.jsonl")
    (here / "prices.yaml").write_text("my-model: {input: 1.5, output: 2}\n", encoding="utf-8")
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    code, out, err = validate(path, capsys)
    assert code == 0, err
    scenario = load_scenario(path)
    assert scenario.games[0].params["pairs"] == str(here / "pairs.jsonl")
    assert scenario.prices["my-model"].input == 1.5
    spec = tournament.plan(scenario)[0]
    record = trio.run(play_match, spec, build_agents(scenario))
    first = json.loads((here / "pairs.jsonl").read_text(encoding="utf-8").splitlines()[0])
    assert record.status == "finished"
    assert any(first["answer_a"] in m.content for m in record.messages if m.kind == "prompt")  # the game read the file

    # the same text in a folder without the file fails, naming the folder it looked in, even with the file in the cwd
    other = write(tmp_path / "bare", text.replace("prices: prices.yaml\n", ""))
    shutil.copy(DATA / "sample-pairs.jsonl", elsewhere / "pairs.jsonl")
    code, _, err = validate(other, capsys)
    assert code == 2 and f"games[0].params.pairs: no file at {tmp_path / 'bare' / 'pairs.jsonl'}" in flat(err)
    assert f"read from the scenario's folder, {tmp_path / 'bare'}" in flat(err)


def test_absolute_paths_and_words_that_are_not_paths_are_kept(tmp_path):
    absolute = str(DATA / "sample-pairs.jsonl")
    raw = {"name": "t", "agents": {"p": {"backend": "scripted", "strategy": "writer_editor"},
                                   "r": {"backend": "scripted", "strategy": "writer_editor"}},
           "games": [{"game": "peer_discussion", "agents": ["p", "r"], "params": {"pairs": absolute}},
                     {"game": "code_review", "agents": ["p", "r"], "params": {"problems": "humaneval", "limit": 1}}]}
    scenario = parse_scenario(raw, "t.yaml", tmp_path)
    assert scenario.games[0].params["pairs"] == absolute
    assert scenario.games[1].params["problems"] == "humaneval"


# -- names ----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["quickstart", "my run 2", "成语接龙", "v1.2", "a_b-c"])
def test_a_plain_name_is_accepted_and_its_run_folder_is_inside_output(name, tmp_path):
    assert name_problem(name) is None
    scenario = parse_scenario({"name": name, "output": str(tmp_path / "runs"), "agents": TWO,
                               "games": [{"game": "public_goods"}]})
    run_dir = (Path(scenario.output) / scenario.name).resolve()
    assert run_dir.parent == (tmp_path / "runs").resolve()


@pytest.mark.parametrize("name", ["", " ", "/etc", "..", ".", "../x", "a/b", "a\\b", "C:x", ".hidden", " pad", "a\nb", "x" * 101])
def test_a_name_that_could_lead_out_of_output_is_refused(name):
    assert name_problem(name) is not None
    with pytest.raises(ConfigError) as caught:
        parse_scenario({"name": name, "agents": TWO, "games": [{"game": "public_goods"}]}, "t.yaml")
    assert str(caught.value).startswith("t.yaml: name: ")


# -- sizes are counted, not built ----------------------------------------------------------------
def test_validate_counts_a_large_plan_without_building_a_match(tmp_path, monkeypatch, capsys):
    agents = "".join(f"  p{i}: {{backend: scripted, strategy: free_rider}}\n" for i in range(5))
    path = write(tmp_path, "name: t\nagents:\n" + agents + "games: [{game: public_goods, seats: 2}]\n"
                 "tournament: {format: round_robin, repeats: 10000}\n")

    def refuse(*args, **kwargs):
        raise AssertionError("validate built the plan")

    monkeypatch.setattr(tournament, "plan_entry", refuse)
    monkeypatch.setattr(tournament, "MatchSpec", refuse)
    code, out, err = validate(path, capsys)
    assert code == 0, err
    assert f"{math.comb(5, 2) * 10_000} matches" in out and math.comb(5, 2) * 10_000 == MAX_MATCHES


def test_one_match_past_the_limit_is_refused(tmp_path, capsys):
    agents = "".join(f"  p{i}: {{backend: scripted, strategy: free_rider}}\n" for i in range(5))
    path = write(tmp_path, "name: t\nagents:\n" + agents + "games:\n  - {game: public_goods, seats: 2}\n"
                 "  - {game: public_goods, label: one_more, agents: [p0, p1]}\n"
                 "tournament: {format: round_robin, repeats: 10000}\n")
    code, _, err = validate(path, capsys)
    assert code == 2 and "the scenario would play 110,000 matches; a run may hold at most 100,000" in flat(err)


# -- what a referee needs of a game -------------------------------------------------------------
class Talk(Game):
    """A game that has something to judge without saying so: capabilities are structural."""

    min_seats = 2

    def rules(self, seat):
        return "Say something."

    def prompt(self, seat, round):
        return "Speak."

    def parse(self, seat, reply, round):
        return reply

    def default_action(self, seat, round):
        return ""

    def apply(self, round, actions):
        return [Notice(to=tuple(self.seats), text="heard")]

    def is_over(self, round):
        return True

    def payoffs(self):
        return {s: 0.0 for s in self.seats}

    def judge_request(self):
        return None


class Silent(Talk):
    default_referee = "execution"  # a game naming a default referee it cannot serve


def test_capabilities_are_what_a_game_defines():
    assert has(Talk, Judged) and not has(Talk, WritesCode)
    assert has(plugins.load("game", "code_review"), WritesCode) and has(plugins.load("game", "code_review"), Judged)
    assert not has(plugins.load("game", "public_goods"), Judged)
    assert plugins.load("referee", "execution").needs == (WritesCode,)
    assert plugins.load("referee", "llm_judge").needs == (Judged,)


def test_a_default_referee_the_game_cannot_serve_is_reported_on_the_game():
    plugins.register("game", "silent_test_game", Silent)
    try:
        with pytest.raises(ConfigError) as caught:
            parse_scenario({"name": "t", "agents": TWO, "games": [{"game": "silent_test_game"}]}, "t.yaml")
    finally:
        plugins.unregister("game", "silent_test_game")
    assert ("games[0].game: the execution referee (the default referee of silent_test_game) needs a game that writes "
            "code") in str(caught.value)
    # the same game with a referee it can serve is fine
    plugins.register("game", "talk_test_game", Talk)
    try:
        parse_scenario({"name": "t", "agents": {**TWO, "j": {"backend": "scripted", "strategy": "reference_judge"}},
                        "games": [{"game": "talk_test_game", "agents": ["a", "b"],
                                   "referee": [{"use": "llm_judge", "agent": "j"}]}]}, "t.yaml")
    finally:
        plugins.unregister("game", "talk_test_game")


def test_the_engine_and_the_planner_name_no_game_no_referee_and_the_engine_no_capability():
    # "rules" is also the kind of message that carries a game's rules: the engine posts those; and
    # "execution" is also the scenario's block that says where matches are played
    games, referees = set(plugins.names("game")), set(plugins.names("referee")) - {"rules", "execution"}
    capabilities = {"Judged", "WritesCode", "ReportsReviews", "HasCases", "JudgeRequest", "Program",
                    "judge_request", "programs", "cases"}
    # dryrun.py is being reworked elsewhere (its judge special case goes with that work)
    files = [p for folder in ("engine", "run") for p in (ROOT / "arena" / folder).glob("*.py") if p.name != "dryrun.py"]
    for path in files:
        tree = ast.parse(path.read_text(encoding="utf-8"))
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & (games | referees), (path.name, strings & (games | referees))
        if path.parent.name == "engine":
            names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)} | {
                n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
            assert not names & capabilities, (path.name, names & capabilities)


# -- rotating roles ------------------------------------------------------------------------------
def seated(spec) -> dict[str, str]:
    """Agent -> role in a planned match (the plan fixes the seats of games with roles)."""
    game = plugins.load("game", spec.game)
    roles = game.seat_roles(game.Params.model_validate(spec.params), len(spec.agents))
    assert not spec.shuffle_seats
    return dict(zip(spec.agents, roles))


def test_a_role_swap_never_seats_a_judge_as_a_contestant(tmp_path, capsys):
    path = write(tmp_path, """
        name: review
        agents:
          x: {backend: scripted, strategy: synthetic_judge, params: {name: x}}
          y: {backend: scripted, strategy: synthetic_judge, params: {name: y}}
          z: {backend: scripted, strategy: synthetic_judge, params: {name: z}}
          judge: {backend: scripted, strategy: synthetic_judge, params: {name: judge}}
          judge2: {backend: scripted, strategy: synthetic_judge, params: {name: judge2}}
        games:
          - {game: pairwise_review, params: {questions: q.jsonl, contestants: 3}}
        """)
    shutil.copy(DATA / "sample-questions.jsonl", tmp_path / "q.jsonl")
    specs = tournament.plan(load_scenario(path))
    questions = len([line for line in (tmp_path / "q.jsonl").read_text().splitlines() if line.strip()])
    assert len(specs) == questions * 3  # the three contestants take each contestant seat in turn
    for spec in specs:
        roles = seated(spec)
        assert roles["judge"] == roles["judge2"] == "Judge"
        assert {roles[a] for a in "xyz"} == {"Contestant"}
    assert {spec.agents[:3] for spec in specs} == {("x", "y", "z"), ("y", "z", "x"), ("z", "x", "y")}
    code, out, _ = validate(path, capsys)
    assert code == 0 and "role_swap passes agents through the Contestant seats only" in out
    assert "Judge seats for the agents listed there (judge as Judge, judge2 as Judge)" in out


def test_a_summarizer_keeps_its_seat_and_writer_editor_games_still_swap_every_role(tmp_path):
    agents = {n: {"backend": "scripted", "strategy": "writer_editor"} for n in ("p", "q", "r", "s")}
    debate = parse_scenario({"name": "d", "agents": agents, "games": [{"game": "chateval_debate", "params": {
        "pairs": str(DATA / "sample-pairs.jsonl"), "strategy": "simultaneous_talk_with_summarizer"}}]})
    specs = tournament.plan(debate)
    assert {seated(s)["s"] for s in specs} == {"Summarizer"}
    assert {s.agents for s in specs} == {("p", "q", "r", "s"), ("q", "r", "p", "s"), ("r", "p", "q", "s")}
    review = parse_scenario({"name": "c", "agents": agents, "games": [{"game": "code_review", "agents": ["p", "q"],
                                                                      "params": {"problems": "humaneval", "limit": 1}}]})
    assert [s.agents for s in tournament.plan(review)] == [("p", "q"), ("q", "p")]  # as before: both roles each


def test_a_judge_model_is_only_ever_sent_comparisons_under_the_default_role_swap(tmp_path, monkeypatch):
    """What the models are sent, at every turn: the judge model never gets a contestant's question."""
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    (tmp_path / "q.jsonl").write_text('{"id": "q1", "question": "Why is the sky blue?"}\n'
                                      '{"id": "q2", "question": "How do tides work?"}\n', encoding="utf-8")

    def respond(body):
        asked = body["messages"][-1]["content"]
        return "Both are fine; the first is clearer.\n7 5" if "[Assistant 1]" in asked else f"An answer from {body['model']}."

    with OpenAIMock(responder=respond) as mock:
        agent = lambda model: {"backend": "openai", "base_url": mock.base_url, "model": model, "backoff": 0.01,
                               "timeout": 20, "structured": False}
        path = write(tmp_path, f"""
            name: review
            agents:
              x: {json.dumps(agent("model-x"))}
              y: {json.dumps(agent("model-y"))}
              judge: {json.dumps(agent("model-judge"))}
            games:
              - {{game: pairwise_review, params: {{questions: q.jsonl, contestants: 2}}}}
            anonymity: off   # the answers differ only by the model's name, which the filter would withhold
            """)
        scenario = load_scenario(path)
        store = RunStore.create_or_resume(tmp_path / "run", scenario.name, path.read_text(), scenario.fingerprint())
        try:
            result, records = trio.run(play, scenario, store)
        finally:
            store.close()
        bodies = [b for b in mock.bodies() if b and "messages" in b]
    assert len(records) == 2 * 2 and all(r.status == "finished" for r in records)  # 2 questions x 2 contestant orders
    by_model: dict[str, list[dict]] = {}
    for body in bodies:
        by_model.setdefault(body["model"], []).append(body)
    judged = by_model["model-judge"]
    assert len(judged) == 4 * 2  # every match: one pair, shown in both orders
    for body in judged:
        text = "\n".join(m["content"] for m in body["messages"])
        assert "[Assistant 1]" in body["messages"][-1]["content"] and "Write your answer." not in text
        assert "impartial reviewer" in text and "answer it as well as you can" not in text
    for model in ("model-x", "model-y"):
        assert len(by_model[model]) == 4 and all("Write your answer." in b["messages"][-1]["content"] for b in by_model[model])
    failed = [e for r in records for e in r.events if type(e).__name__ == "TurnFailed"]
    assert failed == []  # no invalid replies: nobody was asked to do a job its seat is not for
    assert all(r.reviews and {rev[3] for rev in r.reviews} == {"judge"} for r in records)  # the referee passed them on


# -- rounds ------------------------------------------------------------------------------------
def test_params_needing_more_rounds_than_max_rounds_are_refused_and_enough_is_accepted(tmp_path):
    agents = {"x": TWO["a"], "y": TWO["b"], "j": {"backend": "scripted", "strategy": "synthetic_judge"}}
    game = {"game": "pairwise_review", "params": {"questions": str(DATA / "sample-questions.jsonl"), "samples": 600}}
    with pytest.raises(ConfigError) as caught:
        parse_scenario({"name": "t", "agents": agents, "games": [game], "tournament": {"role_swap": False}}, "t.yaml")
    assert ("games[0].params: with these params a match of pairwise_review can take 1,201 rounds, more than "
            "match.max_rounds (1,000)") in str(caught.value)
    parse_scenario({"name": "t", "agents": agents, "games": [game], "match": {"max_rounds": 1201}})
