"""A person at the terminal: the human backend plays a seat, the human referee judges.

The end-to-end tests type into a real terminal (a tmux pane) and read what it shows, as a person
would: `arena run` with its live dashboard, a human seat among scripted ones, a reply the game rejects
asked again with the game's reason, Ctrl-C, and the same command resuming the run.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import trio
import yaml

from arena.contract import terminal
from helpers import ROOT, scripted
from tmux_pane import TMUX, Pane

needs_tmux = pytest.mark.skipif(TMUX is None, reason="tmux is not installed: the terminal tests type into a tmux pane")


@pytest.fixture
def pane(tmp_path):
    pane = Pane(tmp_path)
    try:
        yield pane
    finally:
        pane.close()


def arena(*args) -> str:
    """The `arena` command line the pane runs, then its exit status on a line of its own."""
    words = " ".join(map(str, args))
    return f"{sys.executable} -m arena.cli {words}; echo EXIT=$?"


def public_goods_scenario(folder, **match) -> str:
    scenario = {
        "name": "human-public-goods",
        "seed": 3,
        "agents": {"me": {"backend": "human"},
                   "giver": {"backend": "scripted", "strategy": "always_all"},
                   "keeper": {"backend": "scripted", "strategy": "free_rider"}},
        "games": [{"game": "public_goods", "params": {"mode": 1, "rounds": 2}, "seats": 3}],
        "tournament": {"format": "fixed", "repeats": 2},
        "match": {"max_retries": 3, **match},
        "concurrency": 1,
    }
    path = folder / "human.yaml"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    return str(path)


def shown(cli_json: list[str]) -> dict:
    done = subprocess.run([sys.executable, "-m", "arena.cli", *cli_json, "--json"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@needs_tmux
def test_a_person_plays_public_goods_is_asked_again_with_the_reason_and_ctrl_c_then_a_rerun_resumes(pane, tmp_path):
    scenario, run_dir = public_goods_scenario(tmp_path), tmp_path / "run"
    command = arena("run", scenario, "--run-dir", run_dir)
    pane.type(command)

    # The first turn shows the rules, the prompt and the time left, and nothing of the dashboard under it.
    first = pane.wait_text("Round 1 of 2: you receive 10 coins.")
    assert "You are Player" in first and "one of 3 players in a game of 2 rounds" in first
    assert "No time limit." in first
    assert pane.screen().rstrip().endswith(">"), pane.screen()

    pane.type("five coins, please")
    text = pane.wait_text("Your reply was not accepted: Your reply is not a JSON object.")
    assert text.count("Round 1 of 2: you receive 10 coins.") == 2  # the prompt, asked again
    pane.type('{"reason": "all in", "coins": 42}')
    pane.wait_text('Your reply was not accepted: "coins" must be a whole number from 0 to 10; you gave 42.')
    pane.type('{"reason": "half", "coins": 5}')

    # Round 2 shows what came of round 1: the pool had 5 + 10 + 0 coins, times 1.5, shared by 3.
    text = pane.wait_text("Round 2 of 2: you receive 10 coins.")
    assert '> {"reason": "half", "coins": 5}\nSent.\n' in text  # nothing drawn since overwrote it
    assert "Round 1 is over: the pool paid you 7.5 coins." in text.split("Sent.")[-1]
    assert pane.screen().rstrip().endswith(">"), pane.screen()
    pane.type('{"reason": "none", "coins": 0}')

    # The second match starts (its first prompt is the fourth: round 1 was asked three times in the first);
    # Ctrl-C while the person is asked in it.
    pane.wait_text("Round 1 of 2: you receive 10 coins.", count=4)
    pane.press("C-c")
    text = pane.wait_text("EXIT=130")
    assert "run the same command to resume" in text

    run = shown(["show", str(run_dir)])
    assert run["run"]["status"] == "interrupted"
    assert sorted(m["status"] for m in run["matches"]) == ["finished", "interrupted"]  # nothing says running
    show = subprocess.run([sys.executable, "-m", "arena.cli", "show", str(run_dir)], capture_output=True, text=True,
                          timeout=120)
    assert "interrupted" in show.stdout and "running" not in show.stdout, show.stdout

    pane.type(command)
    pane.wait_text("Resuming the run in")
    pane.wait_text("Round 1 of 2: you receive 10 coins.", count=5)
    pane.type('{"reason": "again", "coins": 10}')
    pane.wait_text("Round 2 of 2: you receive 10 coins.", count=2)
    pane.type('{"reason": "again", "coins": 10}')
    text = pane.wait_text("EXIT=0")
    assert "2 of 2 matches finished, 1 from the earlier run" in text

    matches = shown(["show", str(run_dir)])["matches"]
    assert [m["status"] for m in matches] == ["finished", "finished"]
    mine = sorted(m["payoffs"][next(s["label"] for s in m["seats"] if s["agent"] == "me")] for m in matches)
    # the match played whole in the first session: 5 then 0 in, beside the giver's 10 each round; the
    # replayed one: 10 and 10
    assert mine == [pytest.approx(10 + 10), pytest.approx(10 - 5 + 7.5 + 10 + 5)]


# -- in this process: the terminal's turns, the human's deadline, what is refused ---------------------

def human(name: str, **config):
    from arena.agents.human_backend import HumanAgent, HumanConfig

    return HumanAgent(name, HumanConfig(**config))


@pytest.fixture
def keyboard(monkeypatch, capsys):
    """Standard input as a pipe the test types into, and what is written to the person (standard error)."""
    import os

    read, write = os.pipe()
    monkeypatch.setattr(sys, "stdin", os.fdopen(read, "r"))
    monkeypatch.setattr(terminal, "_pending", bytearray())

    class Said:
        def getvalue(self) -> str:
            return capsys.readouterr().err
    said = Said()

    def type_(*lines: str) -> None:
        os.write(write, "".join(f"{line}\n" for line in lines).encode())

    type_.end = lambda: os.close(write)  # Ctrl-D on an empty line
    yield type_, said
    try:
        os.close(write)
    except OSError:  # ended by the test
        pass
    sys.stdin.close()


async def test_two_people_in_one_match_are_asked_one_after_the_other_and_each_sees_only_its_seat(keyboard):
    from arena.engine.match import play_match
    from arena.contract.records import MatchSpec

    type_, said = keyboard
    steps: list[str] = []
    type_('{"reason": "a", "coins": 3}', '{"reason": "b", "coins": 7}')
    with terminal.hold_screen(lambda: steps.append("aside"), lambda: steps.append("back")):
        record = await play_match(MatchSpec(key="m", game="public_goods", agents=("ann", "bob"), seed=1,
                                            params={"rounds": 1}), {"ann": human("ann"), "bob": human("bob")})
    assert record.status == "finished"
    screens = said.getvalue().split("Sent.")
    assert len(screens) == 3 and screens[-1].strip() == ""
    # each screen holds one question, for one seat; the two seats were asked in turn, not at once
    assert [s.count("Round 1 of 1:") for s in screens[:2]] == [1, 1]
    asked = [next(seat for seat in ("Player 1", "Player 2") if f"you are {seat}" in s) for s in screens[:2]]
    assert sorted(asked) == ["Player 1", "Player 2"]
    assert f"You are {asked[0]}," in screens[0] and f"You are {asked[1]}," in screens[1]
    by_seat = {s.label: s.agent for s in record.seats}
    contributed = {e.seat: e.action for e in record.events if e.type == "action"}
    assert contributed == {asked[0]: 3, asked[1]: 7}
    assert set(by_seat) == set(asked)
    assert steps == ["aside", "back", "aside", "back"]


async def test_lent_screen_goes_to_one_asker_at_a_time_and_the_views_come_back_however_it_ends():
    steps: list[str] = []

    async def asker(name: str) -> None:
        async with terminal.lend_screen():
            steps.append(f"{name} in")
            await trio.lowlevel.checkpoint()  # the other asker runs meanwhile, if it can
            steps.append(f"{name} out")

    with terminal.hold_screen(lambda: steps.append("aside"), lambda: steps.append("back")):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(asker, "a")
            nursery.start_soon(asker, "b")
        first, second = steps[1][0], steps[5][0]
        assert steps == ["aside", f"{first} in", f"{first} out", "back", "aside", f"{second} in", f"{second} out", "back"]
        steps.clear()
        with pytest.raises(KeyError):
            async with terminal.lend_screen():
                raise KeyError("a person's answer that broke something")
        assert steps == ["aside", "back"]


async def test_the_dashboard_steps_aside_while_a_person_is_asked_and_comes_back_after():
    import io
    from rich.console import Console
    from arena.cli.dashboard import Dashboard

    view = Dashboard(Console(file=io.StringIO(), force_terminal=True, width=100), title="t")
    with view:
        async with terminal.lend_screen():
            assert not view._live.is_started
        assert view._live.is_started
    async with terminal.lend_screen():  # once the view is gone, it is not brought back
        pass
    assert not view._live.is_started


async def test_a_person_is_not_held_to_the_match_turn_timeout_meant_for_models(autojump_clock, keyboard):
    from arena.engine.turns import Asker
    from arena.contract.records import MatchSettings

    from arena.agents.human_backend import HumanAgent, HumanConfig

    type_, said = keyboard

    class SlowPerson(HumanAgent):
        async def reply(self, turn):
            await trio.sleep(600)  # ten minutes to think; the match gives models 30 seconds
            return await super().reply(turn)

    events = []
    asker = Asker("m", 1, MatchSettings(turn_timeout=30), events.append)
    turn = asker.turn("Player 1", "Player", 1, (), "How many?")
    type_("4")
    outcome = await asker.ask(SlowPerson("p", HumanConfig()), turn, int, lambda: 0)
    assert (outcome.action, outcome.failure) == (4, None)
    assert "No time limit." in said.getvalue()

    timed = SlowPerson("q", HumanConfig(timeout=120))
    outcome = await asker.ask(timed, asker.turn("Player 1", "Player", 2, (), "How many?"), int, lambda: 0)
    assert (outcome.action, outcome.failure) == (0, "timeout")
    assert events[-1].reason == "No reply arrived within 120 seconds."


def test_human_seats_are_refused_in_worker_processes_and_without_a_terminal(tmp_path):
    scenario = public_goods_scenario(tmp_path)
    for extra, expected in ((["--processes", "2"], "agent 'me' is a person at this terminal, who can only be asked in "
                                                   "the run's own process, not in one of 2 worker processes"),
                            ([], "agent 'me' (backend human) is a person at the terminal, and this run has none")):
        done = subprocess.run([sys.executable, "-m", "arena.cli", "run", scenario, "--run-dir", tmp_path / "run", *extra],
                              capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
        assert done.returncode == 2, done.stderr
        assert expected in done.stderr and "Traceback" not in done.stderr
        assert not [m for m in shown(["show", str(tmp_path / "run")])["matches"] if m["status"] == "finished"]


def test_the_human_referees_verdict_is_read_from_scores_in_seat_order():
    from arena.contract import InvalidReply
    from arena.referees.human import parse_scores

    seats = ("Translator", "Proofreader")
    assert parse_scores(" 7 4  the second added errors ", seats, 1, 10) == ({"Translator": 7, "Proofreader": 4},
                                                                           "the second added errors")
    for reply, reason in (("7", "did not score Proofreader"), ("7 11", "whole number from 1 to 10; it was 11"),
                          ("good 7 4", "The score for Translator must come before any reasons; 'good' is no score"),
                          ("7 4.5", "it was 4.5")):
        with pytest.raises(InvalidReply) as caught:
            parse_scores(reply, seats, 1, 10)
        assert reason in caught.value.reason
        assert "Score Translator, Proofreader, in that order" in caught.value.reason


@needs_tmux
def test_a_person_judges_a_translation_as_the_human_referee(pane, tmp_path):
    texts = str(ROOT / "scenarios" / "data" / "translation-samples.jsonl")
    writer = {"backend": "scripted", "strategy": "writer_editor", "params": {"write": 0.9, "edit": 0.9, "answers": texts}}
    scenario = {
        "name": "human-judge", "seed": 4,
        "agents": {"fluent": writer, "careful": writer, "human": {"backend": "human"}},
        "games": [{"game": "translation", "agents": ["fluent", "careful"], "referee": [{"use": "human"}],
                   "params": {"texts": texts, "language_pair": "de-en"}}],
        "tournament": {"format": "fixed", "role_swap": False},
    }
    path, run_dir = tmp_path / "judge.yaml", tmp_path / "run"
    path.write_text(yaml.safe_dump(scenario), encoding="utf-8")
    pane.type(arena("run", path, "--run-dir", run_dir, "--limit", "1"))

    asked = "Score Translator, Proofreader, in that order, each with a whole number from 1 to 10"
    text = pane.wait_text(asked)
    judged = text[text.rindex("you are Referee's judge"):]  # the judge's screen
    assert "Der Zug hatte zwanzig Minuten Verspätung" in judged  # the source text, as the game gives it to a judge
    assert "fluent" not in judged and "careful" not in judged  # the contestants stay anonymous
    pane.type("excellent work")
    pane.wait_text("Your reply was not accepted: The score for Translator must come before any reasons; "
                   "'excellent' is no score.")
    pane.type("8 6 the proofreader changed little")
    text = pane.wait_text("EXIT=0")
    assert "1 of 1 matches finished" in text

    (match,) = shown(["show", str(run_dir)])["matches"]
    assert match["status"] == "finished"
    assert {s["label"]: s["agent"] for s in match["seats"]} == {"Translator": "fluent", "Proofreader": "careful"}
    assert match["payoffs"] == {"Translator": 8.0, "Proofreader": 6.0}
    verdict = shown(["show", str(run_dir), "--match", match["key"]])["messages"][-1]
    assert verdict["kind"] == "verdict" and verdict["recipients"] == []  # in the transcript, shown to no seat
    assert verdict["data"]["scores"] == {"Translator": 8, "Proofreader": 6}
    assert verdict["data"]["reasons"] == "the proofreader changed little"


async def test_while_a_person_plays_the_dashboard_shows_no_transcript_no_seating_and_no_scores():
    import io
    from rich.console import Console
    from arena.cli.dashboard import Dashboard
    from arena.run.scenario import parse_scenario
    from helpers import play

    scenario = parse_scenario({
        "name": "t",
        "agents": {"giver": {"backend": "scripted", "strategy": "always_all"},
                   "keeper": {"backend": "scripted", "strategy": "free_rider"}},
        "games": [{"game": "public_goods", "params": {"rounds": 2}}],
    })
    screens = {}
    for private in (False, True):
        buffer = io.StringIO()
        with Dashboard(Console(file=buffer, force_terminal=True, width=140), "t", private=private) as view:
            await play(scenario, None, view)
        console = Console(file=io.StringIO(), width=140, record=True)
        console.print(view.render())
        screens[private] = console.export_text()
    assert "giver" in screens[False] and "latest messages" in screens[False]  # what a watcher may see
    assert "1/1" in screens[True]
    for kept_off in ("giver", "keeper", "latest messages", "coins", "Player"):
        assert kept_off not in screens[True], screens[True]


def test_a_dry_run_asks_no_person_and_prices_their_turns_at_nothing(tmp_path):
    done = subprocess.run([sys.executable, "-m", "arena.cli", "run", public_goods_scenario(tmp_path), "--dry-run"],
                          capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert done.returncode == 0, done.stderr
    assert "Type your reply" not in done.stdout + done.stderr
    assert "2 matches planned" in done.stdout and "this scenario costs nothing" in done.stdout


async def test_the_end_of_input_fails_the_match_with_a_sentence_and_keeps_what_was_typed_before(keyboard):
    from arena.engine.match import play_match
    from arena.contract.records import MatchSpec

    type_, said = keyboard
    type_('{"reason": "a", "coins": 3}')
    type_.end()
    agents = {"ann": human("ann"), "keeper": scripted("keeper", "free_rider")}
    record = await play_match(MatchSpec(key="m", game="public_goods", agents=("ann", "keeper"), seed=1,
                                        params={"rounds": 2}), agents)
    assert record.status == "failed"
    assert record.error == "TerminalClosed: standard input ended while a person was being asked"
    ann = next(s.label for s in record.seats if s.agent == "ann")
    assert [(e.round, e.action) for e in record.events if e.type == "action" and e.seat == ann] == [(1, 3)]
