"""USD per million tokens (prompt, completion) for some well-known models.

Prices change: these are the providers' published list prices when this file
was written. Extend or override them with `prices:` in a scenario; a model
that matches nothing here has an unknown cost (its tokens are still counted).
"""

from __future__ import annotations

# Matched by exact name first, then by the longest prefix (so dated snapshots match their family).
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4-turbo": (10.00, 30.00),
    "gpt-4": (30.00, 60.00),
    "gpt-3.5-turbo": (0.50, 1.50),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "claude-3-haiku": (0.25, 1.25),
    "claude-3-5-haiku": (0.80, 4.00),
    "claude-3-5-sonnet": (3.00, 15.00),
    "claude-3-7-sonnet": (3.00, 15.00),
    "claude-sonnet-4": (3.00, 15.00),
    "claude-3-opus": (15.00, 75.00),
    "claude-opus-4": (15.00, 75.00),
}


def price_of(model: str, table: dict[str, tuple[float, float]]) -> tuple[float, float] | None:
    if model in table:
        return table[model]
    matches = [prefix for prefix in table if model.startswith(prefix)]
    return table[max(matches, key=len)] if matches else None


def cost(model: str, prompt_tokens: int | None, completion_tokens: int | None, table: dict[str, tuple[float, float]]) -> float | None:
    price = price_of(model, table)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
