"""Job audio between the node that received it and the one that runs it."""

from asrserve.blobs.base import Blobs

__all__ = ["Blobs"]
