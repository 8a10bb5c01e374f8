"""`arena report` and `arena plot`: registered by arena.cli, kept here."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_commands(sub) -> None:
    report = sub.add_parser("report", help="one self-contained HTML file: leaderboards, figures, every transcript",
                            description="A run's report, or the report of reviews files (taken together, as one "
                                        "file): the leaderboards, heatmaps, reviewer weights, bias and agreement of "
                                        "`arena rank`.")
    report.add_argument("run_dir", type=Path, nargs="?", help="a run directory")
    report.add_argument("--reviews", type=Path, nargs="+", metavar="FILE",
                        help="JSONL files of review tuples instead of a run (several are read as one)")
    report.add_argument("-o", "--output", type=Path,
                        help="file to write (default: RUN-report.html in the current folder, RUN the run folder's name; "
                             "with --reviews, the first FILE with .html)")
    report.set_defaults(handler=run_report)

    plot = sub.add_parser("plot", help="a figure of the report as a PNG image")
    plot.add_argument("run_dir", type=Path)
    plot.add_argument("--kind", choices=["heatmap", "trend", "weights"], required=True,
                      help="heatmap: pairwise win rates (or two-role payoffs); trend: Elo over battles (or running "
                           "mean payoffs); weights: reviewer weights of the weighted peer rank")
    plot.add_argument("-o", "--output", type=Path,
                      help="file to write (default: RUN-KIND.png in the current folder, RUN the run folder's name)")
    plot.set_defaults(handler=run_plot)


def _beside_here(run_dir: Path, name: str) -> Path:
    """A reader's default output: in the current folder, named after the run (``RUN-report.html``), never
    inside the run folder, which only `arena run` writes to."""
    return Path(f"{run_dir.resolve().name}-{name}")


def _collect(run_dir: Path, transcripts: bool = True):
    from arena.report.data import collect
    from arena.contract import open_run

    store = open_run(run_dir)
    try:
        return collect(store, transcripts)
    finally:
        store.close()


def run_report(args: argparse.Namespace) -> int:
    from arena.store import StoreError

    if (args.run_dir is None) == (args.reviews is None):
        raise StoreError("give a run directory, or --reviews FILE [FILE ...], not both")
    if args.reviews is not None:
        from arena.report.data import collect_reviews
        from arena.report.page import write

        output = args.output or args.reviews[0].with_suffix(".html")
        report = collect_reviews(args.reviews)
        size = write(report, output)
        print(f"{output}: {report.summary['source']['reviews']} reviews from {len(args.reviews)} "
              f"file{'s' if len(args.reviews) != 1 else ''}, {size / 1e6:.1f} MB")
        return 0
    output = args.output or _beside_here(args.run_dir, "report.html")
    report = _collect(args.run_dir)  # its packing process starts before the page's modules are imported
    from arena.report.page import write

    size = write(report, output)
    print(f"{output}: {report.matches} matches, {size / 1e6:.1f} MB")
    return 0


def run_plot(args: argparse.Namespace) -> int:
    from arena.report.plot import plot
    from arena.store import StoreError

    output = args.output or _beside_here(args.run_dir, f"{args.kind}.png")
    report = _collect(args.run_dir, transcripts=False)
    try:
        panels = plot(report.summary["figures"], args.kind, output)
    except ValueError as exc:
        raise StoreError(f"{args.run_dir}: no {args.kind} figure: {exc}") from None
    print(f"{output}: {panels} panel{'s' if panels != 1 else ''}")
    return 0
