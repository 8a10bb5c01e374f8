"""What can go wrong with a run directory, worded for the person who typed the command."""

from __future__ import annotations

from pathlib import Path

from arena.contract.errors import ArenaError


class StoreError(ArenaError):
    """The run directory cannot be used as asked; the message says what to do."""


class DamagedStore(StoreError):
    """A store file that SQLite cannot read: cut short, overwritten, or not a database at all."""

    def __init__(self, path: Path, reason: str):
        self.path = path
        self.reason = reason
        super().__init__(
            f"{path} is damaged ({reason}) and cannot be read; restore it from a copy, or run `arena run` "
            f"on it with --force-new, which sets it aside as {path.name}.damaged-<time> and starts the run afresh"
        )


class NoRunYet(StoreError):
    """A store file with nothing in it: left by a version that made the store in place, stopped as it began."""

    def __init__(self, path: Path):
        self.path = path
        super().__init__(f"{path.parent} holds no run yet ({path.name} was left empty by a run stopped as it "
                         "started); `arena run` starts the run afresh in it")


class OtherFormat(StoreError):
    """A store written by a version of Arena whose format this one does not read."""

    def __init__(self, path: Path, version: int, current: int):
        self.path = path
        self.version = version
        super().__init__(
            f"{path} was written by another version of Arena (store format {version}, this one reads "
            f"{current}); export it with that version, or start a new run in another directory"
        )


class NotAFolder(StoreError):
    """A file where a run directory was asked for: most often the scenario file."""

    def __init__(self, path: Path):
        self.path = path
        scenario = path.suffix.lower() in (".yaml", ".yml")
        hint = f"; to play that scenario: `arena run {path}`" if scenario else ""
        super().__init__(f"{path} is a file, not a folder: give the run directory, the folder `arena run` made "
                         f"(`arena runs` lists them){hint}")


class NotPermitted(StoreError):
    """A run directory or store this user may not enter, read or write: not damaged, and left as it was."""

    def __init__(self, path: Path, doing: str = "read", advice: str = ""):
        self.path = path
        advice = advice or "run the command as a user who may, or ask its owner to grant access"
        super().__init__(f"{path}: not permitted: this user may not {doing} it (it is not damaged, and nothing was "
                         f"changed); {advice}")
