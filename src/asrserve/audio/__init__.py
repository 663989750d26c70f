"""Audio intake: probe, decode, chunk and featurize, all off the event loop."""
