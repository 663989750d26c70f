"""`asrserve tune`: record traffic, simulate the scheduler on it, recommend settings."""
