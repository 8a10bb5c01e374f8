"""Services a run lends the agents that call models, given to them when they are built:
the response cache, the call log and the limits per endpoint."""
