"""API keys: who is calling, what they may see, how fast they may call."""
