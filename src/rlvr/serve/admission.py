"""Admission control of ``rlvr serve``: a fixed number of requests in flight, the rest refused
with 429 (not queued), so a client learns at once that it should back off."""

from __future__ import annotations

import threading

from rlvr.serve.errors import APIError


class Admission:
    """At most ``limit`` requests in flight; one more is refused, not queued.

    Raises:
        ValueError: ``limit`` < 1.
    """

    def __init__(self, limit: int):
        if limit < 1:
            raise ValueError(f"max_concurrency: expected an int >= 1, got {limit}")
        self.limit = limit
        self.in_flight = 0
        self._lock = threading.Lock()

    def enter(self) -> None:
        """Admit a request.

        Raises:
            APIError: 429 when ``limit`` requests are already in flight.
        """
        with self._lock:
            if self.in_flight >= self.limit:
                raise APIError(429, f"server busy: {self.in_flight} requests in flight "
                                    f"(max_concurrency {self.limit}); retry later",
                               type="rate_limit_error", code="server_busy")
            self.in_flight += 1

    def leave(self) -> None:
        """Release one admitted request."""
        with self._lock:
            self.in_flight -= 1
