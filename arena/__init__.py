"""Arena: evaluate language models by making them interact."""

__version__ = "0.1.0"
