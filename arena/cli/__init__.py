"""The `arena` command and what a person watches: one module per command family, the live views."""


def main(argv: list[str] | None = None) -> int:
    from arena.cli.commands import main as run  # imported on call: `arena --help` stays cheap

    return run(argv)
