"""The HTTP API: validates, stores and enqueues; never runs the model."""
