"""The storage drivers' plumbing every store shares, under the stores: a SQLite database
whose statements run off the event loop (``sqlite.py``), a Redis client (``redis.py``) and
its documents (``redis_documents.py``), each translating its driver's errors into
``StoreUnavailable``; and the data dir's free space (``disk.py``). Which store runs on which
is chosen above the stores, in ``backends/backend.py``."""
