"""`arena report` and `arena plot`: registered by arena.cli, kept here."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(sub) -> None:
    report = sub.add_parser("report", help="one self-contained HTML file: leaderboards, figures, every transcript")
    report.add_argument("run_dir", type=Path)
    report.add_argument("-o", "--output", type=Path, help="file to write (default: RUN_DIR/report.html)")
    report.set_defaults(handler=run_report)

    plot = sub.add_parser("plot", help="a figure of the report as a PNG image")
    plot.add_argument("run_dir", type=Path)
    plot.add_argument("--kind", choices=["heatmap", "trend", "weights"], required=True,
                      help="heatmap: pairwise win rates (or two-role payoffs); trend: Elo over battles (or running "
                           "mean payoffs); weights: reviewer weights of the weighted peer rank")
    plot.add_argument("-o", "--output", type=Path, help="file to write (default: RUN_DIR/KIND.png)")
    plot.set_defaults(handler=run_plot)


def _collect(run_dir: Path, transcripts: bool = True):
    from arena.report.data import collect
    from arena.store import RunStore

    store = RunStore.open(run_dir)
    try:
        return collect(store, transcripts)
    finally:
        store.close()


def run_report(args: argparse.Namespace) -> int:
    from arena.report.page import write

    output = args.output or args.run_dir / "report.html"
    report = _collect(args.run_dir)
    size = write(report, output)
    print(f"{output}: {len(report.transcripts['matches'])} matches, {size / 1e6:.1f} MB")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from arena.report.plot import plot
    from arena.store import StoreError

    output = args.output or args.run_dir / f"{args.kind}.png"
    report = _collect(args.run_dir, transcripts=False)
    try:
        panels = plot(report.summary["figures"], args.kind, output)
    except ValueError as exc:
        raise StoreError(f"{args.run_dir}: no {args.kind} figure: {exc}") from None
    print(f"{output}: {panels} panel{'s' if panels != 1 else ''}")
    return 0
