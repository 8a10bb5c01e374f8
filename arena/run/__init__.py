"""A run: the scenario file, the tournament's plan, the runner that plays it (resuming what a
crash left), stableness, and the dry run."""
