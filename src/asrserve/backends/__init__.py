"""The state every node shares: the one place SQLite or Redis implementations are chosen."""
