"""Prometheus metrics of ``rlvr serve`` (``GET /metrics``, the text format of
``prometheus-client``), named after vLLM's where they mean the same:

- ``rlvr_serve_requests_total{endpoint, status}``: answered requests (``endpoint``: one of
  :data:`ROUTES`, or ``other``);
- ``rlvr_serve_prompt_tokens_total``, ``rlvr_serve_generation_tokens_total``: tokens;
- ``rlvr_serve_num_requests_running``, ``rlvr_serve_num_requests_waiting``: admitted and
  queued requests (:class:`rlvr.serve.admission.Admission`);
- ``rlvr_serve_e2e_request_latency_seconds``, ``rlvr_serve_time_to_first_token_seconds``,
  ``rlvr_serve_queue_time_seconds``: histograms (seconds);
- ``rlvr_serve_requests_cancelled_total``: requests whose client went away.

Each server has its own registry, so several servers in one process (tests) do not clash.
"""

from __future__ import annotations

from collections.abc import Callable

# the routes counted by name; any other path is counted as "other" (bounded label values)
ROUTES = ("/v1/completions", "/v1/chat/completions", "/v1/models", "/health", "/version",
          "/metrics", "/tokenize", "/detokenize", "/tokenizer_info")
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    120.0, 300.0)


class Metrics:
    """The server's collectors.

    Args:
        running: ``() -> int``, requests admitted now.
        waiting: ``() -> int``, requests queued now.

    Raises:
        ImportError: ``prometheus-client`` is not installed (``pip install 'rlvr[serve]'``).
    """

    def __init__(self, running: Callable[[], int], waiting: Callable[[], int]):
        # optional dependency: prometheus-client (rlvr[serve])
        from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram

        self.registry = CollectorRegistry()
        r = self.registry
        self.requests = Counter("rlvr_serve_requests", "Answered requests.",
                                ["endpoint", "status"], registry=r)
        self.prompt_tokens = Counter("rlvr_serve_prompt_tokens", "Prompt tokens processed.",
                                     registry=r)
        self.generation_tokens = Counter("rlvr_serve_generation_tokens",
                                         "Completion tokens generated.", registry=r)
        self.cancelled = Counter("rlvr_serve_requests_cancelled",
                                 "Requests whose client went away before the answer.",
                                 registry=r)
        Gauge("rlvr_serve_num_requests_running", "Requests admitted (generating or about to).",
              registry=r).set_function(running)
        Gauge("rlvr_serve_num_requests_waiting", "Requests waiting in the admission queue.",
              registry=r).set_function(waiting)
        self.latency = Histogram("rlvr_serve_e2e_request_latency_seconds",
                                 "Seconds from a request's arrival to its last byte.",
                                 ["endpoint"], buckets=_LATENCY_BUCKETS, registry=r)
        self.first_token = Histogram("rlvr_serve_time_to_first_token_seconds",
                                     "Seconds from admission to the first sampled token.",
                                     buckets=_LATENCY_BUCKETS, registry=r)
        self.queue_time = Histogram("rlvr_serve_queue_time_seconds",
                                    "Seconds a request waited for admission.",
                                    buckets=_LATENCY_BUCKETS, registry=r)

    def observe(self, endpoint: str, status: int, seconds: float,
                usage: dict | None = None) -> None:
        """Count one answered request (and its tokens, from ``usage``); ``endpoint`` is its
        path (one not in :data:`ROUTES` is counted as ``other``)."""
        endpoint = endpoint if endpoint in ROUTES else "other"
        self.requests.labels(endpoint=endpoint, status=str(status)).inc()
        self.latency.labels(endpoint=endpoint).observe(seconds)
        if usage:
            self.prompt_tokens.inc(usage.get("prompt_tokens", 0))
            self.generation_tokens.inc(usage.get("completion_tokens", 0))

    def text(self) -> tuple[bytes, str]:
        """The exposition: ``(body, content type)``."""
        from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

        return generate_latest(self.registry), CONTENT_TYPE_LATEST
