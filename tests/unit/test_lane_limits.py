"""A lane's claims by priority (consumer.py): async jobs never hold every slot an
interactive request needs (#25: one tenant's async flood made another's sync requests wait
for its jobs to finish)."""

from __future__ import annotations

from asrserve.inference.consumer import Lane, _limits
from asrserve.inference.priority_pool import PriorityPool
from asrserve.vocabulary import Priority

INTERACTIVE, ASYNC = Priority.INTERACTIVE, Priority.ASYNC


def test_async_jobs_leave_a_quarter_of_the_lane_to_interactive_ones() -> None:
    with PriorityPool(1) as pool:
        lane = Lane((INTERACTIVE, ASYNC), 32, pool)
        assert _limits(lane, 32) == {INTERACTIVE: 32, ASYNC: 24}
        lane.held[ASYNC], lane.in_flight = 24, 24
        assert _limits(lane, 8) == {INTERACTIVE: 8, ASYNC: 0}
        lane.held[INTERACTIVE] = 8
        lane.held[ASYNC], lane.in_flight = 20, 28  # four async jobs ended: replaced, no more
        assert _limits(lane, 4) == {INTERACTIVE: 4, ASYNC: 4}
        offline = Lane((Priority.OFFLINE,), 2, pool)
        assert _limits(offline, 2) == {Priority.OFFLINE: 2}
        one = Lane((INTERACTIVE, ASYNC), 1, pool)  # ASRSERVE_PREFETCH_JOBS=1: no reserve
        assert _limits(one, 1) == {INTERACTIVE: 1, ASYNC: 1}
