"""Admission control of ``rlvr serve``: at most ``limit`` requests generate at once; the
next ones wait in a bounded first-in-first-out queue, and only a request finding the queue
full is refused (429), so a client learns at once that it should back off. A request whose
client goes away while it waits leaves the queue."""

from __future__ import annotations

import asyncio
from collections import deque

from rlvr.serve.errors import APIError


class Admission:
    """``limit`` requests in flight, ``queue`` more waiting (used from the event loop only).

    Args:
        limit: requests admitted at once, >= 1.
        queue: requests waiting at most, >= 0.

    Raises:
        ValueError: ``limit`` < 1 or ``queue`` < 0.
    """

    def __init__(self, limit: int, queue: int = 1024):
        if limit < 1:
            raise ValueError(f"max_concurrency: expected an int >= 1, got {limit}")
        if queue < 0:
            raise ValueError(f"max_queue: expected an int >= 0, got {queue}")
        self.limit, self.queue = limit, queue
        self.in_flight = 0
        self._waiting: deque[asyncio.Future] = deque()

    @property
    def waiting(self) -> int:
        """Requests in the queue."""
        return len(self._waiting)

    async def enter(self) -> None:
        """Wait for a slot (first come, first served).

        Raises:
            APIError: 429 when the queue is full.
            asyncio.CancelledError: cancelled while waiting (it leaves the queue).
        """
        if self.in_flight < self.limit and not self._waiting:
            self.in_flight += 1
            return
        if len(self._waiting) >= self.queue:
            raise APIError(429, f"server busy: {self.in_flight} requests in flight and "
                                f"{len(self._waiting)} queued (max_queue {self.queue}); "
                                f"retry later", type="rate_limit_error", code="server_busy")
        ticket = asyncio.get_running_loop().create_future()
        self._waiting.append(ticket)
        try:
            await ticket  # leave() hands its slot over: in_flight is not decremented
        except asyncio.CancelledError:
            if ticket in self._waiting:
                self._waiting.remove(ticket)
            elif ticket.done() and not ticket.cancelled():
                self.leave()  # admitted just as it was cancelled: pass the slot on
            raise

    def leave(self) -> None:
        """Release a slot: the first waiting request takes it."""
        while self._waiting:
            ticket = self._waiting.popleft()
            if not ticket.done():
                ticket.set_result(None)
                return
        self.in_flight -= 1
