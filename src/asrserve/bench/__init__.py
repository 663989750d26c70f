"""`asrserve bench`: load generation, side-by-side policy runs and the offline limit."""
