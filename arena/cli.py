"""The `arena` command."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import trio
from rich.console import Console
from rich.table import Table

from . import __version__, plugins
from .errors import ConfigError
from .live import RoundLog
from .match import MatchRecord
from .results import PayoffSummary, summarize
from .runner import plan, run_scenario
from .scenario import load_scenario


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except ConfigError as exc:
        Console(stderr=True).print(f"[bold red]error:[/] {exc}", markup=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        return 130


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="arena", description="Evaluate language models by making them interact.")
    parser.add_argument("--version", action="version", version=f"arena {__version__}")
    sub = parser.add_subparsers(title="commands")

    run = sub.add_parser("run", help="play every match of a scenario and print the results")
    run.add_argument("scenario", type=Path)
    run.add_argument("--plain", action="store_true", help="one line per event instead of round tables")
    run.add_argument("--quiet", action="store_true", help="no round log, only the results")
    run.add_argument("--concurrency", type=int, help="matches at once (overrides the scenario)")
    run.add_argument("--jsonl", type=Path, help="append each finished match record to this file")
    run.set_defaults(handler=_run)

    validate = sub.add_parser("validate", help="check a scenario file without running it")
    validate.add_argument("scenario", type=Path)
    validate.set_defaults(handler=_validate)

    games = sub.add_parser("games", help="list installed games and their parameters")
    games.add_argument("--json", action="store_true", help="machine-readable output")
    games.set_defaults(handler=_games)
    return parser


def _run(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    console = Console(highlight=False)
    log = None if args.quiet else RoundLog(console, plain=True if args.plain else None)
    sink = open(args.jsonl, "a", encoding="utf-8") if args.jsonl else None

    def keep(record: MatchRecord) -> None:
        if sink is not None:  # written as each match ends, so a crash loses only matches in flight
            sink.write(record.model_dump_json() + "\n")
            sink.flush()

    try:
        records = trio.run(run_scenario, scenario, log, keep, args.concurrency)
    finally:
        if sink is not None:
            sink.close()
    print_results(console, summarize(records))
    failed = [r for r in records if r.status == "failed"]
    for record in failed:
        console.print(f"[red]match {record.key} failed:[/] {record.error.splitlines()[0] if record.error else ''}")
    console.print(f"{len(records) - len(failed)} of {len(records)} matches finished.")
    return 1 if failed else 0


def print_results(console: Console, rows: list[PayoffSummary]) -> None:
    groups = list(dict.fromkeys(r.group for r in rows))
    for group in groups:
        members = [r for r in rows if r.group == group]
        by_role = len({r.role for r in members}) > 1
        table = Table(title=f"{group}: mean payoff per agent (95% interval over matches)", title_justify="left")
        table.add_column("Agent")
        if by_role:
            table.add_column("Role")
        for name in ("Matches", "Mean", "95% CI", "Std", "Invalid", "Defaulted"):
            table.add_column(name, justify="right")
        for r in members:
            interval = "—" if r.low is None else f"[{r.low:.2f}, {r.high:.2f}]"
            cells = [r.agent] + ([r.role] if by_role else [])
            cells += [str(r.matches), f"{r.mean:.2f}", interval, f"{r.std:.2f}", str(r.invalid_replies), str(r.defaulted_turns)]
            table.add_row(*cells)
        console.print(table)


def _validate(args: argparse.Namespace) -> int:
    scenario = load_scenario(args.scenario)
    specs = plan(scenario)
    print(f"{args.scenario}: ok — {len(scenario.agents)} agents, {len(scenario.games)} game entries, {len(specs)} matches")
    return 0


def _games(args: argparse.Namespace) -> int:
    listing = []
    for name in plugins.names("game"):
        game = plugins.load("game", name)
        params = []
        for field, info in game.Params.model_fields.items():
            default = None if info.is_required() else info.get_default(call_default_factory=True)
            params.append({"name": field, "type": _type_name(info.annotation), "default": default,
                           "required": info.is_required(), "description": info.description or ""})
        listing.append({"name": name, "description": game.description, "min_seats": game.min_seats,
                        "max_seats": game.max_seats, "referee": game.default_referee, "params": params})
    if args.json:
        print(json.dumps(listing, indent=2, default=str))
        return 0
    console = Console(highlight=False)
    for game in listing:
        seats = f"{game['min_seats']}+" if game["max_seats"] is None else f"{game['min_seats']}–{game['max_seats']}"
        table = Table(title=f"{game['name']} — {game['description']} (seats {seats})", title_justify="left")
        for column in ("Parameter", "Type", "Default", "Meaning"):
            table.add_column(column)
        for p in game["params"]:
            table.add_row(p["name"], p["type"], "required" if p["required"] else repr(p["default"]), p["description"])
        console.print(table)
    return 0


def _type_name(annotation) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


if __name__ == "__main__":
    sys.exit(main())
