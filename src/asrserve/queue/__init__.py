"""The work queue between the API (producer) and the workers (consumers)."""

from asrserve.queue.base import Delivery, Queue

__all__ = ["Delivery", "Queue"]
