"""Reports of a run: one self-contained HTML page (``arena report``) and its figures as images
(``arena plot``), both drawn from the numbers ``arena rank`` computes."""

from .data import ReportData, collect

__all__ = ["ReportData", "collect"]
