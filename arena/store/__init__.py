"""The run store: one SQLite file per run directory, written as the run goes. It is read back through
the contract's reader (``arena.contract.open_run``; a writer's own is ``RunStore.read``)."""

from arena.contract.runs.opening import run_dirs
from arena.contract.runs.schema import SCENARIO_FILE, STORE_FILE
from arena.store.errors import DamagedStore, NoRunYet, NotAFolder, NotPermitted, OtherFormat, StoreError
from arena.store.writer import RunStore

__all__ = ["DamagedStore", "NoRunYet", "NotAFolder", "NotPermitted", "OtherFormat", "RunStore", "SCENARIO_FILE", "STORE_FILE", "StoreError",
           "run_dirs"]
