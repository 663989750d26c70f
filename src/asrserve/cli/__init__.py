"""The ``asrserve`` commands: serve, worker, transcribe, keys, batch (and the tooling's)."""
