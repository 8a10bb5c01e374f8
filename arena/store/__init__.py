"""The run store: one SQLite file per run directory, written as the run goes, read back in rows."""

from arena.store.writer import SCENARIO_FILE, STORE_FILE, RunStore, StoreError, run_dirs

__all__ = ["RunStore", "SCENARIO_FILE", "STORE_FILE", "StoreError", "run_dirs"]
