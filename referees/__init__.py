"""Built-in referees."""
