"""The `arena` command and what a person watches: one module per command family, the live views."""


def main(argv: list[str] | None = None) -> int:
    """``argv`` None: the program's own command line (the `arena` script, `python -m arena.cli`), which
    exits 130 on Ctrl-C at any moment, with no traceback, from here to its very end."""
    try:
        try:
            from arena.cli.commands import main as run  # imported on call: `arena --help` stays cheap

            return run(argv)
        finally:
            if argv is None:
                _quiet_to_the_end()
    except KeyboardInterrupt:  # while the command's modules load, or between its own handlers and here
        return 130


def _quiet_to_the_end() -> None:
    """The command is over; a Ctrl-C while Python shuts down ends the process as the command's own would.
    What the command made is left to the system: the collector's last passes at shutdown would walk every
    object numba, pyarrow and the rest made (0.6 s of CPU after `arena rank` on a million reviews)."""
    import gc
    import os
    import signal

    gc.freeze()

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:  # started in the background, it stays deaf to it
        signal.signal(signal.SIGINT, lambda *_: os._exit(130))
