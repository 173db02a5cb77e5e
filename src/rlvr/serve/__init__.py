"""``rlvr serve``: an OpenAI-compatible HTTP server over any local model or checkpoint.

Endpoints (FastAPI, served by uvicorn):

- ``GET /v1/models``: the one served model (its id is the name it was loaded from, or the
  ``--served-model-name``).
- ``POST /v1/completions``: ``prompt`` (a string or a list of strings) continued as is.
- ``POST /v1/chat/completions``: ``messages`` rendered with the tokenizer's chat template
  (generation prompt appended), as the trainer renders its prompts.

Sampling fields: ``n`` (1..128), ``temperature`` (>= 0; 0 is greedy), ``top_p`` (0, 1],
``top_k`` (vLLM's extension; 0 or -1 disables it), ``max_tokens`` (default 256, or what the
context leaves after the prompt; prompt + max_tokens must fit the model's context), ``stop``
(a string or up to 4 strings; the text is cut before the first one), ``seed`` (same seed,
same request -> same text). ``model`` is optional; when given it must equal the served id
(else 404). Unknown fields are ignored; OpenAI fields that would change the output but are not
implemented (``echo``, ``logit_bias``, penalties, ``tools``, ``response_format`` other than
text, ``best_of``, ``suffix``) are refused (400) rather than silently ignored.

``stream: true`` answers with server-sent events as the OpenAI SDK reads them
(:mod:`rlvr.serve.stream`; ``stream_options.include_usage`` adds a usage chunk). Log-probs
(:mod:`rlvr.serve.logprobs`): chat ``logprobs: true`` + ``top_logprobs: k``, completions
``logprobs: k`` (k <= 20), the engine's own, under the raw model distribution by default
(``--logprobs-mode tempered``: at the sampling temperature, as the trainer uses them). vLLM's
``return_tokens_as_token_ids`` (log-prob tokens as ``"token_id:<id>"``) and
``return_token_ids`` (``prompt_token_ids`` and each choice's ``token_ids``) let an agent loop
hand its trajectories back for training with the exact tokens and log-probs.

Responses carry OpenAI's ``usage``: ``prompt_tokens`` (each prompt counted once),
``completion_tokens`` (all choices; a stop token the model emitted counts, text cut by a
``stop`` string counts up to the token that completed it) and ``total_tokens``. Errors are
OpenAI-style JSON ``{"error": {"message", "type", "param", "code"}}``: 400 for bad fields
(``param`` names the field), 404 unknown model or route, 429 when ``max_concurrency`` requests
are already in flight, 500 for a failure inside the server.

Every request is logged as one line (logger ``rlvr.serve``, INFO; ``rlvr serve`` prints them
on stderr): method, path, status, latency and, for completions, the tokens, e.g.
``POST /v1/chat/completions 200 153.2 ms tokens 21 prompt + 8 completion``.

Generation runs through a rollout engine, one request at a time (:mod:`rlvr.serve.server`).

Modules:

- :mod:`rlvr.serve.schemas`: request bodies and :class:`Choice`.
- :mod:`rlvr.serve.responses`: whole response bodies.
- :mod:`rlvr.serve.logprobs`: log-probs in OpenAI's chat and completions shapes.
- :mod:`rlvr.serve.stream`: streamed responses (server-sent events).
- :mod:`rlvr.serve.errors`: :class:`APIError` and the 400s made from bad fields.
- :mod:`rlvr.serve.admission`: at most ``max_concurrency`` requests in flight (429 beyond).
- :mod:`rlvr.serve.server`: :class:`ModelServer`, a model + tokenizer + engine.
- :mod:`rlvr.serve.request_log`: the one-line-per-request log middleware.
- :mod:`rlvr.serve.app`: the FastAPI application.
- :mod:`rlvr.serve.runner`: socket, uvicorn, ``serve_forever``.

Models and checkpoints (LoRA adapters merged) are loaded by
:func:`rlvr.models.inference.load_for_inference`.
"""

from rlvr.serve.admission import Admission
from rlvr.serve.app import create_app
from rlvr.serve.errors import APIError, bad_field, validation_error
from rlvr.serve.request_log import RequestLog, log_requests_to_stderr, request_line
from rlvr.serve.runner import bind_socket, make_uvicorn_server, missing_dependencies, serve_forever
from rlvr.serve.logprobs import TokenNames, chat_logprobs, completion_logprobs
from rlvr.serve.responses import Rendering, chat_response, completion_response
from rlvr.serve.schemas import (MAX_TOP_LOGPROBS, REFUSED_FIELDS, ChatMessage, ChatRequest,
                                Choice, CompletionRequest, TextPart, stop_strings)
from rlvr.serve.server import DEFAULT_MAX_TOKENS, ENGINES, LOGPROBS_MODES, ModelServer
from rlvr.serve.stream import event_stream

__all__ = [
    "APIError",
    "Admission",
    "ChatMessage",
    "ChatRequest",
    "Choice",
    "CompletionRequest",
    "DEFAULT_MAX_TOKENS",
    "ENGINES",
    "LOGPROBS_MODES",
    "MAX_TOP_LOGPROBS",
    "ModelServer",
    "REFUSED_FIELDS",
    "Rendering",
    "RequestLog",
    "TextPart",
    "TokenNames",
    "bad_field",
    "bind_socket",
    "chat_logprobs",
    "chat_response",
    "completion_logprobs",
    "completion_response",
    "create_app",
    "event_stream",
    "log_requests_to_stderr",
    "make_uvicorn_server",
    "missing_dependencies",
    "request_line",
    "serve_forever",
    "stop_strings",
    "validation_error",
]
