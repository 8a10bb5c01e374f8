"""The numbers of a run, read from the store's rows: payoffs with intervals, role tables,
metrics and usage, and the judging games against their labels (discussion, verdicts,
dimensions). The CLI and the report show the same numbers from here."""
