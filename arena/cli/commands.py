"""The `arena` command."""

from __future__ import annotations

import argparse
import contextlib
import csv
import difflib
import json
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

from arena import __version__
from arena.contract import plugins
from arena.contract.agent import FatalAgentError
from arena.contract.errors import ConfigError
from arena.contract.files import OutputError, replacing
from arena.cli.documents import RUN_JSON, RUNS_JSON, SHOW_JSON, VALIDATE_JSON
from arena.cli.output import closing_quietly, console as output_console, print_json, table_console
from arena.cli.report import add_commands as add_report_commands

if TYPE_CHECKING:
    from rich.console import Console

    from arena.contract.runs import RunReader
    from arena.store import RunStore

PLAIN_TABLE = "print the table as tab-separated values, a header row first, one row per line"
PLAIN_TABLES = ("print each table as tab-separated values, a header row first; titles and other lines start "
                "with '# ', a blank line between tables")


OUTAGE = 4  # exit status: a backend stayed unreachable; its matches are left for the next `arena run`


def main(argv: list[str] | None = None) -> int:
    """Exit status: 0 every match finished, 1 some match failed, 2 a bad scenario, command line or run
    directory, 3 the budget is spent, 4 a backend could not be reached (``OUTAGE``), 130 Ctrl-C; 0 also
    when the reader of a pipe stopped reading."""
    return closing_quietly(lambda: _main(argv))


def _main(argv: list[str] | None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if not hasattr(args, "handler"):
        parser.print_help()
        return 2
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        return 130
    except BaseExceptionGroup as group:  # Ctrl-C met inside a task group, beside whatever it stopped
        if group.subgroup(KeyboardInterrupt) is not None:
            return 130
        return _said_or_raise(group, args)
    except Exception as exc:
        return _said_or_raise(exc, args)


def _said_or_raise(exc: BaseException, args: argparse.Namespace) -> int:
    """A mistake a person can fix is said in a sentence (exit 2); anything else is a bug, shown whole."""
    from arena.cli.mistakes import said

    sentence = said(exc, getattr(args, "run_dir", None), _user_errors(), run=args.handler is _run)
    if sentence is None:
        raise exc
    _error(sentence)
    return 2


def _user_errors() -> tuple[type[Exception], ...]:
    """Errors a user can cause and fix (a scenario, a run directory, a reviews file, a key, an output
    file): said in a line."""
    from arena.rank.reviews import ReviewError
    from arena.store import StoreError

    from arena.cli.rescore import RescoreError
    from arena.run.executor import ExecutorError

    return ConfigError, StoreError, ReviewError, FatalAgentError, OutputError, RescoreError, ExecutorError


def _error(text: str) -> None:
    from rich.console import Console
    from rich.text import Text

    Console(stderr=True, highlight=False, soft_wrap=True).print(Text("error: ", style="bold red") + Text(text))


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="arena", description="Evaluate language models by making them interact.",
        epilog="For scripts: --json (run, validate, runs, show, rank, games, agents, referees) prints one JSON "
               "document and nothing else on stdout; --plain (runs, show, rank, games, agents, referees) prints "
               "tables as tab-separated values. Piped output is never cut to the terminal's width. A smoke test: "
               "`arena run S.yaml --limit 2 --set repeats=1`, then the same command without --limit plays the rest. "
               "Exit status: 0 done, 1 some match failed, 2 bad input, 3 budget spent, 4 a backend unreachable, "
               "130 Ctrl-C.")
    parser.add_argument("--version", action="version", version=f"arena {__version__}")
    sub = parser.add_subparsers(title="commands")

    run = sub.add_parser("run", help="play a scenario's tournament (or resume it) and print the results")
    run.add_argument("scenario", type=Path)
    run.add_argument("--run-dir", type=Path, help="where the run is stored (default: OUTPUT/NAME from the scenario)")
    run.add_argument("--force-new", action="store_true", help="set the run directory's run aside (renamed, not deleted) and start afresh; cached replies are reused")
    run.add_argument("--concurrency", type=_at_most("concurrency.matches"), metavar="N",
                     help="matches at once (overrides the scenario)")
    run.add_argument("--processes", type=_at_most("concurrency.processes"), metavar="N",
                     help="the older spelling of --executor processes --workers N; it still works, with a note")
    run.add_argument("--executor", choices=("local", "processes", "ray"),
                     help="where the matches are played (overrides the scenario's execution.executor): the run's "
                          "process, worker processes on this machine, or Ray actors on a cluster")
    run.add_argument("--address", metavar="ADDR",
                     help="with --executor ray: auto (the cluster this machine is a node of) or HOST:PORT of its head; "
                          "without it a local Ray instance is started for the run")
    run.add_argument("--workers", type=_at_most("concurrency.processes"), metavar="N",
                     help="worker processes or Ray actors (overrides execution.workers)")
    run.add_argument("--no-cache", action="store_true", help="ask the models again instead of reusing cached replies")
    run.add_argument("--dry-run", action="store_true", help="print the planned matches, calls, tokens and cost; play nothing")
    _scenario_options(run)
    run.add_argument("--json", action="store_true", help=RUN_JSON + "; with --dry-run, the estimate")
    view = run.add_mutually_exclusive_group()
    view.add_argument("--plain", action="store_true", help="one line per event (the default when not a terminal)")
    view.add_argument("--rounds", action="store_true", help="a table per round of every match instead of the dashboard")
    view.add_argument("--quiet", action="store_true", help="only the results")
    run.set_defaults(handler=_run)

    validate = sub.add_parser("validate", help="check a scenario file without running it")
    validate.add_argument("scenario", type=Path)
    _scenario_options(validate)
    validate.add_argument("--json", action="store_true", help=VALIDATE_JSON)
    validate.set_defaults(handler=_validate)

    games = sub.add_parser("games", help="list installed games and their parameters")
    _forms(games, PLAIN_TABLES)
    games.set_defaults(handler=_games)

    agents = sub.add_parser("agents", help="list installed agent backends and their parameters")
    _forms(agents, PLAIN_TABLES)
    agents.set_defaults(handler=_agents)

    referees = sub.add_parser("referees", help="list installed referees and their parameters")
    _forms(referees, PLAIN_TABLES)
    referees.set_defaults(handler=_referees)

    runs = sub.add_parser("runs", help="list run directories and their status")
    runs.add_argument("output", nargs="?", type=Path, default=Path("runs"), help="folder of run directories (default: runs)")
    _forms(runs, PLAIN_TABLE, RUNS_JSON)
    runs.set_defaults(handler=_runs)

    show = sub.add_parser("show", help="list a run's matches, or one match's transcript")
    show.add_argument("run_dir", type=Path)
    show.add_argument("--match", help="the key of the match to show")
    _forms(show, PLAIN_TABLE + " (the list of matches)", SHOW_JSON)
    show.set_defaults(handler=_show)

    export = sub.add_parser("export", help="write a run's matches as JSON lines or CSV")
    export.add_argument("run_dir", type=Path)
    export.add_argument("--format", choices=["jsonl", "csv"], default="jsonl")
    export.add_argument("-o", "--output", type=Path, help="file to write (default: standard output)")
    export.set_defaults(handler=_export)

    rank = sub.add_parser("rank", help="a run's results, or a peer-rank leaderboard from review tuples",
                          description="A run's results and, when its games produced reviews, their peer rank; or the "
                                      "peer rank of a JSONL file of review tuples. Every peer-rank option works for both.")
    rank.add_argument("run_dir", type=Path, nargs="?", help="a run directory (payoffs per agent)")
    rank.add_argument("--reviews", type=Path, help="a JSONL file of review tuples instead of a run")
    rank.add_argument("--method", choices=["winrate", "elo", "bt", "all"], default="all")
    rank.add_argument("--reviewers", nargs="+", help="rank with these reviewers only (default: all but the reference)")
    rank.add_argument("--weighted", action="store_true", help="weigh reviewers by their own score as contestants")
    rank.add_argument("--weight", action="append", default=[], metavar="REVIEWER=W",
                      help="a fixed weight for a reviewer that is not a contestant (repeatable)")
    rank.add_argument("--elo-weights", choices=["ordering", "mean"], default="ordering",
                      help="weighted Elo: weights per ordering, replayed and scaled to mean 1 (PRD Alg. 1; default), "
                           "or from the mean over orderings, scaled to [0, 1]")
    rank.add_argument("--reference", help="reviewer whose labels the others are checked against (default: human, when present)")
    rank.add_argument("--agreement-unit", choices=["order", "pair"], default="order",
                      help="agreement with the reference per presented order (PRD Table 5; default) or per pair")
    rank.add_argument("--orderings", type=int, default=1000, help="random review orders averaged by Elo")
    rank.add_argument("--bootstrap", type=int, default=200, help="bootstrap samples (questions resampled); 0: no intervals")
    rank.add_argument("--seed", type=int, default=0)
    rank.add_argument("--style-control", action="store_true",
                      help="also rank by Bradley–Terry with the answers' length and markdown as covariates, and say "
                           "what each is worth (a run's kept answers, or a reviews file's a_length, b_length, ... columns)")
    _forms(rank, PLAIN_TABLES)
    rank.set_defaults(handler=_rank)

    annotate = sub.add_parser("annotate", help="human in the loop: export the least certain verdicts, import people's")
    annotate_sub = annotate.add_subparsers(title="annotate commands")
    out = annotate_sub.add_parser("export", help="the top-beta verdicts by BPDE (among equal BPDE, the smaller "
                                  "calibrated score margin first), as a CSV to fill in")
    out.add_argument("run_dir", type=Path)
    out.add_argument("--beta", type=float, default=0.2, help="the share of verdicts to send to people (0 to 1)")
    out.add_argument("-o", "--output", type=Path, required=True)
    out.add_argument("--seed", type=int, help="draws the order each pair is shown in (default: a fresh one, kept in the file)")
    out.set_defaults(handler=_annotate_export)
    ask = annotate_sub.add_parser("ask", help="the top-beta verdicts by BPDE (among equal BPDE, the smaller "
                                  "calibrated score margin first), asked of you at the terminal")
    ask.add_argument("run_dir", type=Path)
    ask.add_argument("--beta", type=float, default=0.2, help="the share of verdicts to ask about (0 to 1)")
    ask.add_argument("--seed", type=int, help="draws the order each pair is shown in (default: a fresh one, printed)")
    ask.set_defaults(handler=_annotate_ask)
    back = annotate_sub.add_parser("import", help="bring filled-in human verdicts back; they replace the judge's")
    back.add_argument("run_dir", type=Path)
    back.add_argument("file", type=Path)
    back.set_defaults(handler=_annotate_import)

    importer = sub.add_parser("import", help="turn released review data into a reviews JSONL file")
    importer.add_argument("format", choices=["prd", "faireval"],
                          help="prd: PRD's vicuna80 ratings-<reviewer> folders; faireval: FairEval's repository "
                               "folder (answer/, review/: the human labels and FairEval.py's evaluations)")
    importer.add_argument("folder", type=Path)
    importer.add_argument("-o", "--output", type=Path, required=True)
    importer.add_argument("--contestants", nargs="+", help="keep only battles between these")
    importer.add_argument("--order", choices=["first", "second", "both"],
                          help="faireval only: which presentation order of FairEval.py's evaluations to import: first "
                               "(its `review` lists: the file's first model shown first, as without BPC), second "
                               "(`review_bpc`: the second model first), or both (the default); the human labels are "
                               "imported whatever the order")
    importer.set_defaults(handler=_import)

    rescore = sub.add_parser(
        "rescore", help="a new run that replays a finished run's seats and asks only its (new) judges",
        description="Makes a new run linked to RUN_DIR: every agent that sat at a table replays its recorded "
                    "replies (no request reaches it); the judges --judge brings in, the agents of --agents and a "
                    "referee's judges are asked. Without options the run is replayed as it was. Run it again to resume.")
    rescore.add_argument("run_dir", type=Path, metavar="RUN_DIR", help="the finished run to rescore")
    rescore.add_argument("--judge", action="append", default=[], metavar="NAME=AGENT",
                         help="replace the run's agent NAME (a judge seat) by AGENT, defined in --agents (repeatable)")
    rescore.add_argument("--agents", type=Path, metavar="FILE",
                         help="a YAML file of agents (as a scenario's `agents` block) that the rescore asks live")
    rescore.add_argument("--referee", metavar="SPEC",
                         help="every entry's referee instead of the run's: a name, or YAML such as "
                              "'{use: llm_judge, agent: judge2}'")
    rescore.add_argument("-o", "--output", type=Path, dest="new_run", metavar="NEW_RUN",
                         help="the new run's folder (default: RUN_DIR-rescored beside it)")
    rescore.add_argument("--force-new", action="store_true",
                         help="set the new run's folder's run aside (renamed, not deleted) and start afresh")
    rescore.add_argument("--dry-run", action="store_true", help="print the planned matches and calls; play nothing")
    rescore.add_argument("--json", action="store_true", help=RUN_JSON)
    rescore_view = rescore.add_mutually_exclusive_group()
    rescore_view.add_argument("--plain", action="store_true", help="one line per event")
    rescore_view.add_argument("--quiet", action="store_true", help="only the results")
    rescore.set_defaults(handler=_rescore, rounds=False, concurrency=None, processes=None, no_cache=False, limit=None,
                         overrides=[], executor=None, address=None, workers=None)

    watch = sub.add_parser("watch", help="follow a run that another process is playing")
    watch.add_argument("run_dir", type=Path)
    watch.add_argument("--interval", type=_seconds, default=0.5, metavar="SECONDS",
                       help="seconds between looks at the store (default: 0.5)")
    watch.add_argument("--plain", action="store_true", help="one line per new message instead of the dashboard")
    watch.set_defaults(handler=_watch)

    add_report_commands(sub)
    return parser


def _scenario_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", dest="overrides",
                        help="change a scenario field for this run, by dotted path (repeatable): repeats=1, "
                             "agents.alice.model=gpt-4o-mini, games[0].params.rounds=3, game.params.rounds=3 (every "
                             "entry); VALUE is read as YAML and checked like the file; `arena show` lists them")
    parser.add_argument("--limit", type=_positive, metavar="N",
                        help="only the first N matches of the plan, the same ones every time (a smoke test); "
                             "running again without --limit keeps them and plays the rest")


def _forms(command: argparse.ArgumentParser, plain_help: str, json_help: str = "machine-readable output") -> None:
    """--json or --plain: a command prints one form or the other, never both."""
    form = command.add_mutually_exclusive_group()
    form.add_argument("--json", action="store_true", help=json_help)
    form.add_argument("--plain", action="store_true", help=plain_help)


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, not {text!r}") from None
    if not value > 0:  # also refuses nan
        raise argparse.ArgumentTypeError(f"expected more than 0 seconds, not {text}")
    return value


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, not {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected at least 1, not {value}")
    return value


def _at_most(field: str):
    """A whole number from 1 to the cap the scenario's own field has: an option overrides a field, it does
    not get past its cap."""
    def parse(text: str) -> int:
        from arena.run.scenario import Concurrency

        value = _positive(text)
        cap = next(m.le for m in Concurrency.model_fields[field.split(".")[1]].metadata if hasattr(m, "le"))
        if value > cap:
            raise argparse.ArgumentTypeError(f"expected at most {cap:,} (the cap of {field}), not {value:,}")
        return value

    return parse


def _load(args: argparse.Namespace):
    """The scenario file with the command's --set overrides written in."""
    from arena.run.scenario import load_scenario
    from arena.run.overrides import parse_overrides
    return load_scenario(args.scenario, parse_overrides(args.overrides))


# -- run -------------------------------------------------------------------------------
def _observer(args: argparse.Namespace, console: Console, scenario, store: RunStore):
    from arena.cli.live import RoundLog
    from arena.run.runner import Observer

    if args.quiet:
        return Observer()
    if args.rounds:  # asked for: the tables, on a terminal or not
        return RoundLog(console, plain=False)
    if args.plain or not console.is_terminal:
        return RoundLog(console, plain=True)
    from arena.cli.dashboard import Dashboard

    people = any(scenario.agent_config(name)[0].uses_terminal for name in scenario.agents)
    view = Dashboard(console, title=scenario.name, specs=store.spec, private=people)
    view.catch_up(store.run_dir)  # a resumed run's earlier calls and spend count too
    return view


def _run(args: argparse.Namespace) -> int:
    from arena.store import NotAFolder, StoreError
    from arena.store import RunStore

    scenario = _load(args)
    _say_older_spellings(scenario, args.processes)
    if args.dry_run:
        return _dry_run(scenario, args.limit, args.json)
    args.run_dir = args.run_dir or Path(scenario.output) / scenario.name  # an error about the store names it
    try:
        store = RunStore.create_or_resume(
            args.run_dir, scenario.name, args.scenario.read_text(encoding="utf-8"), scenario.fingerprint(), args.force_new
        )
    except NotAFolder as exc:  # here the run directory was chosen by --run-dir (or the scenario's output)
        raise StoreError(f"{exc.path} is a file, not a folder: a run needs a folder of its own (made if missing); "
                         "give another --run-dir") from None
    except StoreError as exc:
        raise StoreError(f"{exc}{_overrides_hint(args.run_dir, args.overrides)}") from None
    try:  # however the run ends (Ctrl-C, budget, outage, an error), the run's lock is let go
        store.record_session(args.overrides, args.limit)
        return _play(args, scenario, store)
    finally:
        store.close()


def _rescore(args: argparse.Namespace) -> int:
    from arena.cli.rescore import read_source, rescored_scenario
    from arena.run.scenario import parse_scenario
    from arena.store import RunStore

    import yaml

    source = read_source(args.run_dir)
    raw = rescored_scenario(source, args.judge, args.agents, args.referee)
    text = yaml.safe_dump(raw, sort_keys=False, allow_unicode=True)
    scenario = parse_scenario(raw, f"the rescore of {args.run_dir}")
    if args.dry_run:
        return _dry_run(scenario, None, args.json)
    args.run_dir = args.new_run or source.run_dir.with_name(source.run_dir.name + "-rescored")
    store = RunStore.create_or_resume(args.run_dir, scenario.name, text, scenario.fingerprint(), args.force_new)
    try:
        store.record_session([], None)
        return _play(args, scenario, store)
    finally:
        store.close()


def _play(args: argparse.Namespace, scenario, store: RunStore) -> int:
    import trio
    from rich.text import Text
    from arena.store.lock import describe as describe_holder

    from arena.run.runner import run_tournament

    run_dir = store.run_dir
    console = output_console(stderr=args.json, keep_going=True)  # with --json, stdout holds the document alone
    if store.took_over:
        console.print(Text(f"note: the `arena run` that last played {run_dir} ({describe_holder(store.took_over)}) "
                           "ended without letting go of it; this run takes over."))
    if store.set_aside is not None:
        console.print(Text(f"The store that was in {run_dir} is set aside as {store.set_aside.name}."))
    counts = store.read.counts()
    kept, cut = counts.get("finished", 0), counts.get("truncated", 0)  # what a resume keeps (records.KEPT)
    if kept or cut:
        also = f", and {cut} truncated (played again, they would be cut again)" if cut else ""
        console.print(f"Resuming the run in {run_dir}: {kept} finished matches are kept{also}.")
    observer = _observer(args, console, scenario, store)
    try:
        with observer if hasattr(observer, "__enter__") else contextlib.nullcontext():
            result = trio.run(run_tournament, scenario, store, observer, args.concurrency, not args.no_cache,
                              args.limit, args.processes, _execution(args, scenario))
    except KeyboardInterrupt:
        console.print(f"Interrupted. Finished matches are kept in {run_dir}; run the same command to resume.")
        return 130
    for warning in result.warnings:  # said on stderr however quiet the output (a damaged cache)
        output_console(stderr=True).print(Text("warning: ", style="bold yellow") + Text(warning))
    lost = store.journal_lost()  # asked before the read-back, which saves what it can
    return _report_run(args, console, run_dir, store, result, store.saved(), lost)


def _execution(args: argparse.Namespace, scenario):
    """The scenario's execution block with --executor, --address and --workers over it (None: as the scenario says)."""
    from pydantic import ValidationError

    from arena.contract.errors import ConfigError, Problem
    from arena.run.scenario import Execution

    given = {field: value for field in ("executor", "address", "workers") if (value := getattr(args, field)) is not None}
    if not given:
        return None
    if args.processes is not None:
        raise ConfigError([Problem(("--processes",), "--processes N is the older spelling of --executor processes "
                                   "--workers N: give one of them")], "the command line")
    base = scenario.execution_settings()
    kept = base.model_dump(exclude_unset=True) if given.get("executor", base.executor) == base.executor else {}  # another executor: its own defaults
    try:
        return Execution.model_validate(kept | given)
    except ValidationError as exc:
        raise ConfigError.from_validation(exc, ("execution",), "the command line") from None


def _say_older_spellings(scenario, processes: int | None = None) -> None:
    """A note on stderr for each older spelling the scenario or the command line uses (``processes``:
    --processes), naming the one to write instead; the run goes on as the older one says."""
    notes = scenario.older_spellings()
    if processes is not None:
        new = "--executor local" if processes == 1 else f"--executor processes --workers {processes}"
        notes.append(f"--processes {processes} is the older spelling of {new}; it still works")
    for note in notes:
        print(f"note: {note}", file=sys.stderr)


def _overrides_hint(run_dir: Path, given: list[str]) -> str:
    """When a run was started with other --set overrides than these, which: they may be the difference."""
    from arena.contract import open_run
    try:
        store = open_run(run_dir)
        try:
            earlier = [s["overrides"] for s in store.sessions()]
        finally:
            store.close()
    except Exception:  # a store that cannot be read has its own message already
        return ""
    if not earlier or earlier[-1] == given:
        return ""
    flags = " ".join(f"--set {item}" for item in earlier[-1]) or "no --set"
    return f" It was last run with {flags}."


def _report_run(args: argparse.Namespace, console: Console, run_dir: Path, store: RunStore, result,
                saved: dict[str, str] | None, lost: bool) -> int:
    """The results and how the run ended, for a person; then, with --json, the summary on stdout. What
    is said to be finished is what a new reader finds in the store (``saved``), not what the run meant
    to write (None: it cannot be read); ``lost``: another program removed the store's journal while the run
    wrote to it."""
    unread = saved is None
    saved = saved or {}
    from arena.cli.tables import print_results
    if not args.json:
        print_results(console, store.read)
    failed = result.keys("failed")
    for key in failed:  # read back one by one: the run kept no record
        error = store.read.match(key).error or ""
        console.print(f"[red]match {key} failed:[/] {error.splitlines()[0] if error else ''}")
    finished = sum(saved.get(key) == "finished" for key in result.keys("finished"))
    truncated = sum(saved.get(key) == "truncated" for key in result.keys("truncated"))
    cut = f", {truncated} truncated at max_rounds" if truncated else ""
    replayed = f", {result.resumed} from the earlier run" if result.resumed else ""
    # of every match this session was to play: those the budget or an outage kept from starting count too
    total = len(result.statuses) + len(result.not_started) + len(result.unplayed)
    if unread:  # a count the store cannot confirm is not given
        console.print(f"{total} matches played; the store cannot be read back to count them. Run directory: {run_dir}")
    else:
        console.print(f"{finished} of {total} matches finished{cut}{replayed}. Run directory: {run_dir}")
    if result.beyond_limit:
        console.print(f"--limit {args.limit}: {result.beyond_limit} more matches are planned; run the same command "
                      "without --limit to play them.")
    status = _run_status(console, result, failed)
    missing = [key for key, done in result.statuses.items() if done in ("finished", "truncated", "failed")
               and saved.get(key) != done]
    if lost or missing:
        _error(_journal_problem(run_dir, len(missing), lost, unread))
        status = 2
    if args.json:
        stopped = ("outage" if result.outages else "budget" if result.not_started else
                   "limit" if result.beyond_limit else None)
        session = {"played": len(result.statuses) - result.resumed, "finished": finished, "failed": failed,
                   "interrupted": result.keys("interrupted"),
                   "not_started": result.not_started + result.unplayed, "resumed": result.resumed,
                   "beyond_limit": result.beyond_limit, "limit": args.limit, "overrides": args.overrides,
                   "stopped": stopped, "exit_status": status}
        from arena.cli.documents import run_document

        print_json(run_document(run_dir, store.read, session))
    return status


def _journal_problem(run_dir: Path, missing: int, lost: bool, unread: bool) -> str:
    from arena.store import STORE_FILE

    store = run_dir / STORE_FILE
    what = (f"{store}-wal, the store's journal, was removed by another program while this run wrote to it"
            if lost else f"{store} does not hold what this run wrote to it")
    if missing:
        found = "the store cannot be read back now" if unread else f"{missing} of the matches this run counted are not in it"
        return (f"{what}, and {found}; close every program "
                f"that has {store} open (`arena watch`, an sqlite3 shell), then run the same command again: it "
                "plays what is missing")
    return (f"{what}; every match was saved into {store} all the same, but programs that had it open may fail to "
            "read it (\"disk I/O error\") until they are closed: close them, then run the same command again to check "
            "(it replays nothing that is kept)")


def _run_status(console: Console, result, failed) -> int:
    from rich.text import Text
    if result.outages:
        for outage in result.outages:
            console.print(Text(f"Stopped: {outage}", style="red"))
        console.print(f"{result.count('interrupted')} matches were interrupted and {len(result.unplayed)} not started; nothing of "
                      "theirs was scored. Run the same command once the backend is back to play them.")
        return OUTAGE
    if result.not_started:
        console.print(f"[yellow]Stopped: {result.budget_note}; {len(result.not_started)} matches were not started. "
                      "Raise the budget and run the same command to go on.[/]")
        return 3
    return 1 if failed else 0


def _dry_run(scenario, limit: int | None = None, as_json: bool = False) -> int:
    from rich.table import Table

    from arena.results.usage import dollars
    from arena.run.dryrun import estimate

    console = output_console()
    found = estimate(scenario, limit)
    if as_json:
        print_json(found.model_dump())
        return 0
    table = Table(title=f"{scenario.name}: {found.matches} matches planned", title_justify="left")
    for column in ("Game entry", "Matches", "Model calls per match", "Prompt tokens per match", "Reply tokens per match"):
        table.add_column(column)
    for e in found.entries:
        more = f" (until_stable: up to {e.until_stable_cap})" if e.until_stable_cap else ""
        more = f" (adaptive: up to {e.adaptive.most})" if e.adaptive else more
        table.add_row(e.group, f"{e.matches}{more}", f"{e.calls_per_match:g}", str(e.prompt_tokens_per_match),
                      str(e.completion_tokens_per_match))
    console.print(table)
    for e in found.entries:
        if e.defaulted:
            console.print(f"[yellow]{e.group}: {e.defaulted} turns of the sample match had no valid example reply and "
                          "took the game's default, so a run may take another path than this estimate.[/]")
    for e in found.entries:
        if e.adaptive:
            a = e.adaptive
            cost = "" if a.cost is None else f", ${a.cost[0]:.4f} to ${a.cost[1]:.4f}"
            console.print(f"{e.group}: the adaptive schedule asks {e.matches} to {a.most} comparisons (its seed block to "
                          f"{'its budget' if a.limited_by == 'budget' else 'the full design'}): {a.calls[0]} to "
                          f"{a.calls[1]} calls{cost}, as it stops early or not.")
            if a.answers:  # live contestants: each answer asked once, when a comparison first needs it
                cost = "" if a.answer_cost is None else f", ${a.answer_cost[0]:.4f} to ${a.answer_cost[1]:.4f}"
                console.print(f"{e.group}: and its live contestants are asked {a.answers[0]} to {a.answers[1]} answers "
                              f"(the seed block's to every contestant on every question, each once): "
                              f"{a.answer_calls[0]} to {a.answer_calls[1]} calls{cost}.")
    if not found.agents:
        console.print("No agent calls a model: this scenario costs nothing.")
        return 0
    table = Table(title="estimate per agent (replies as long as the games' examples; cost (max): every reply at "
                  "max_tokens)", title_justify="left")
    for column in ("Agent", "Backend", "Model", "Calls", "Prompt tokens", "Reply tokens", "Cost", "Cost (max)"):
        named = column in ("Agent", "Backend", "Model")  # a long name folds onto a second line rather than lose its end
        table.add_column(column, justify="left" if named else "right", overflow="fold" if named else "ellipsis")
    for a in found.agents:
        table.add_row(a.agent, a.backend, a.model or "", str(a.calls), str(a.prompt_tokens), str(a.completion_tokens),
                      dollars(a.cost), dollars(a.cost_max))
    console.print(table)
    calls = sum(a.calls for a in found.agents)
    expected = sum(a.cost or 0.0 for a in found.agents)
    most = sum(a.cost_max or 0.0 for a in found.agents)
    tokens = (f"{sum(a.prompt_tokens for a in found.agents)} prompt tokens, about "
              f"{sum(a.completion_tokens for a in found.agents)} reply tokens "
              + (f"(at most {sum(a.completion_tokens_max for a in found.agents)})"
                 if all(a.completion_tokens_max is not None for a in found.agents) else "(no bound: a backend sets no max_tokens)"))
    priced = [a for a in found.agents if a.cost is not None]
    if not priced:
        spend = "cost unknown (no model has a known price: add them under `prices:`)"
    elif len(priced) < len(found.agents):
        spend = (f"about ${expected:.4f}, at most ${most:.4f} for the models with a known price; the others' cost is "
                 "unknown (add them under `prices:`)")
    else:
        spend = f"about ${expected:.4f}, at most ${most:.4f}"
    console.print(f"Total: {calls} calls, {tokens}; {spend}.")
    capped = sum(e.until_stable_cap or e.matches for e in found.entries)
    if capped > found.matches:  # until_stable may add blocks: scale to its cap
        factor = capped / found.matches
        cost = f", about ${expected * factor:.4f}, at most ${most * factor:.4f}" if priced else ""
        console.print(f"If until_stable runs to its cap ({capped} matches): about {round(calls * factor)} calls{cost}.")
    return 0


# -- other commands --------------------------------------------------------------------
def _validate(args: argparse.Namespace) -> int:
    from arena.run.tournament import count, growth_note, role_swap_note

    try:
        scenario = _load(args)
    except ConfigError as exc:
        if args.json:  # the problems for a script on stdout; the message for a person on stderr all the same
            from arena.cli.documents import problems_document

            print_json(problems_document(args.scenario, exc))
        raise
    _say_older_spellings(scenario)
    matches = count(scenario)  # counted, not built: a large plan is checked in no time
    room = args.limit is None or matches < args.limit  # whether until_stable's blocks may come after the first
    if args.limit is not None:
        matches = min(matches, args.limit)
    unstable = [e.name for e in scenario.games if room and not isinstance(scenario.tournament_for(e).repeats, int)]
    notes = [(f"games[{i}] ({entry.name})", note) for i, entry in enumerate(scenario.games)
             for note in (role_swap_note(scenario, entry), growth_note(scenario, entry)) if note]
    if args.json:
        from arena.cli.documents import validate_document

        print_json(validate_document(args.scenario, scenario, matches, unstable, notes, args.overrides, args.limit))
        return 0
    extra = f" (until_stable adds more for: {', '.join(unstable)})" if unstable else ""
    limited = f" (--limit {args.limit})" if args.limit is not None else ""
    print(f"{args.scenario}: ok — {len(scenario.agents)} agents, {len(scenario.games)} game entries, "
          f"{matches} matches{limited}{extra}")
    for where, note in notes:
        print(f"  {where}: {note}")
    return 0


def _fields(model) -> list[dict]:
    fields = []
    for field, info in model.model_fields.items():
        default = None if info.is_required() else info.get_default(call_default_factory=True)
        fields.append({"name": field, "type": _type_name(info.annotation), "default": default,
                       "required": info.is_required(), "description": info.description or ""})
    return fields


def _print_fields(console: Console, title: str, fields: list[dict]) -> None:
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for column in ("Parameter", "Type", "Default", "Meaning"):
        table.add_column(column)
    for p in fields:
        table.add_row(p["name"], p["type"], "required" if p["required"] else repr(p["default"]), p["description"])
    console.print(table)


def _games(args: argparse.Namespace) -> int:
    listing = []
    for name in plugins.names("game"):
        game = plugins.load("game", name)
        listing.append({"name": name, "description": game.description, "min_seats": game.min_seats,
                        "max_seats": game.max_seats, "referee": game.default_referee, "params": _fields(game.Params)})

    def title(game: dict) -> str:
        seats = f"{game['min_seats']}+" if game["max_seats"] is None else f"{game['min_seats']}–{game['max_seats']}"
        return f"{game['name']} — {game['description']} (seats {seats})"

    return _print_listing(args, listing, title)


def _print_listing(args: argparse.Namespace, listing: list[dict], title=lambda p: f"{p['name']} — {p['description']}") -> int:
    """Installed plugins with their parameters: JSON, or a table each."""

    if args.json:
        print(json.dumps(listing, indent=2, default=str))
        return 0
    console = table_console(args.plain, titled=True)
    for plugin in listing:
        _print_fields(console, title(plugin), plugin["params"])
    return 0


def _agents(args: argparse.Namespace) -> int:
    listing = []
    for name in plugins.names("agent backend"):
        backend = plugins.load("agent backend", name)
        doc = (backend.__module__ and __import__(backend.__module__, fromlist=["_"]).__doc__ or "").strip().splitlines()
        listing.append({"name": name, "description": doc[0] if doc else "", "calls_models": backend.makes_calls,
                        "params": [f for f in _fields(backend.Config) if f["name"] != "backend"]})
    return _print_listing(args, listing)


def _referees(args: argparse.Namespace) -> int:
    listing = []
    for name in plugins.names("referee"):
        referee = plugins.load("referee", name)
        listing.append({"name": name, "description": referee.description, "params": _fields(referee.Params)})
    return _print_listing(args, listing)


def _type_name(annotation) -> str:
    return getattr(annotation, "__name__", None) or str(annotation).replace("typing.", "")


def _runs(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    from arena.results.listing import run_rows

    rows = run_rows(args.output)
    if args.json:
        print_json([row.model_dump() for row in rows])
        return 0
    console = table_console(args.plain, titled=False)
    if not rows and not args.plain:
        console.print(f"No run directories under {args.output}.")
        return 0
    table = Table(title=f"runs under {args.output}", title_justify="left")
    for column in ("Run directory", "Scenario", "Status", "Finished", "Failed", "Planned", "Updated"):
        table.add_column(column)
    for row in rows:
        updated = row.updated.replace("T", " ")[:19] if row.updated else "—"
        if not row.readable:
            table.add_row(row.run_dir, "?", Text(row.status, style="red"), "", "", "", updated)
            continue
        also = [f"{n} {what}" for n, what in ((row.interrupted, "interrupted"), (row.truncated, "truncated")) if n]
        status = row.status + (f" ({', '.join(also)})" if also else "")
        name = (row.name or "?") + (f" (rescore of {row.rescored_from})" if row.rescored_from else "")
        table.add_row(row.run_dir, name, status, str(row.finished), str(row.failed), str(row.planned),
                      updated)
    console.print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    from rich.table import Table
    from rich.text import Text

    from arena.results.listing import match_rows
    from arena.contract import open_run
    from arena.store import StoreError

    store = open_run(args.run_dir)
    console = output_console()
    if args.match is None:
        if args.json:
            from arena.cli.documents import show_document

            print_json(show_document(args.run_dir, store))
            return 0
        console = table_console(args.plain, titled=False)
        from arena.results.listing import rescored_from

        source = rescored_from(store.run_info())
        if source:  # its seats' replies were replayed from there
            console.print(Text(f"a rescore of {source}"))
        for session in store.sessions():  # what the run's commands changed, before the matches they played
            changed = [f"--set {item}" for item in session["overrides"]]
            changed += [f"--limit {session['limit']}"] if session["limit"] is not None else []
            if changed:
                when = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(session["started"]))
                console.print(Text(f"run of {when} with {' '.join(changed)}"))
        table = Table(title=f"matches of {args.run_dir}", title_justify="left")
        for column in ("Key", "Status", "Seats", "Payoffs"):
            table.add_column(column)
        for row in match_rows(store.matches(), store.match_statuses()):
            seats = ", ".join(f"{s.label}={s.agent}" for s in row.seats)
            payoffs = ", ".join(f"{s}: {v:g}" for s, v in row.payoffs.items())
            if row.status == "interrupted" and row.error:  # why nothing was scored
                payoffs = row.error
            elif row.status == "truncated":  # scored where it stopped; the results leave it out
                payoffs += f" (stopped at max_rounds after {row.rounds} rounds; not in the results)"
            table.add_row(row.key, row.status, seats, Text(payoffs))
        console.print(table)
        from arena.cli.tables import print_stability

        print_stability(console, store)  # how many repeats each until_stable entry took, and what stopped it
        for note in store.notes():  # why an adaptive schedule chose no more matches than these
            if note["topic"] == "schedule":
                console.print(Text(f"note ({note['agent']}): {note['text']}"))  # as the run's tables print it
        return 0
    record = store.record(args.match)
    if record is None:
        keys = [k for k, _ in store.match_keys()]
        close = difflib.get_close_matches(args.match, keys, n=3, cutoff=0.3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise StoreError(f"no match {args.match!r} in {args.run_dir}{hint} (`arena show {args.run_dir}` lists them)")
    from arena.cli.transcript import print_transcript

    if args.json:
        print_json(record.model_dump(mode="json"))
        return 0
    print_transcript(console, record)
    return 0


def _export(args: argparse.Namespace) -> int:
    """Match by match, each written as it is read: the file of a big run is never held whole."""
    from arena.contract import open_run

    store = open_run(args.run_dir)
    try:
        if args.output is None:
            _write_export(store, args.format, sys.stdout)
            return 0
        with replacing(args.output) as partial:  # written whole or not at all: a failure keeps the old file
            with partial.open("w", encoding="utf-8", newline="") as out:
                _write_export(store, args.format, out)
    finally:
        store.close()
    return 0


def _write_export(store: RunReader, format: str, out) -> None:
    if format == "jsonl":
        for record in store.records(status=None):  # one record at a time, with its transcript
            out.write(record.model_dump_json() + "\n")
        return
    writer = csv.writer(out)
    writer.writerow(["match", "group", "repeat", "game", "status", "seed", "rounds", "seat", "role", "agent", "payoff"])
    for r in store.matches():  # the rows alone: no transcript is read
        for seat in r.seats:
            writer.writerow([r.key, r.group, r.repeat, r.game, r.status, r.seed, r.rounds, seat.label, seat.role,
                             seat.agent, r.payoffs.get(seat.label, "")])


def _rank_options(args: argparse.Namespace) -> dict:
    """The peer-rank options of `arena rank`, as ``arena.rank.leaderboard`` takes them."""
    from arena.rank.reviews import HUMAN, ReviewError

    from arena.rank import METHODS

    fixed = {}
    for item in args.weight:
        name, _, value = item.partition("=")
        try:
            fixed[name] = float(value)
        except ValueError:
            raise ReviewError(f"--weight {item!r}: expected REVIEWER=NUMBER") from None
    if args.bootstrap < 0:
        raise ReviewError(f"--bootstrap {args.bootstrap}: give 0 (no intervals) or more samples")
    if args.orderings < 1:
        raise ReviewError(f"--orderings {args.orderings}: Elo needs at least one ordering")
    return dict(methods=METHODS if args.method == "all" else (args.method,), reviewers=args.reviewers,
                weighted=args.weighted, fixed=fixed or None, reference=HUMAN if args.reference is None else args.reference, orderings=args.orderings,
                bootstrap=args.bootstrap, seed=args.seed, agreement_unit=args.agreement_unit,
                elo_scheme=args.elo_weights)


def _rank(args: argparse.Namespace) -> int:
    from arena.contract import StoreError  # the store's own (arena.store re-exports it), without the writer's modules

    if args.reviews is not None and args.run_dir is not None:
        raise StoreError("give a run directory, or --reviews FILE, not both")
    if args.reviews is not None:
        return _rank_reviews(args)  # a run's summaries and their modules are not loaded for a reviews file
    from arena.results.summary import peer_rank, rank_json
    from arena.contract import open_run
    from arena.cli.tables import print_left_out, print_panels, print_results, print_summaries

    if args.run_dir is None:
        raise StoreError("give a run directory, or --reviews FILE")
    options = _rank_options(args)
    store = open_run(args.run_dir)
    if args.json:
        print(json.dumps(rank_json(store, style_control=args.style_control, **options), indent=2))
        return 0
    console = table_console(args.plain, titled=True)
    if not store.counts().get("finished"):
        console.print(f"No finished matches in {args.run_dir} yet.")
        print_left_out(console, store)
        return 0
    print_results(console, store)
    print_summaries(console, store)
    print_panels(console, store)
    board = peer_rank(store, style_control=args.style_control, **options)
    if board is not None:
        from arena.cli.tables import print_leaderboard

        console.print("Peer rank from the run's reviews:")
        print_leaderboard(console, board)
    return 0


def _rank_reviews(args: argparse.Namespace) -> int:

    from arena.rank import leaderboard
    from arena.rank.reviews import Reviews
    from arena.rank.style import read_style_columns
    from arena.cli.tables import print_leaderboard

    options = _rank_options(args)
    reviews = Reviews.read_jsonl(args.reviews)
    styles = read_style_columns(args.reviews) if args.style_control else None
    board = leaderboard(reviews, styles=styles, **options)
    if args.json:
        print(board.model_dump_json(indent=2))
    else:
        print_leaderboard(table_console(args.plain, titled=True), board)
    return 0


def _annotate_export(args: argparse.Namespace) -> int:
    from arena.cli.annotate import export

    n, seed = export(args.run_dir, args.beta, args.output, args.seed)
    print(f"{args.output}: {n} verdicts to annotate (fill in human_verdict: 1, 2 or tie); "
          f"answers in an order drawn with seed {seed}")
    return 0


def _annotate_ask(args: argparse.Namespace) -> int:
    from arena.cli.annotate import ask

    n = ask(args.run_dir, args.beta, args.seed)
    print(f"\n{n} human verdicts now replace the judges' in {args.run_dir}")
    return 0


def _annotate_import(args: argparse.Namespace) -> int:
    from arena.cli.annotate import import_

    n = import_(args.run_dir, args.file)
    print(f"{n} human verdicts now replace the judges' in {args.run_dir}")
    return 0


def _import(args: argparse.Namespace) -> int:
    from arena.rank.faireval import read_faireval
    from arena.rank.prd import read_prd
    from arena.rank.reviews import ReviewError

    if args.format == "faireval":
        reviews, skipped = read_faireval(args.folder, args.contestants, args.order or "both")
    elif args.order is not None:
        raise ReviewError("--order chooses among FairEval.py's evaluations: it is for `arena import faireval`; "
                         "PRD's ratings are imported in the orders they were given")
    else:
        reviews, skipped = read_prd(args.folder, args.contestants)
    with replacing(args.output) as partial:
        reviews.write_jsonl(partial)
    print(f"{args.output}: {len(reviews)} reviews of {len(reviews.contestants)} contestants by "
          f"{len(reviews.reviewers)} reviewers ({', '.join(reviews.reviewers)})")
    for path in skipped:
        print(f"left out: {path}")
    return 0


def _watch(args: argparse.Namespace) -> int:

    from arena.contract import open_run

    from arena.cli.dashboard import watch_run

    open_run(args.run_dir).close()  # a folder that holds no run is refused at once
    console = output_console()
    return watch_run(args.run_dir, console, interval=args.interval, plain=args.plain or not console.is_terminal)

