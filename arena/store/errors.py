"""What can go wrong with a run directory: described with the store's tables in the contract
(``arena.contract.runs.schema``), where a reader of a run meets them too."""

from arena.contract.runs.schema import DamagedStore, NoRunYet, NotAFolder, NotPermitted, OtherFormat, StoreError

__all__ = ["DamagedStore", "NoRunYet", "NotAFolder", "NotPermitted", "OtherFormat", "StoreError"]
