"""`arena report` and `arena plot`: the page opened in a real browser (Debian's chromium driven by
Playwright), its numbers checked against `arena rank --json`, and a 10,000-match report."""

from __future__ import annotations

import importlib.util
import json
import re
import sqlite3
import struct
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from helpers import ROOT

CHROMIUM = Path("/usr/bin/chromium")
# without the background-networking switches chromium stalls on a closed network
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


def _offline_scenarios() -> list[str]:
    """Example scenarios that play with scripted agents only: no key, no model, a few seconds each."""
    found = []
    for path in sorted((ROOT / "scenarios").glob("*.yaml")):
        agents = (yaml.safe_load(path.read_text(encoding="utf-8")) or {}).get("agents") or {}
        if agents and all(a.get("backend") == "scripted" for a in agents.values()):
            found.append(path.stem)
    return found


OFFLINE = _offline_scenarios()


def arena(*args, timeout=300, cwd=ROOT):
    """The command as a user runs it; the example scenarios name their data relative to the checkout."""
    return subprocess.run([sys.executable, "-m", "arena.cli", *map(str, args)], cwd=cwd, capture_output=True,
                          text=True, timeout=timeout)


def _bench():
    spec = importlib.util.spec_from_file_location("report_size", ROOT / "bench" / "report_size.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Each offline example scenario, played once for the whole module."""
    assert {"quickstart", "pairwise-review-synthetic", "idiom-solitaire"} <= set(OFFLINE)
    root = tmp_path_factory.mktemp("runs")
    found = {}
    for name in OFFLINE:
        result = arena("run", ROOT / "scenarios" / f"{name}.yaml", "--quiet", "--run-dir", root / name)
        assert result.returncode == 0, result.stdout + result.stderr
        found[name] = root / name
    return found


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    assert CHROMIUM.exists(), "the browser tests need Debian's chromium: apt-get install -y chromium"
    with sync_playwright() as p:
        launched = p.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS)
        yield launched
        launched.close()


class Page:
    """A page of the report with every console error and uncaught exception collected."""

    def __init__(self, browser, path: Path, width=1280, height=900):
        self.page = browser.new_page(viewport={"width": width, "height": height})
        self.errors: list[str] = []
        self.dialogs: list[str] = []
        self.page.on("console", lambda m: m.type == "error" and self.errors.append(m.text))
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        self.page.on("dialog", lambda d: (self.dialogs.append(d.message), d.dismiss()))
        self.page.goto(path.resolve().as_uri())
        self.page.wait_for_selector("body[data-ready='1']", timeout=60_000)

    def search(self, text: str) -> int:
        self.page.fill("#f-text", text)
        self.page.wait_for_function("q => document.body.dataset.query === q", arg=text.strip())
        return int(self.page.evaluate("document.body.dataset.shown"))

    def choose(self, select: str, value: str) -> int:
        self.page.select_option(select, value)  # the change handler filters before this returns
        return int(self.page.evaluate("document.body.dataset.shown"))

    def close(self):
        self.page.close()


def report(run_dir: Path, out: Path) -> Path:
    result = arena("report", run_dir, "-o", out)
    assert result.returncode == 0, result.stderr
    assert out.exists()
    return out


def embedded(html: str, element_id: str):
    found = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', html, re.S)
    return json.loads(found.group(1))


def rank_json(run_dir: Path, *extra) -> dict:
    result = arena("rank", run_dir, "--json", *extra)
    assert result.returncode == 0, result.stderr
    return json.loads(result.stdout)


def exported(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in arena("export", run_dir).stdout.splitlines()]


def heatmap_cells(html: str) -> list[tuple[str, dict[tuple[str, str], float]]]:
    """Each heatmap drawn in the page: its title and its cells' values by (row, column)."""
    found = []
    for box in html.split('<div class="figure-box" data-figure="heatmap">')[1:]:
        title = re.match(r"<h4>(.*?)</h4>", box).group(1)
        svg = box[:box.index("</svg>")]
        cells = {(m["row"], m["col"]): float(m["v"]) for m in re.finditer(
            r'<rect class="cell"[^>]*data-row="(?P<row>[^"]*)" data-col="(?P<col>[^"]*)" data-value="(?P<v>[^"]*)"', svg)}
        found.append((html_unescape(title), cells))
    return found


def html_unescape(text: str) -> str:
    import html

    return html.unescape(text)


def png_size(path: Path) -> tuple[int, int]:
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", data[16:24])


# -- in the browser ----------------------------------------------------------------------
def test_report_in_chromium_shows_the_leader_a_transcript_and_no_errors(runs, browser, tmp_path):
    run_dir = runs["pairwise-review-synthetic"]
    path = report(run_dir, tmp_path / "report.html")
    ranked = rank_json(run_dir)
    winrate = next(m for m in ranked["peer_rank"]["methods"] if m["method"] == "winrate")
    leader = max(winrate["scores"], key=winrate["scores"].get)
    page = Page(browser, path)
    try:
        p = page.page
        top = p.locator('table.board[data-board="peer"][data-method="winrate"] tr.top td.name')
        assert top.inner_text() == leader
        payoff_leader = ranked["payoffs"][0]["agent"]
        assert p.locator('table.board[data-board="payoffs"] tr.top td.name').first.inner_text() == payoff_leader

        # a reply from the middle of one match, found through the search box, shown when opened
        records = exported(run_dir)
        record = records[3]
        reply = next(m for m in record["messages"] if m["kind"] == "reply" and len(m["content"]) > 60)
        snippet = reply["content"].splitlines()[0][:50].strip()
        matching = [r for r in records if any(snippet.lower() in m["content"].lower() for m in r["messages"])]
        assert page.search(snippet) >= len(matching) >= 1
        match = p.locator(f'details.match[data-key="{record["key"]}"]')
        assert match.count() == 1
        match.locator("summary").click()
        body = match.locator(".body")
        body.locator(".msg").first.wait_for(timeout=10_000)
        assert snippet in body.inner_text()
        assert body.locator("mark").count() >= 1
        # who sat where is revealed, and every message says who saw it
        seat = record["seats"][0]
        assert f"{seat['label']} ({seat['agent']})" in body.inner_text()
        assert body.locator(".audience").count() == len(record["messages"])
        assert body.locator(".msg.verdict").count() >= 1  # the referee's calibrated verdicts, kept for the record

        # filters: by game, by agent and outcome
        page.search("")
        assert page.choose("#f-group", "0") == len(records)
        agent = record["seats"][1]["agent"]
        with_agent = [r for r in records if any(s["agent"] == agent for s in r["seats"])]
        assert page.choose("#f-agent", agent) == len(with_agent)
        won = [r for r in with_agent if r["payoffs"][next(s["label"] for s in r["seats"] if s["agent"] == agent)]
               == max(r["payoffs"].values()) and len(set(r["payoffs"].values())) > 1]
        assert page.choose("#f-outcome", "won") == len(won)
        assert page.choose("#f-outcome", "failed") == 0
        assert p.locator(".page-info").first.inner_text().startswith("no match")

        shot = tmp_path / "report.png"
        p.evaluate("window.scrollTo(0, 0)")
        p.screenshot(path=str(shot), full_page=True)
        width, height = png_size(shot)
        assert width == 1280 and height > 900 and shot.stat().st_size > 50_000
        assert page.errors == [] and page.dialogs == []
    finally:
        page.close()


# games whose matches are won or tied (every match shares out the same total); the others' are scored, with no winner
CONTESTS = {"idiom_solitaire", "pairwise_review"}
PLACEHOLDERS = ["No pairwise results", "No reviews in this run", "No game with two roles", "No model calls",
                "No finished matches yet"]


def sections_of(html: str) -> tuple[list[str], list[str]]:
    """The page's sections and the links of its navigation bar, in order."""
    nav = re.search(r"<nav>(.*?)</nav>", html, re.S).group(1)
    return re.findall(r'<section id="([^"]+)"', html), re.findall(r'href="#([^"]+)"', nav)


BOARD_ROWS = """() => Array.from(document.querySelectorAll("table.board")).map(t => ({
    board: t.dataset.board, group: t.dataset.group || null, role: t.dataset.role || null, method: t.dataset.method || null,
    metric: t.dataset.metric || null,
    rows: Array.from(t.querySelectorAll("tbody tr")).map(r => ({
        top: r.classList.contains("top"), cells: Array.from(r.cells).map(c => c.textContent)}))}))"""


def assert_ranks_shared_by_ties(boards: list[dict], rank: dict, weighted: dict | None, style: dict | None = None) -> None:
    """Every leaderboard in the page numbers its rows as its method ranks (equal scores, one rank) and
    marks every row in first place."""
    payoffs = {}
    for r in rank["payoffs"] + [row for _, metrics in (rank.get("metrics") or {}).items()
                                for m in list(metrics.values())[1:] for row in m["summary"]]:
        payoffs.setdefault((r["metric"], r["group"], r["role"]), {})[r["agent"]] = r["mean"]
    for board in boards:
        rows = board["rows"]
        if board["board"] in ("peer", "weighted"):
            result = next(m for m in (rank["peer_rank"] if board["board"] == "peer" else weighted)["methods"]
                          if m["method"] == board["method"])
            expected = {name: result["rank"][name] for name in result["scores"]}
        elif board["board"] == "style":  # the style-controlled Bradley–Terry
            expected = style["rank"]
        else:
            means = payoffs[(board["metric"], board["group"], board["role"])]
            expected = {a: 1 + sum(v > means[a] + 1e-9 for v in means.values()) for a in means}
        assert {row["cells"][1]: int(row["cells"][0]) for row in rows} == expected, board
        assert [row["top"] for row in rows] == [int(row["cells"][0]) == 1 for row in rows], board


OUTCOME_BADGES = """() => Array.from(document.querySelectorAll("#matches details.match")).map(d => ({
    key: d.dataset.key, badges: Array.from(d.querySelectorAll("summary .badge")).map(b => b.textContent),
    winners: Array.from(d.querySelectorAll("summary .seats .winner")).map(w => w.textContent)}))"""


@pytest.mark.parametrize("name", OFFLINE)
def test_every_offline_example_scenario_is_reportable(runs, browser, tmp_path, name):
    run_dir = runs[name]
    path = report(run_dir, tmp_path / "report.html")
    html = path.read_text(encoding="utf-8")
    assert not re.search(r"""(src|href)=["']?(https?:)?//""", html), "the report must need no network"
    transcripts = embedded(html, "arena-transcripts")
    records = {r["key"]: r for r in exported(run_dir)}
    assert len(transcripts["matches"]) == len(records)
    summary = embedded(html, "arena-summary")
    rank = summary["rank"]

    # a section is there when it has something to show, and so is its link; the others are folded away
    metric_tables = [t for metrics in (rank.get("metrics") or {}).values() for m in metrics.values()
                     for t in m["role_tables"]]
    style = bool(summary["style_control"] or summary["style_problem"])
    expected = ["leaderboard"] + ["style"] * style + ["pairwise"] * bool(rank["peer_rank"] or rank["role_tables"]) + ["trend"] * bool(summary["figures"]["trend"]) \
        + ["reviewers"] * bool(rank["peer_rank"]) \
        + ["summaries"] * bool(rank["summary_tables"]) + ["panels"] * bool(rank["panels"]) \
        + ["roles"] * bool(rank["role_tables"] or metric_tables) \
        + ["cost"] * bool(rank["usage"]) + ["transcripts"]
    assert sections_of(html) == (expected, expected)
    assert not [words for words in PLACEHOLDERS if words in html]

    # games with two roles: a heatmap per role and one across roles, for every role table
    titles = [title for title, _ in heatmap_cells(html)]
    for t in rank["role_tables"]:
        first, second = t["roles"]
        for title in (f"{t['group']}: payoff of the row playing {first} against the column playing {second}",
                      f"{t['group']}: payoff of the row playing {second} against the column playing {first}",
                      f"{t['group']}: payoff of the row against the column, both roles (every match once)"):
            assert title in titles, title

    page = Page(browser, path)
    try:
        shown = page.page.locator("details.match")
        assert shown.count() == min(50, len(transcripts["matches"]))
        # decided and winners only in a contest; a tie as a tie; elsewhere scored, and nobody wins
        for match in page.page.evaluate(OUTCOME_BADGES):
            record = records[match["key"]]
            values = [record["payoffs"].get(s["label"]) for s in record["seats"]]
            scored = [v for v in values if v is not None]
            if record["game"] not in CONTESTS or len(scored) < 2:  # one scored seat (an adaptive comparison's judge) is no contest
                assert "scored" in match["badges"] and match["winners"] == [], match
            elif max(scored) == min(scored):
                assert "tie" in match["badges"] and match["winners"] == [], match
            else:
                top = [s for s, v in zip(record["seats"], values) if v == max(scored)]
                assert "decided" in match["badges"] and len(match["winners"]) == len(top), match
                assert all(w.startswith(f"{s['label']}: {s['agent']}") for w, s in zip(match["winners"], top))
            assert not {"decided", "tie"} & set(match["badges"]) or record["game"] in CONTESTS
        assert_ranks_shared_by_ties(page.page.evaluate(BOARD_ROWS), rank, summary["weighted"], summary["style_control"])
        shown.first.locator("summary").click()
        page.page.locator("details.match[open] .msg").first.wait_for(timeout=10_000)  # drawn when opened
        assert page.page.locator("details.match[open] .msg").count() > 0
        assert page.errors == []
    finally:
        page.close()


def test_hostile_replies_and_names_stay_text(browser, tmp_path):
    """Model replies and agent names are untrusted: they must show as text and never run."""
    run_dir = _bench().synthetic_run(tmp_path / "run", matches=30)
    evil_reply = '</script><script>alert("reply")</script><img src=x onerror="alert(\'img\')"> & done'
    evil_name = '<img src=y onerror="alert(\'name\')">'
    db = sqlite3.connect(run_dir / "run.sqlite")
    with db:
        from arena.store.texts import text_hash  # a text or name is stored once, and the row holds its number

        def number(text: str) -> int:
            return db.execute("INSERT INTO texts (hash, text) VALUES (?, ?) ON CONFLICT (hash) DO UPDATE SET text = text "
                              "RETURNING id", (text_hash(text), text)).fetchone()[0]

        db.execute("UPDATE posted SET content = ? WHERE kind = ?", (number(evil_reply), number("reply")))
        db.execute("UPDATE seat_outcomes SET agent = ? WHERE agent = ?", (number(evil_name), number("ada")))
        for table, column in (("reviews", "a"), ("reviews", "b"), ("reviews", "reviewer")):
            db.execute(f"UPDATE {table} SET {column} = ? WHERE {column} = 'ada'", (evil_name,))
        db.execute("UPDATE matches SET seats = replace(seats, '\"ada\"', ?)", (json.dumps(evil_name),))
    db.close()
    path = report(run_dir, tmp_path / "report.html")
    page = Page(browser, path)
    try:
        p = page.page
        assert page.search("& done") == 30
        p.locator("details.match > summary").first.click()
        p.locator("details.match[open] .body .msg").first.wait_for(timeout=10_000)
        assert evil_reply in p.locator("details.match[open] .body").inner_text()
        assert evil_name in p.locator("#leaderboard").inner_text()
        assert p.locator("img").count() == 0
        assert p.evaluate("document.scripts.length") == 3  # the two data blocks and the page's own script
        assert page.dialogs == [] and page.errors == []
    finally:
        page.close()


def test_a_10000_match_report_stays_usable(browser, tmp_path):
    bench = _bench()
    run_dir = bench.synthetic_run(tmp_path / "run", matches=10_000)
    path = report(run_dir, tmp_path / "report.html")
    size = path.stat().st_size
    assert size < 60e6, f"{size / 1e6:.1f} MB"
    page = Page(browser, path)
    try:
        p = page.page
        assert p.locator("details.match").count() == 50  # one page is drawn, not 10,000 matches
        assert "of 10000 matches" in p.locator(".page-info").first.inner_text()
        finished_q42 = sum(1 for i in range(10_000) if i % 500 == 42 and i % 97 != 13)
        assert page.search("verdict on q42:") == finished_q42
        page.search("")
        p.locator("#pager-top button", has_text="next").click()
        assert "page 2 of 200" in p.locator(".page-info").first.inner_text()
        db = sqlite3.connect(run_dir / "run.sqlite")
        with_invalid = db.execute("SELECT COUNT(DISTINCT match_key) FROM events WHERE type = 'turn_failed'").fetchone()[0]
        failed = db.execute("SELECT COUNT(*) FROM matches WHERE status = 'failed'").fetchone()[0]
        db.close()
        assert page.choose("#f-outcome", "failed") == failed > 0
        assert page.choose("#f-outcome", "invalid") == with_invalid > 0
        p.locator("details.match > summary").first.click()
        opened = p.locator("details.match[open]")
        opened.locator(".msg.fail .badge.invalid").first.wait_for(timeout=10_000)
        assert opened.locator(".msg.fail .badge.invalid").count() >= 1
        assert page.errors == []
    finally:
        page.close()


# -- the numbers ---------------------------------------------------------------------------
def test_the_figures_numbers_are_those_of_arena_rank_json(runs, tmp_path):
    run_dir = runs["pairwise-review-synthetic"]
    html = report(run_dir, tmp_path / "report.html").read_text(encoding="utf-8")
    summary = embedded(html, "arena-summary")
    ranked = rank_json(run_dir)
    assert summary["rank"] == ranked
    board = ranked["peer_rank"]
    names = board["contestants"]
    figures = summary["figures"]

    heat = figures["heatmap"][0]
    assert heat["values"] == board["pairwise"] and heat["rows"] == names
    weighted = rank_json(run_dir, "--weighted")["peer_rank"]
    assert figures["heatmap"][1]["values"] == weighted["pairwise"]  # PRD's weighted heatmap beside it
    (_, drawn), (_, drawn_weighted) = heatmap_cells(html)
    for cells, matrix in ((drawn, board["pairwise"]), (drawn_weighted, weighted["pairwise"])):
        assert cells == {(a, b): matrix[i][j] for i, a in enumerate(names) for j, b in enumerate(names)
                         if matrix[i][j] is not None}
    assert drawn != drawn_weighted

    elo = next(m for m in board["methods"] if m["method"] == "elo")
    trend = figures["trend"][0]
    assert trend["series"][0]["x"][-1] == board["reviews"]
    for line in trend["series"]:
        assert line["y"][0] == 1000
        assert line["y"][-1] == pytest.approx(elo["scores"][line["name"]], rel=1e-12)
        assert line["sd"][-1] == pytest.approx(elo["spread"][line["name"]], rel=1e-9)

    assert summary["weighted"] == weighted
    by_method = {m["method"]: m["weights"] for m in weighted["methods"]}
    for panel in figures["weights"]:
        method = "winrate" if "win rate" in panel["title"] else "elo"
        assert dict(zip(panel["names"], panel["values"])) == by_method[method]

    payoff_lines = {s["name"]: s["y"][-1] for s in figures["trend"][1]["series"]}
    assert payoff_lines == pytest.approx({r["agent"]: r["mean"] for r in ranked["payoffs"]}, rel=1e-12)


def test_payoff_games_figures_match_their_role_tables_and_payoffs(runs, tmp_path):
    run_dir = runs["idiom-solitaire"]
    html = report(run_dir, tmp_path / "report.html").read_text(encoding="utf-8")
    summary = embedded(html, "arena-summary")
    ranked = rank_json(run_dir)
    assert summary["rank"] == ranked and ranked["peer_rank"] is None
    (table,) = ranked["role_tables"]
    # one heatmap per role (DeepEval Eq. 2) and one across both roles
    early, late, across = summary["figures"]["heatmap"]
    assert "playing Early against the column playing Late" in early["title"]
    assert "playing Late against the column playing Early" in late["title"] and "both roles" in across["title"]
    agents = table["agents"]
    for i, a in enumerate(agents):
        for j, b in enumerate(agents):
            cell = table["cells"].get(a, {}).get(b)
            assert early["values"][i][j] == (None if cell is None else cell["scores"][0])
            swapped = table["cells"].get(b, {}).get(a)
            assert late["values"][i][j] == (None if swapped is None else swapped["scores"][1])
    # across roles: the row agent's mean payoff over every match against the column agent, from the matches
    against: dict[tuple[str, str], list[float]] = {}
    for record in exported(run_dir):
        (x, y) = record["seats"]
        against.setdefault((x["agent"], y["agent"]), []).append(record["payoffs"][x["label"]])
        against.setdefault((y["agent"], x["agent"]), []).append(record["payoffs"][y["label"]])
    for i, a in enumerate(agents):
        for j, b in enumerate(agents):
            got = across["values"][i][j]
            assert got == (None if (a, b) not in against else pytest.approx(sum(against[(a, b)]) / len(against[(a, b)])))
    drawn = dict(heatmap_cells(html))
    assert drawn[across["title"]] == {(a, b): v for a, row in zip(agents, across["values"])
                                      for b, v in zip(agents, row) if v is not None}
    means = {(r["role"], r["agent"]): r["mean"] for r in ranked["payoffs"]}
    for panel in summary["figures"]["trend"]:
        role = panel["title"].split(", as ")[1].split(":")[0]
        for line in panel["series"]:
            assert line["y"][-1] == pytest.approx(means[(role, line["name"])], rel=1e-12)
    assert summary["figures"]["weights"] == []


def test_arena_plot_writes_a_png_of_each_kind(runs, tmp_path):
    run_dir = runs["pairwise-review-synthetic"]
    for kind in ("heatmap", "trend", "weights"):
        out = tmp_path / f"{kind}.png"
        result = arena("plot", run_dir, "--kind", kind, "-o", out)
        assert result.returncode == 0, result.stderr
        width, height = png_size(out)
        assert width > 300 and height > 200 and out.stat().st_size > 10_000
    refused = arena("plot", runs["quickstart"], "--kind", "weights", "-o", tmp_path / "none.png")
    assert refused.returncode == 2 and "no reviews" in refused.stderr and not (tmp_path / "none.png").exists()


def test_cost_and_tokens_per_agent_are_those_of_arena_rank(tmp_path):
    from arena.contract.calls import CallRecord
    from arena.store import RunStore

    run_dir = _bench().synthetic_run(tmp_path / "run", matches=20)
    store = RunStore.open(run_dir)
    for i, (agent, cost) in enumerate([("ada", 0.002), ("ada", 0.003), ("basil", None), ("cyra", 0.001)]):
        store.record_call(CallRecord(match="duel#1:x", seat="Speaker 1", round=1, attempt=0, agent=agent,
                                     backend="openai", model="some-model", prompt_tokens=100 + i,
                                     completion_tokens=20 + i, cost=cost, latency=0.5, cached=i == 3))
    store.close()
    html = report(run_dir, tmp_path / "report.html").read_text(encoding="utf-8")
    assert embedded(html, "arena-summary")["rank"]["usage"] == rank_json(run_dir)["usage"]
    cost = html[html.index('<section id="cost">'):]
    cost = cost[:cost.index("</section>")]
    assert '<td class="name">ada</td>' in cost
    assert '<td class="num">unknown</td>' in cost  # basil's model has no price, so neither has the total
    assert '<td class="num">303</td>' in cost  # prompt tokens of calls that reached a model: 100 + 101 + 102



def test_a_transcript_can_be_read_as_the_seats_saw_it(browser, tmp_path):
    """With the anonymity filter on, each seat got the others' words with names taken out: the
    report shows the record (names and all) and, at a click, what the seats were actually shown."""
    import trio

    from arena.report.data import collect
    from arena.report.page import write
    from arena.run.runner import run_tournament
    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"id": "p1", "question": "Why is the sea salty?", "answer_a": "Rivers carry salts.",
                                 "answer_b": "Fish.", "label": -1}) + "\n", encoding="utf-8")
    says = {"alice": "I am alice, a GPT-4o model from OpenAI. Answer 1 explains where the salt comes from.\nPreference: 1",
            "bob": "bob here, running Claude. Answer 1 is the better one.\nPreference: 1"}
    # they agree at once: with stop: agreement the transcript is the two initial reviews
    raw = {"name": "seen", "anonymity": {},
           "games": [{"game": "peer_discussion", "params": {"pairs": str(pairs), "stop": "agreement"}}],
           "agents": {n: {"backend": "scripted", "strategy": "fixed", "params": {"replies": [r]}} for n, r in says.items()}}
    scenario = parse_scenario(raw)
    store = RunStore.create_or_resume(tmp_path / "run", "seen", yaml.safe_dump(raw), scenario.fingerprint())
    try:
        trio.run(run_tournament, scenario, store)
        store.flush()  # the packing process reads the file: every row committed first
        write(collect(store.read), tmp_path / "report.html")
    finally:
        store.close()
    page = Page(browser, tmp_path / "report.html")
    try:
        p = page.page
        p.locator("details.match > summary").first.click()
        body = p.locator("details.match[open] .body")
        body.locator(".msg").first.wait_for(timeout=10_000)
        record_view = p.locator("#matches").inner_text()
        assert says["alice"].splitlines()[0] in record_view and "Reviewer 1 (alice)" in record_view
        assert "anonymity filter: removed" in record_view

        p.check("#f-seen")
        p.wait_for_selector("body[data-seen='1'] details.match[open] .body .msg", timeout=10_000)
        seats_view = p.locator("#matches").inner_text()
        for name in ("alice", "bob", "GPT", "OpenAI", "Claude"):
            assert name not in seats_view, name
        assert "I am [name withheld], a [name withheld] model from [name withheld]." in seats_view
        assert "[name withheld] here, running [name withheld]." in seats_view
        assert p.locator("details.match[open] .badge.scrubbed").count() == 2  # the two replies, as the other got them
        assert p.locator("details.match[open] .msg.reply").count() == 2 and p.locator(".msg.action").count() == 0

        p.uncheck("#f-seen")
        p.wait_for_selector("body[data-seen='0'] details.match[open] .body .msg", timeout=10_000)
        assert says["bob"].splitlines()[0] in p.locator("#matches").inner_text()
        assert page.errors == [] and page.dialogs == []
    finally:
        page.close()


# -- a report of reviews files ---------------------------------------------------------------------------
FAIREVAL = ROOT / "tests" / "data" / "faireval"


def _second_judge(path: Path) -> Path:
    """Another judge's reviews, in both orders, bringing a third contestant the humans never labelled."""
    lines = []
    for q in range(1, 7):
        for a, b, score in (("gpt35", "alpaca-13b", -1), ("alpaca-13b", "gpt35", 1 if q % 3 else 0),
                            ("vicuna-13b", "alpaca-13b", -1 if q % 2 else 1), ("alpaca-13b", "vicuna-13b", 1),
                            ("gpt35", "vicuna-13b", -1 if q != 6 else 1), ("vicuna-13b", "gpt35", 1 if q < 4 else -1)):
            lines.append(json.dumps({"question": str(q), "a": a, "b": b, "reviewer": "second-judge", "score": score}))
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


REVIEW_TABLES = """() => {
  const rows = sel => Array.from(document.querySelectorAll(sel + " tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent));
  const h4 = text => Array.from(document.querySelectorAll("h4")).find(h => h.textContent.startsWith(text));
  const after = h => { let n = h.nextElementSibling; while (n && n.tagName !== "TABLE") n = n.nextElementSibling; return n; };
  const cells = t => Array.from(t.querySelectorAll("tbody tr")).map(r => Array.from(r.cells).map(c => c.textContent));
  return {
    peer: rows('table.board[data-board="peer"]'), weighted: rows('table.board[data-board="weighted"]'),
    bias: cells(after(h4("Bias diagnostics"))), agreement: cells(after(h4("Agreement with human (peer)"))),
    weights: Array.from(document.querySelectorAll('[data-figure="weights"]')).map(box => ({
      title: box.querySelector("h4").textContent,
      bars: Array.from(box.querySelectorAll("rect[data-name]")).map(r => [r.dataset.name, Number(r.dataset.value)])})),
    sections: Array.from(document.querySelectorAll("main > section")).map(s => s.id),
  };
}"""


def test_a_report_of_reviews_files_shows_what_arena_rank_computes_for_them(browser, tmp_path):
    imported = tmp_path / "faireval.jsonl"
    result = arena("import", "faireval", FAIREVAL, "-o", imported, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    second = _second_judge(tmp_path / "second.jsonl")
    out = tmp_path / "reviews.html"
    result = arena("report", "--reviews", imported, second, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert f"{out}: 66 reviews from 2 files" in result.stdout
    # several files are read as one: the numbers of `arena rank --reviews` on the two, one after the other
    both = tmp_path / "both.jsonl"
    both.write_text(imported.read_text(encoding="utf-8") + second.read_text(encoding="utf-8"), encoding="utf-8")
    board = json.loads(arena("rank", "--reviews", both, "--json", cwd=tmp_path).stdout)
    weighted = json.loads(arena("rank", "--reviews", both, "--json", "--weighted", cwd=tmp_path).stdout)
    html = out.read_text(encoding="utf-8")
    summary = embedded(html, "arena-summary")
    assert summary["rank"]["peer_rank"] == board and summary["weighted"] == weighted
    assert board["reference"] == "human" and board["reviewers"] == ["gpt-3.5-turbo-0301_mec2_bpc1", "second-judge"]
    assert embedded(html, "arena-transcripts") == {}
    assert "66 reviews from" in html and f"{imported} (30)" in html and f"{second} (36)" in html

    names = board["contestants"]
    (title, drawn), (weighted_title, drawn_weighted) = heatmap_cells(html)
    assert "Weighted" in weighted_title and "Weighted" not in title
    for cells, matrix in ((drawn, board["pairwise"]), (drawn_weighted, weighted["pairwise"])):
        assert cells == {(a, b): matrix[i][j] for i, a in enumerate(names) for j, b in enumerate(names)
                         if matrix[i][j] is not None}
    elo = next(m for m in board["methods"] if m["method"] == "elo")
    trend = summary["figures"]["trend"][0]
    assert {line["name"]: line["y"][-1] for line in trend["series"]} == pytest.approx(elo["scores"], rel=1e-12)

    page = Page(browser, out)
    try:
        shown = page.page.evaluate(REVIEW_TABLES)
        # no transcripts, role tables nor costs in reviews: those sections and their links are folded away
        assert shown["sections"] == ["leaderboard", "pairwise", "trend", "reviewers"]
        assert sections_of(html)[1] == shown["sections"]
        for key, result in (("peer", board), ("weighted", weighted)):
            winrate = next(m for m in result["methods"] if m["method"] == "winrate")
            assert [(int(r[0]), r[1]) for r in shown[key]] == sorted(
                ((winrate["rank"][n], n) for n in names), key=lambda x: (x[0], x[1]))
            assert [r[2] for r in shown[key]] == [f"{winrate['scores'][r[1]]:.3f}" for r in shown[key]]
        by_method = {m["method"]: m["weights"] for m in weighted["methods"]}
        assert len(shown["weights"]) == 2
        for panel in shown["weights"]:
            method = "winrate" if "win rate" in panel["title"] else "elo"
            assert dict(panel["bars"]) == pytest.approx(by_method[method])
        assert [(r[0], int(r[1]), r[2]) for r in shown["bias"]] == [
            (b["reviewer"], b["reviews"], f"{b['first_shown_wins']:.3f}") for b in board["bias"]]
        assert [(r[0], int(r[1]), r[2]) for r in shown["agreement"]] == [
            (a["method"], a["examples"]["examples"], f"{a['examples']['accuracy']:.3f}") for a in board["agreement"]]
        assert page.page.locator("#transcripts, #matches, #filters").count() == 0
        assert page.errors == [] and page.dialogs == []
    finally:
        page.close()


def test_equal_scores_share_a_rank_in_the_report(tmp_path):
    reviews = tmp_path / "ties.jsonl"
    rows = [("q1", "x", "y", -1), ("q2", "x", "y", 1), ("q1", "x", "z", -1), ("q2", "y", "z", -1),
            ("q3", "z", "x", 1), ("q3", "z", "y", 1)]
    reviews.write_text("".join(json.dumps({"question": q, "a": a, "b": b, "reviewer": "judge", "score": s}) + "\n"
                               for q, a, b, s in rows), encoding="utf-8")
    out = tmp_path / "ties.html"
    result = arena("report", "--reviews", reviews, "-o", out, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    html = out.read_text(encoding="utf-8")
    board = embedded(html, "arena-summary")["rank"]["peer_rank"]
    winrate = next(m for m in board["methods"] if m["method"] == "winrate")
    assert winrate["rank"] == {"x": 1, "y": 1, "z": 3}
    table = html[html.index('data-board="peer"'):]
    table = table[:table.index("</table>")]
    assert re.findall(r'<tr class="top"><td>1</td><td class="name">(\w)</td>', table) == ["x", "y"]
    assert '<tr><td>3</td><td class="name">z</td>' in table
    assert "Equal scores share a rank" in html


def test_a_file_of_human_labels_alone_is_ranked_with_them(tmp_path):
    imported = tmp_path / "faireval.jsonl"
    assert arena("import", "faireval", FAIREVAL, "-o", imported, cwd=tmp_path).returncode == 0
    human = tmp_path / "human.jsonl"
    human.write_text("".join(line + "\n" for line in imported.read_text(encoding="utf-8").splitlines()
                             if json.loads(line)["reviewer"] == "human"), encoding="utf-8")
    out = tmp_path / "human.html"
    result = arena("report", "--reviews", human, cwd=tmp_path)  # written beside the file by default
    assert result.returncode == 0, result.stderr
    html = (tmp_path / "human.html").read_text(encoding="utf-8")
    ranked = json.loads(arena("rank", "--reviews", human, "--reviewers", "human", "--json", cwd=tmp_path).stdout)
    assert embedded(html, "arena-summary")["rank"]["peer_rank"] == ranked
    assert "hold only human&#x27;s reviews: they are ranked with them" in html and ranked["agreement"] == []
    assert out.exists()


@pytest.mark.parametrize("problem", ["nothing", "both", "missing", "bad line"])
def test_a_report_of_bad_reviews_files_stops_plainly_and_writes_nothing(tmp_path, problem):
    good = _second_judge(tmp_path / "good.jsonl")
    bad = tmp_path / "bad.jsonl"
    bad.write_text(good.read_text(encoding="utf-8").replace('"score": 1', '"score": 2', 1), encoding="utf-8")
    out = tmp_path / "out.html"
    args, message = {
        "nothing": ([], "give a run directory, or --reviews FILE"),
        "both": ([tmp_path, "--reviews", good], "give a run directory, or --reviews FILE"),
        "missing": (["--reviews", good, tmp_path / "absent.jsonl"], "absent.jsonl: file not found"),
        "bad line": (["--reviews", good, bad], "bad.jsonl, line 2: score: score must be -1 (A better), 0 (tie) or 1"),
    }[problem]
    result = arena("report", *args, "-o", out, cwd=tmp_path)
    assert result.returncode == 2, result.stdout + result.stderr
    assert message in " ".join(result.stderr.split()) and "Traceback" not in result.stderr
    assert not out.exists()
