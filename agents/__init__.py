"""Built-in agent backends and scripted strategies."""
