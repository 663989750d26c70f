"""Inference on a node: replicas, the consumer, a job through the scheduler, the direct path."""
