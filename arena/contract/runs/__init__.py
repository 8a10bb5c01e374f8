"""Reading a run: ``open_run(path)`` gives a read-only, streaming ``RunReader`` of a run's store.

``schema`` describes the store (its file, format, tables, the rows it is read back in and the
errors of opening one); ``opening`` opens one read-only; ``reader`` reads it.
"""

from arena.contract.runs.reader import RunReader, open_run
from arena.contract.runs.schema import (SCENARIO_FILE, STORE_FILE, DamagedStore, EventRow, MatchRow, MessageRow,
                                        NoRunYet, NotAFolder, NotPermitted, OtherFormat, ScoreRow,
                                        StoredTranscript, StoreError, Transcript, TurnRow)

__all__ = ["DamagedStore", "EventRow", "MatchRow", "MessageRow", "NoRunYet", "NotAFolder", "NotPermitted",
           "OtherFormat", "RunReader", "SCENARIO_FILE", "STORE_FILE", "ScoreRow", "StoreError", "StoredTranscript",
           "Transcript", "TurnRow", "open_run"]
