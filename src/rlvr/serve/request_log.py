"""The request log of ``rlvr serve``: one line per HTTP request (method, path, status,
latency and, for completions, the tokens), written by an ASGI middleware on the ``rlvr.serve``
logger."""

from __future__ import annotations

import contextvars
import logging
import time

log = logging.getLogger("rlvr.serve")

# Per request, a dict the endpoint leaves the response's ``usage`` in for the request log: set
# by :class:`RequestLog` before the app runs; the endpoint's worker thread gets a copy of the
# context, so it sees (and fills) the same dict.
_REQUEST_USAGE: contextvars.ContextVar[dict | None] = contextvars.ContextVar(
    "rlvr_serve_usage", default=None)


def request_line(method: str, path: str, status: int, seconds: float,
                 usage: dict | None = None) -> str:
    """The log line of one request: ``POST /v1/completions 200 12.3 ms`` and, when the
    request generated, ``tokens 5 prompt + 8 completion``."""
    line = f"{method} {path} {status} {seconds * 1000:.1f} ms"
    if usage:
        line += (f" tokens {usage.get('prompt_tokens', 0)} prompt + "
                 f"{usage.get('completion_tokens', 0)} completion")
    return line


class RequestLog:
    """ASGI middleware: one :func:`request_line` per HTTP request, passed to ``write`` (default:
    the ``rlvr.serve`` logger at INFO) when the response is done (errors and 404s included;
    latency from the request's arrival). ``observe(path, status, seconds, usage)``, when
    given, is told the same (the server's metrics)."""

    def __init__(self, app, write=None, observe=None):
        self.app, self.write, self.observe = app, write or log.info, observe

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status, box, written = time.perf_counter(), [500], {}, [False]
        token = _REQUEST_USAGE.set(box)

        def write_once():
            if not written[0]:
                written[0] = True
                seconds = time.perf_counter() - start
                self.write(request_line(scope.get("method", "?"), scope.get("path", "?"),
                                        status[0], seconds, box.get("usage")))
                if self.observe is not None:
                    self.observe(scope.get("path", "?"), status[0], seconds, box.get("usage"))

        async def send_status(message):
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                # Logged before the last byte leaves, so a client that has its response can
                # already read the line (and a log shipper never misses a finished request).
                write_once()
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            _REQUEST_USAGE.reset(token)
            write_once()


def record_usage(response: dict) -> dict:
    """``response``, its ``usage`` left for :class:`RequestLog`'s line (the endpoint calls it
    on what it returns)."""
    box = _REQUEST_USAGE.get()
    if box is not None:
        box["usage"] = response.get("usage")
    return response


def log_requests_to_stderr() -> None:
    """Print the ``rlvr.serve`` logger's INFO lines (the request log) on stderr, in uvicorn's
    style (``INFO:     POST /v1/completions 200 12.3 ms ...``); once per process."""
    if any(getattr(h, "rlvr_serve", False) for h in log.handlers):
        return
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
    handler.rlvr_serve = True
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False

