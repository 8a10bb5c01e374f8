"""The engine: the match loop (DeepEval's synchronous interaction), the message pool and the
anonymity filter. It loads games and referees through the contract's plugin registry."""
