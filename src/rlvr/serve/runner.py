"""Running ``rlvr serve``: its optional packages, the listening socket and uvicorn."""

from __future__ import annotations

import importlib.util
import socket

from rlvr.serve.app import create_app
from rlvr.serve.request_log import log_requests_to_stderr
from rlvr.serve.server import ModelServer


def missing_dependencies() -> list[str]:
    """The server's packages (the ``serve`` extra) that are not installed."""
    return [name for name in ("fastapi", "uvicorn", "prometheus_client")
            if importlib.util.find_spec(name) is None]


def bind_socket(host: str, port: int):
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` contains ``:``).

    Raises:
        OSError: the address is in use or cannot be bound (message names host and port).
    """
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise OSError(exc.errno, f"cannot listen on {host}:{port}: {exc.strerror or exc}") from exc
    sock.listen(128)
    sock.set_inheritable(True)
    return sock


def make_uvicorn_server(app, *, log_level: str = "info"):
    """A ``uvicorn.Server`` for ``app`` (run it with ``server.run(sockets=[sock])``)."""
    import uvicorn  # optional dependency: uvicorn (rlvr[serve]); see missing_dependencies()

    config = uvicorn.Config(app, log_level=log_level, access_log=log_level == "debug",
                            timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


def serve_forever(server: ModelServer, sock, *, log_level: str = "info") -> None:
    """Serve ``server`` on the bound socket ``sock`` until interrupted (Ctrl-C), one log line
    per request on stderr."""
    log_requests_to_stderr()
    make_uvicorn_server(create_app(server), log_level=log_level).run(sockets=[sock])

