"""The JSON documents `arena ... --json` prints, and their keys as `--help` describes them. Their
numbers come from the same functions as the tables (arena.results), so both say the same."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the help texts below are read by every `arena` start: what they document loads when used
    from arena.contract.runs import RunReader

RUNS_JSON = ("print one JSON document: a list with one object per run directory, with keys run_dir, name, "
             "status, finished, failed, interrupted, truncated, planned, updated (ISO 8601), readable (false: a damaged, "
             "empty or other-format store, its status says which), rescored_from (the run it rescores, or null)")
SHOW_JSON = ("print one JSON document: {run: {run_dir, name, status, planned, sessions: [{started, overrides, "
             "limit}], rescored_from (the run it rescores, or null)}, matches: [{key, group, repeat, game, status, seats: [{label, agent, role}], rounds, payoffs "
             "(by seat), error}]}; with --match, that match's whole record, as `arena export` writes it")
VALIDATE_JSON = ("print one JSON document: {scenario, ok, agents, game_entries, matches, until_stable (entries "
                 "that may add matches), notes: [{entry, note}], overrides, limit}; when the scenario has "
                 "problems, {scenario, ok: false, problems: [{field, message}]} and exit status 2")
RUN_JSON = ("at the end, print the run's summary as one JSON document on stdout, the keys of `arena rank "
            "RUN_DIR --json` (run, payoffs, role_tables, metrics, stability, usage, peer_rank, summaries, "
            "summary_tables, ...) and session: "
            "what this command did (played, finished, failed, interrupted, not_started, resumed, beyond_limit, "
            "limit, overrides, stopped, exit_status); the live view goes to stderr")


def runs_document(output: Path) -> list[dict]:
    from arena.results.listing import run_rows

    return [row.model_dump() for row in run_rows(output)]


def show_document(run_dir: Path, store: RunReader) -> dict:
    from arena.results.listing import match_rows, rescored_from, sessions_json

    info = store.run_info()
    return {
        "run": {"run_dir": str(run_dir), "name": info.get("name"), "status": store.status(),
                "planned": info.get("planned") or 0, "sessions": sessions_json(store),
                "rescored_from": rescored_from(info)},
        "matches": [row.model_dump() for row in match_rows(store.matches(), store.match_statuses())],
        "stability": store.stability(),  # until_stable's checks; the last of an entry says what stopped it
    }


def validate_document(path: Path, scenario, matches: int, unstable: list[str], notes: list[tuple[str, str]],
                      overrides: list[str], limit: int | None) -> dict:
    return {"scenario": str(path), "ok": True, "agents": len(scenario.agents), "game_entries": len(scenario.games),
            "matches": matches, "until_stable": unstable, "notes": [{"entry": e, "note": n} for e, n in notes],
            "overrides": overrides, "limit": limit}


def problems_document(path: Path, error) -> dict:
    from arena.contract.errors import format_loc

    return {"scenario": str(path), "ok": False,
            "problems": [{"field": format_loc(p.loc), "message": p.message} for p in error.problems]}


def run_document(run_dir: Path, store: RunReader, session: dict) -> dict:
    from arena.results.summary import rank_json

    summary = rank_json(store)
    summary["run"]["run_dir"] = str(run_dir)
    return {**summary, "session": session}
