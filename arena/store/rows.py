"""The rows a run store is read back in: described with the store's tables in the contract
(``arena.contract.runs.schema``), named here too for the store's own modules."""

from arena.contract.runs.schema import (EventRow, MatchRow, MessageRow, ScoreRow, StoredTranscript, Transcript,
                                        TurnRow)

__all__ = ["EventRow", "MatchRow", "MessageRow", "ScoreRow", "StoredTranscript", "Transcript", "TurnRow"]
