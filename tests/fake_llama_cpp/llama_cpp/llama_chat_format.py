"""No chat formatter: every layout is taken to keep its system messages."""
