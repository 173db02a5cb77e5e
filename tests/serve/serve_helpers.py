"""Helpers of the serve tests: the real app run by uvicorn in a thread, a tiny stdlib HTTP
server that answers from a script (for retries, timeouts and the concurrency limit) and canned
chat responses."""

from __future__ import annotations

import json
import threading
import time
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from rlvr.serve import ModelServer, bind_socket, create_app, make_uvicorn_server


@contextmanager
def running(server: ModelServer):
    """Serve ``server`` on 127.0.0.1:<free port> in a thread; yields the base URL."""
    sock = bind_socket("127.0.0.1", 0)
    port = sock.getsockname()[1]
    uv = make_uvicorn_server(create_app(server), log_level="warning")
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not uv.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        uv.should_exit = True
        thread.join(10)
        sock.close()


def chat_body(texts: list[str], completion_tokens: int | None) -> dict:
    """A minimal valid chat.completion response holding ``texts``."""
    body = {"object": "chat.completion", "model": "fake",
            "choices": [{"index": i, "message": {"role": "assistant", "content": t},
                         "finish_reason": "stop"} for i, t in enumerate(texts)]}
    if completion_tokens is not None:
        body["usage"] = {"prompt_tokens": 1, "completion_tokens": completion_tokens,
                         "total_tokens": 1 + completion_tokens}
    return body


class ScriptedServer:
    """A stdlib HTTP server answering POSTs from ``script``: a list of
    ``(status, json_body, delay_seconds)``, one per request in order (the last one repeats).
    Records every request body and the most requests it was handling at once."""

    def __init__(self, script: list[tuple[int, dict, float]]):
        self.script = script
        self.requests: list[dict] = []
        self.in_flight = 0
        self.max_in_flight = 0
        self._lock = threading.Lock()
        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self._httpd.daemon_threads = True
        self._httpd.block_on_close = False
        self._thread = threading.Thread(target=self._httpd.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        """Base URL of the server."""
        return f"http://127.0.0.1:{self._httpd.server_address[1]}"

    def __enter__(self) -> ScriptedServer:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()

    def _next(self, body: dict) -> tuple[int, dict, float]:
        with self._lock:
            self.requests.append(body)
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return self.script[min(len(self.requests) - 1, len(self.script) - 1)]

    def _done(self) -> None:
        with self._lock:
            self.in_flight -= 1

    def _handler(self):
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                length = int(self.headers.get("Content-Length", 0))
                status, body, delay = owner._next(json.loads(self.rfile.read(length)))
                done = False
                try:
                    time.sleep(delay)
                    data = json.dumps(body).encode()
                    # out of flight before the client can see the answer: a client that sends
                    # its next request on receipt must not be counted twice (a race under load)
                    owner._done()
                    done = True
                    self.send_response(status)
                    self.send_header("Content-Type", "application/json")
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass  # the client gave up (timeout test)
                finally:
                    if not done:
                        owner._done()

            def log_message(self, *args):
                pass

        return Handler
