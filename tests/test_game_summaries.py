"""A game of someone else's package declares its own summary table through the contract, and gets
it in `arena rank`, `arena rank --json` and the report without Arena knowing the game: the
package is written to a temporary folder, importing only ``arena.contract``, and registered by
its entry point as an installed package would be."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from html import unescape
from pathlib import Path

import pytest

from arena.contract import Column, FinalNotice, Table, plugins
from arena.contract.events import SeatInfo

# Two seats call a coin; the referee's last notice records each seat's call and the side that came
# up, and the game sums the run up as each agent's calls and how many were right.
GAME = '''
from arena.contract import Column, FinalNotice, Game, InvalidReply, Notice, Summarized, Summary, Table


class CallIt(Game, Summarized):
    description = "Both seats call a coin; a right call scores a point."
    min_seats = max_seats = 2
    summary_fields = ("calls",)

    def __init__(self, params, seats, roles, rng):
        super().__init__(params, seats, roles, rng)
        self.side = rng.choice(["heads", "tails"])
        self.calls = {}

    def rules(self, seat):
        return "A coin is tossed once. Call it."

    def prompt(self, seat, round):
        return "Reply heads or tails."

    def parse(self, seat, reply, round):
        call = reply.strip().lower()
        if call not in ("heads", "tails"):
            raise InvalidReply("reply heads or tails")
        return call

    def default_action(self, seat, round):
        return "heads"

    def apply(self, round, actions):
        self.calls = dict(actions)
        return [Notice(to=self.seats, text=f"It came up {self.side}.", data={"calls": self.calls, "side": self.side})]

    def is_over(self, round):
        return True

    def payoffs(self):
        return {seat: float(call == self.side) for seat, call in self.calls.items()}

    @classmethod
    def summaries(cls, notices):
        tally = {}
        for notice in notices:
            for seat, call in notice.data["calls"].items():
                mine = tally.setdefault(notice.agent_of(seat), {"calls": 0, "right": 0, "heads": 0})
                mine["calls"] += 1
                mine["right"] += call == notice.data["side"]
                mine["heads"] += call == "heads"
        rows = [[agent, t["calls"], t["right"], t["right"] / t["calls"], t["heads"] / t["calls"]]
                for agent, t in sorted(tally.items())]
        table = Table(name="coin_calls", title="Coin calls per agent", note="How often each agent called it right.",
                      columns=[Column(name="Caller", numeric=False), Column(name="Calls"), Column(name="Right"),
                               Column(name="Right share", digits=2), Column(name="Heads share", digits=1)],
                      rows=rows)
        return [Summary(name="coin_calls", data=[{"agent": r[0], "calls": r[1], "right": r[2]} for r in rows],
                        tables=[table])]


class Unmarked(CallIt):
    summary_fields = "calls"  # a string, not a tuple of names


class BrokenCallIt(CallIt):
    @classmethod
    def summaries(cls, notices):
        return notices[0].data["who won"]
'''

SCENARIO = """\
name: coins
seed: 4
agents:
  heady: {backend: scripted, strategy: fixed, params: {replies: [heads]}}
  taily: {backend: scripted, strategy: fixed, params: {replies: [tails]}}
games:
  - game: call_it
    agents: [heady, taily]
tournament: {repeats: 6}
match: {turn_timeout: 30, max_retries: 0}
"""


def make_site(root: Path) -> Path:
    """A folder as site-packages holds the package once installed: its module and its entry point."""
    site = root / "site"
    dist = site / "arena_call_it-0.1.dist-info"
    dist.mkdir(parents=True)
    (site / "call_it.py").write_text(GAME, encoding="utf-8")
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: arena-call-it\nVersion: 0.1\n", encoding="utf-8")
    (dist / "entry_points.txt").write_text("[arena.games]\ncall_it = call_it:CallIt\nbroken_call = call_it:BrokenCallIt\nunmarked = call_it:Unmarked\n", encoding="utf-8")
    return site


def cli(cwd: Path, site: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(site), "COLUMNS": "200", "PYTHONIOENCODING": "utf-8"}
    return subprocess.run([sys.executable, "-m", "arena.cli", *args], cwd=cwd, env=env, capture_output=True,
                          text=True, encoding="utf-8", timeout=120)


@pytest.fixture(scope="module")
def played(tmp_path_factory) -> tuple[Path, Path, dict]:
    """The scenario played from the command line; (its folder, the site, each agent's (calls, right))
    counted from the exported records, not from the summary."""
    root = tmp_path_factory.mktemp("coins")
    site = make_site(root)
    (root / "coins.yaml").write_text(SCENARIO, encoding="utf-8")
    done = cli(root, site, "run", "coins.yaml", "--run-dir", "run", "--plain")
    assert done.returncode == 0, done.stdout + done.stderr
    exported = cli(root, site, "export", "run", "--format", "jsonl")
    assert exported.returncode == 0, exported.stderr
    counted: dict[str, list[int]] = {}
    for line in exported.stdout.splitlines():
        record = json.loads(line)
        seats = {s["label"]: s["agent"] for s in record["seats"]}
        for seat, points in record["payoffs"].items():
            mine = counted.setdefault(seats[seat], [0, 0])
            mine[0] += 1
            mine[1] += int(points)
    assert sum(right for _, right in counted.values()) == 6  # one of the two calls is right in each match
    return root, site, counted


def test_the_game_module_imports_nothing_of_arena_but_the_contract():
    imported = set(re.findall(r"^(?:from|import) ([\w.]+)", GAME, re.MULTILINE))
    assert imported == {"arena.contract"}


@pytest.mark.parametrize("style", [(), ("--plain",)], ids=["table", "plain"])
def test_arena_rank_prints_the_game_s_own_table(played, style):
    root, site, counted = played
    done = cli(root, site, "rank", "run", *style)
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "Coin calls per agent" in out and "How often each agent called it right." in out
    rows = {}
    for line in out.splitlines():
        cells = [c.strip() for c in re.split(r"[│┃|\t]", line) if c.strip()]
        if len(cells) == 5 and cells[0] in counted:
            rows[cells[0]] = cells[1:]
    heads = {"heady": "1.0", "taily": "0.0"}
    assert rows == {agent: [str(calls), str(right), f"{right / calls:.2f}", heads[agent]]
                    for agent, (calls, right) in counted.items()}


def test_arena_rank_json_lists_the_summary_and_its_table(played):
    root, site, counted = played
    done = cli(root, site, "rank", "run", "--json")
    assert done.returncode == 0, done.stderr
    ranked = json.loads(done.stdout)
    assert ranked["summaries"] == {"coin_calls": [{"agent": a, "calls": c, "right": r}
                                                  for a, (c, r) in sorted(counted.items())]}
    (table,) = ranked["summary_tables"]
    assert table["name"] == "coin_calls" and table["title"] == "Coin calls per agent"
    assert [c["name"] for c in table["columns"]] == ["Caller", "Calls", "Right", "Right share", "Heads share"]
    assert [row[:3] for row in table["rows"]] == [[a, c, r] for a, (c, r) in sorted(counted.items())]


def test_the_report_shows_the_game_s_table(played):
    root, site, counted = played
    done = cli(root, site, "report", "run", "-o", "report.html")
    assert done.returncode == 0, done.stderr
    html = (root / "report.html").read_text(encoding="utf-8")
    assert '<section id="summaries">' in html and '<a href="#summaries">' in html
    found = re.search(r'<table class="summary" data-table="coin_calls">(.*?)</table>', html, re.DOTALL)
    assert found, "no coin_calls table in the report"
    cells = [[unescape(c) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row)]
             for row in re.findall(r"<tr[^>]*>(.*?)</tr>", found.group(1), re.DOTALL)]
    assert cells[0] == ["Caller", "Calls", "Right", "Right share", "Heads share"]
    assert {r[0]: r[1:3] for r in cells[1:]} == {a: [str(c), str(r)] for a, (c, r) in counted.items()}
    assert "Coin calls per agent" in html


def test_a_run_of_a_game_without_summaries_has_none(tmp_path):
    site = make_site(tmp_path)
    (tmp_path / "plain.yaml").write_text(SCENARIO.replace("call_it", "public_goods").replace("repeats: 6", "repeats: 1")
                                         .replace("[heads]", "['5']").replace("[tails]", "['5']"), encoding="utf-8")
    done = cli(tmp_path, site, "run", "plain.yaml", "--run-dir", "run", "--plain")
    assert done.returncode == 0, done.stdout + done.stderr
    ranked = json.loads(cli(tmp_path, site, "rank", "run", "--json").stdout)
    assert ranked["summaries"] == {} and ranked["summary_tables"] == []


def test_a_table_shows_its_cells_one_way():
    table = Table(name="t", title="T", columns=[Column(name="who", numeric=False), Column(name="n"),
                                              Column(name="share", digits=1)],
                  rows=[["ann", 3, 0.25], ["bob", 2, None]])
    assert table.text_rows() == [["ann", "3", "0.2"], ["bob", "2", "—"]]
    assert table.text_columns == 1


def test_a_final_notice_is_read_from_a_record_only_when_the_match_finished():
    from arena.contract.messages import REFEREE, Message
    from arena.contract.records import MatchRecord

    seats = (SeatInfo(label="Player 1", role="Player", agent="ann"),)
    notice = Message(index=0, round=1, sender=REFEREE, recipients=("Player 1",), kind="notice", content="done",
                     data={"x": 1})
    record = MatchRecord.model_construct(key="k", group="g", repeat=1, game="call_it", seats=seats, messages=(notice,),
                                         status="finished")
    assert FinalNotice.of(record) == FinalNotice("k", "g", 1, seats, {"x": 1}, "call_it")
    assert FinalNotice.of(record.model_copy(update={"status": "truncated"})) is None


def test_a_game_whose_package_no_longer_imports_is_told_so(played, tmp_path):
    root, site, _ = played
    broken = tmp_path / "site"
    (broken / "arena_call_it-0.1.dist-info").mkdir(parents=True)
    for name in ("METADATA", "entry_points.txt"):
        (broken / "arena_call_it-0.1.dist-info" / name).write_bytes((site / "arena_call_it-0.1.dist-info" / name).read_bytes())
    (broken / "call_it.py").write_text("raise ImportError('needs coinlib')\n", encoding="utf-8")
    done = cli(root, broken, "rank", "run", "--json")
    assert done.returncode == 0, done.stderr
    ranked = json.loads(done.stdout)
    assert ranked["summary_problems"] == ["game 'call_it' could not be loaded to sum up its matches (ImportError: "
                                          "needs coinlib); its summary tables are left out"]
    assert ranked["summary_tables"] == [] and ranked["payoffs"]


def test_a_game_uninstalled_since_the_run_leaves_its_other_results(played, tmp_path):
    root, site, _ = played
    done = cli(root, tmp_path, "rank", "run", "--json")  # the site is not on the path: the game is unknown now
    assert done.returncode == 0, done.stderr
    ranked = json.loads(done.stdout)
    assert ranked["summary_tables"] == [] and ranked["payoffs"]
    plugins.refresh()


def test_a_game_whose_summary_fails_costs_only_its_own_tables(tmp_path):
    site = make_site(tmp_path)
    (tmp_path / "broken.yaml").write_text(SCENARIO.replace("call_it", "broken_call").replace("repeats: 6", "repeats: 2"),
                                          encoding="utf-8")
    done = cli(tmp_path, site, "run", "broken.yaml", "--run-dir", "run", "--plain")
    assert done.returncode == 0, done.stdout + done.stderr
    said = ("game 'broken_call' could not sum up its 2 matches (KeyError: 'who won'); its summary tables are left out")
    shown = cli(tmp_path, site, "rank", "run", "--plain")
    assert shown.returncode == 0 and "Traceback" not in shown.stderr, shown.stderr
    assert f"note: {said}" in " ".join(shown.stdout.split())
    assert "heady" in shown.stdout  # the payoff table is still there
    ranked = json.loads(cli(tmp_path, site, "rank", "run", "--json").stdout)
    assert ranked["summary_problems"] == [said] and ranked["summary_tables"] == [] and ranked["payoffs"]
    assert cli(tmp_path, site, "report", "run", "-o", "report.html").returncode == 0
    assert said.replace("'", "&#x27;") in (tmp_path / "report.html").read_text(encoding="utf-8")


def test_a_game_that_names_no_summary_fields_is_told_so(tmp_path):
    site = make_site(tmp_path)
    (tmp_path / "unmarked.yaml").write_text(SCENARIO.replace("call_it", "unmarked").replace("repeats: 6", "repeats: 1"),
                                            encoding="utf-8")
    assert cli(tmp_path, site, "run", "unmarked.yaml", "--run-dir", "run", "--plain").returncode == 0
    ranked = json.loads(cli(tmp_path, site, "rank", "run", "--json").stdout)
    assert ranked["summary_problems"] == [
        "game 'unmarked' offers summaries but its summary_fields ('calls') name no field of its last notice's data to "
        "read them from (a tuple of names); its summary tables are left out"]
    assert ranked["summary_tables"] == [] and ranked["payoffs"]
