"""Matches that did not simply finish are shown for what they are, everywhere a status is shown.

A match stopped at ``match.max_rounds`` before its game ended is *truncated*: the game scores the
position it reached, the store and exports keep that, and the results and rankings leave it out
(a game stopped part way is not the game its payoffs measure), saying so. A match a backend outage
cut short is *interrupted*: never scored, not a failure, played again on resume.

The game here never ends by itself unless a seat says DONE, and its rules fix no length (it does not
say ``rounds_needed``), so `arena validate` cannot see the cut coming: the engine's safety stop is what
ends the talkers' match. The models are a local mock server that answers from the model's name only,
and the test reads what each model was sent at every turn."""

from __future__ import annotations

import csv
import io
import json
import re

import pytest
import trio
from rich.console import Console

from arena.contract import plugins
from arena.contract.game import Game, InvalidReply, Notice
from arena.contract import open_run
from arena.store import RunStore
from mock_llm import OpenAIMock
from store_kit import cli, one_line, write_scenario
from test_report import Page, browser, embedded  # noqa: F401  (browser is a fixture)

MAX_ROUNDS = 3


class Chatter(Game):
    """Each round every seat says MORE or DONE; the table stops once someone says DONE. A seat scores a
    point for each round it said MORE."""

    min_seats = max_seats = 2

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.more = {seat: 0 for seat in self.seats}
        self.done = False

    def rules(self, seat):
        return (f"You are {seat}. Each round, say MORE to keep the table talking or DONE to end it; the table "
                "stops as soon as anyone says DONE. You score one point for every round in which you said MORE.")

    def prompt(self, seat, round):
        return f"Turn {round}: MORE or DONE?"

    def parse(self, seat, reply, round):
        word = reply.strip().upper()
        if word not in ("MORE", "DONE"):
            raise InvalidReply("answer with the one word MORE or DONE")
        return word

    def default_action(self, seat, round):
        return "DONE"

    def apply(self, round, actions):
        for seat, word in actions.items():
            self.more[seat] += word == "MORE"
            self.done = self.done or word == "DONE"
        said = "; ".join(f"{seat} said {word}" for seat, word in sorted(actions.items()))
        return [Notice(to=self.seats, text=f"Turn {round}: {said}.")]

    def is_over(self, round):
        return self.done

    def payoffs(self):
        return {seat: float(n) for seat, n in self.more.items()}


@pytest.fixture
def chatter():
    plugins.register("game", "chatter", Chatter)
    yield "chatter"
    plugins.unregister("game", "chatter")


def answer(body) -> str:
    """A model that never stops talking, unless it is the quitter."""
    return "DONE" if body["model"] == "quitter" else "MORE"


def scenario_of(url: str, **top) -> dict:
    agents = {name: {"backend": "openai", "model": model, "base_url": url, "backoff": 0.01}
              for name, model in (("ann", "talker-a"), ("bea", "talker-b"), ("quinn", "quitter"))}
    return {"name": "chatty", "seed": 5, "agents": agents, "match": {"max_rounds": MAX_ROUNDS},
            "tournament": {"format": "all_pairs"}, "games": [{"game": "chatter"}], **top}


def talk(body) -> list[str]:
    """The texts of the conversation a model was sent, message by message."""
    return [m["content"] for m in body["messages"]]


# -- truncated -------------------------------------------------------------------------------------
def test_a_match_cut_at_max_rounds_is_recorded_truncated_shown_so_and_left_out_of_the_results(chatter, tmp_path, capsys):
    with OpenAIMock(responder=answer) as mock:
        scenario = write_scenario(tmp_path, scenario_of(mock.base_url))
        run_dir = tmp_path / "runs" / "chatty"
        code, out, err = cli(capsys, "validate", scenario)
        assert code == 0, err  # nothing in the rules says how long the talkers' match can take
        code, out, err = cli(capsys, "run", scenario, "--plain", "--run-dir", run_dir)
        said = one_line(out)
        assert code == 0, out + err  # a truncated match is no failure: it was played, as far as it was allowed
        assert "2 of 3 matches finished, 1 truncated at max_rounds" in said
        assert re.search(r"\] end after 3 rounds TRUNCATED: stopped at max_rounds before the game ended", said), said
        assert "1 match was stopped at match.max_rounds before the game ended (truncated)" in said
        assert "left out of these results" in said

        # what the models were sent: the talkers were asked exactly max_rounds times in their match, each time
        # with the rules, every earlier prompt, their own replies and what they heard; never a fourth time
        bodies = [r.body for r in mock.answered()]
        assert not any("Turn 4" in m for b in bodies for m in talk(b))
        last = [b for b in bodies if talk(b)[-1].endswith(f"Turn {MAX_ROUNDS}: MORE or DONE?")]
        assert sorted(b["model"] for b in last) == ["talker-a", "talker-b"]
        for body in last:
            messages = talk(body)
            own = [m["content"] for m in body["messages"] if m["role"] == "assistant"]
            assert "say MORE to keep the table talking" in messages[0]
            assert [m for m in messages if m.endswith("MORE or DONE?")] == [f"Turn {k}: MORE or DONE?"
                                                                             for k in (1, 2, 3)]
            assert own == ["MORE", "MORE"], "its own two earlier replies"
            assert sum(re.fullmatch(r"Player \d said:\nMORE", m) is not None for m in messages) == 2, "the other seat's"
            assert [m[:6] for m in messages if re.match(r"Turn \d: Player", m)] == ["Turn 1", "Turn 2"], "and the referee's word on turns 1 and 2"
        asked = mock.count
        assert asked == 3 * 2 + 2 + 2  # the talkers' match: 3 turns of 2 seats; each quitter's match: 1 turn

        # the store keeps the truncated match with the score the game gave where it stopped
        store = open_run(run_dir)
        try:
            [cut] = store.records(status="truncated")
            assert store.counts() == {"finished": 2, "truncated": 1}
        finally:
            store.close()
        assert cut.rounds == MAX_ROUNDS and sorted(cut.payoffs.values()) == [3.0, 3.0]
        assert {s.agent for s in cut.seats} == {"ann", "bea"}

        # show, the transcript, exports
        code, out, _ = cli(capsys, "show", run_dir)
        [row] = [line for line in out.splitlines() if cut.key in line]
        assert "truncated" in row and "(stopped at max_rounds after 3 rounds; not in the results)" in row
        code, out, _ = cli(capsys, "show", run_dir, "--match", cut.key)
        assert code == 0 and "truncated: stopped at max_rounds after 3 rounds, before the game ended" in one_line(out)
        code, out, _ = cli(capsys, "export", run_dir)
        exported = {json.loads(line)["key"]: json.loads(line) for line in out.splitlines()}
        assert exported[cut.key]["status"] == "truncated" and exported[cut.key]["payoffs"] == cut.payoffs
        code, out, _ = cli(capsys, "export", run_dir, "--format", "csv")
        rows = [r for r in csv.DictReader(io.StringIO(out)) if r["match"] == cut.key]
        assert [(r["status"], r["rounds"], r["payoff"]) for r in rows] == [("truncated", "3", "3.0")] * 2

        # the results count finished matches only: ann and bea each have one, against quinn, where they scored 1
        code, out, _ = cli(capsys, "rank", run_dir, "--json")
        ranked = json.loads(out)
        assert ranked["run"]["truncated"] == 1 and ranked["run"]["finished"] == 2
        means = {p["agent"]: (p["mean"], p["matches"]) for p in ranked["payoffs"]}
        assert means == {"ann": (1.0, 1), "bea": (1.0, 1), "quinn": (0.0, 2)}
        code, out, _ = cli(capsys, "rank", run_dir)
        assert "1 match was stopped at match.max_rounds" in one_line(out) and "arena show" in out
        code, out, _ = cli(capsys, "runs", tmp_path / "runs")
        assert "finished (1 truncated)" in out
        code, out, _ = cli(capsys, "watch", run_dir, "--plain")
        assert "finished — 2 finished, 0 failed, 1 truncated, of 3 planned" in one_line(out)

        # a resume keeps it: played again it would be cut again
        code, out, err = cli(capsys, "run", scenario, "--quiet", "--run-dir", run_dir)
        assert code == 0, err
        assert mock.count == asked
        assert "2 finished matches are kept, and 1 truncated" in one_line(out)
        assert "2 of 3 matches finished, 1 truncated at max_rounds, 3 from the earlier run" in one_line(out)


def test_the_report_and_the_dashboard_show_a_truncated_match_as_truncated(chatter, tmp_path, capsys, browser):
    from arena.cli.dashboard import Dashboard
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario

    with OpenAIMock(responder=answer) as mock:
        raw = scenario_of(mock.base_url)
        code, _, err = cli(capsys, "run", write_scenario(tmp_path, raw), "--quiet", "--run-dir", tmp_path / "run")
        assert code == 0, err
        view = Dashboard(Console(file=io.StringIO(), width=160), "chatty")
        with view:
            trio.run(run_tournament, parse_scenario(raw), None, view)
    screen = io.StringIO()
    Console(file=screen, width=160).print(view.render())
    assert "1 truncated" in screen.getvalue() and "failed" not in screen.getvalue()
    assert re.search(r"■ truncated: stopped at max_rounds after 3 rounds", screen.getvalue()), screen.getvalue()
    assert view.snapshot().done == 3 and view.snapshot().failed == 0

    code, _, err = cli(capsys, "report", tmp_path / "run", "-o", tmp_path / "report.html")
    assert code == 0, err
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert "2 finished, 1 truncated of 3 planned" in html
    [cut] = [m for m in embedded(html, "arena-transcripts")["matches"] if m["st"] == "truncated"]
    page = Page(browser, tmp_path / "report.html")
    try:
        p = page.page
        assert page.choose("#f-outcome", "failed") == 0
        assert page.choose("#f-outcome", "lost") == 0, "no agent chosen"
        assert page.choose("#f-outcome", "truncated") == 1
        match = p.locator(f'details.match[data-key="{cut["k"]}"]')
        assert match.locator(".badge.truncated").inner_text() == "truncated"
        match.locator("summary").click()
        match.locator(".body .msg").first.wait_for(timeout=10_000)
        assert "truncated: stopped at max_rounds after 3 rounds" in match.locator(".body").inner_text()
        assert page.choose("#f-outcome", "") == 3
        p.select_option("#f-agent", "ann")
        assert page.choose("#f-outcome", "lost") == 0, "ann won against quinn; the truncated match is neither"
        assert page.errors == []
    finally:
        page.close()


# -- interrupted -----------------------------------------------------------------------------------
def test_interrupted_matches_are_shown_as_interrupted_not_failed(chatter, tmp_path, capsys, browser):
    from arena.cli.dashboard import Dashboard
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario

    with OpenAIMock() as mock:
        url = mock.base_url  # a server that was there and is gone: every call is refused
    raw = scenario_of(url, match={"max_rounds": MAX_ROUNDS, "outage_wait": 0})
    run_dir = tmp_path / "runs" / "down"
    code, out, err = cli(capsys, "run", write_scenario(tmp_path, raw), "--plain", "--run-dir", run_dir)
    said = one_line(out)
    assert code == 4, out + err
    store = open_run(run_dir)
    try:
        counts = store.counts()
    finally:
        store.close()
    stopped = counts.get("interrupted", 0)
    assert stopped >= 1 and "failed" not in counts
    assert said.count("INTERRUPTED (not scored; played again later)") == stopped and "FAILED" not in said

    code, out, _ = cli(capsys, "show", run_dir)
    statuses = [line.split("│")[2].strip() for line in out.splitlines() if line.count("│") >= 4]
    assert statuses.count("interrupted") == stopped and "failed" not in statuses
    code, out, _ = cli(capsys, "watch", run_dir, "--plain")
    assert f"0 failed, {stopped} interrupted, of 3 planned" in one_line(out)
    code, out, _ = cli(capsys, "runs", tmp_path / "runs")
    assert f"({stopped} interrupted)" in out

    # the live view of such a run
    view = Dashboard(Console(file=io.StringIO(), width=160), "down")
    with view:
        trio.run(run_tournament, parse_scenario(raw), None, view)
    screen = io.StringIO()
    Console(file=screen, width=160).print(view.render())
    progress = screen.getvalue().split("model calls")[0]  # the calls table below counts the refused calls
    assert "3 interrupted" in progress and "failed" not in progress, screen.getvalue()
    assert screen.getvalue().count("⏸ interrupted: BackendUnavailable") == 3
    snap = view.snapshot()
    assert snap.failed == 0 and snap.interrupted >= 1 and snap.done == 0

    # the report
    code, _, err = cli(capsys, "report", run_dir, "-o", tmp_path / "report.html")
    assert code == 0, err
    html = (tmp_path / "report.html").read_text(encoding="utf-8")
    assert f"{stopped} interrupted of 3 planned" in html and " failed" not in html.split("of 3 planned")[0][-80:]
    page = Page(browser, tmp_path / "report.html")
    try:
        assert page.choose("#f-outcome", "failed") == 0
        assert page.choose("#f-outcome", "interrupted") == stopped
        assert page.page.locator("details.match .badge.interrupted").count() == stopped
        assert page.page.locator("details.match .badge.failed").count() == 0
        assert page.errors == []
    finally:
        page.close()
