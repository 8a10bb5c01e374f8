"""The run store: one SQLite file per run directory, written as the run goes, read back in rows."""

from arena.store.errors import DamagedStore, NoRunYet, NotAFolder, NotPermitted, OtherFormat, StoreError
from arena.store.writer import SCENARIO_FILE, STORE_FILE, RunStore, run_dirs

__all__ = ["DamagedStore", "NoRunYet", "NotAFolder", "NotPermitted", "OtherFormat", "RunStore", "SCENARIO_FILE", "STORE_FILE", "StoreError",
           "run_dirs"]
