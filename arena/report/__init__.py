"""Reports of a run: one self-contained HTML page (``arena report``) and its figures as images
(``arena plot``), both drawn from the numbers ``arena rank`` computes. Nothing is imported here:
the process that packs transcripts (``packing``) loads only what it needs."""
