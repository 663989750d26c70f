"""Use cases: what the service does with jobs, batches, files and webhooks (no HTTP, no engine)."""
