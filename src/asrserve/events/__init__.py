"""Job events: progress, completion and cancel notices, in one process or between nodes."""

from asrserve.events.base import Finished, JobEvents

__all__ = ["Finished", "JobEvents"]
