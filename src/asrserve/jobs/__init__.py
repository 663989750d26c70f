"""Durable jobs: the model and the stores that keep it."""
