"""The deployment's nodes: the worker registry and the leader lease."""

from asrserve.cluster.base import Lease, WorkerRegistry

__all__ = ["Lease", "WorkerRegistry"]
