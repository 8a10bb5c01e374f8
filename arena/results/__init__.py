"""The numbers of a run, read from the store's rows: payoffs with intervals, role tables,
metrics and usage, and the summary tables games declare of their own matches. The CLI and the
report show the same numbers from here."""
