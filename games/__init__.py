"""Built-in games."""
