"""``rlvr serve``: an OpenAI-compatible HTTP server over any local model or checkpoint, a
drop-in for vLLM's OpenAI server for clients such as the OpenAI SDK and
lm-evaluation-harness.

Endpoints (FastAPI, served by uvicorn):

- ``GET /v1/models``: the one served model (its id is the name it was loaded from, or the
  ``--served-model-name``).
- ``POST /v1/completions``: ``prompt`` (a string, a list of strings, a list of token ids or a
  list of such lists) continued as is; ``echo`` (with ``logprobs``: the prompt tokens'
  log-probs, the first None).
- ``POST /v1/chat/completions``: ``messages`` rendered with the tokenizer's chat template
  (``add_generation_prompt``, ``continue_final_message``, ``chat_template_kwargs``).
- ``GET /health``, ``GET /version``, ``GET /metrics`` (Prometheus), ``POST /tokenize``,
  ``POST /detokenize``, ``GET /tokenizer_info`` (:mod:`rlvr.serve.utility_routes`).

Sampling fields (OpenAI's and vLLM's): ``n``, ``temperature``, ``top_p``, ``top_k``,
``min_p``, ``max_tokens`` / ``max_completion_tokens`` (the latter wins), ``min_tokens``,
``stop`` (any number of strings), ``stop_token_ids``, ``include_stop_str_in_output``,
``ignore_eos``, ``seed`` (int64), ``repetition_penalty``, ``presence_penalty``,
``frequency_penalty``, ``logit_bias``, ``allowed_token_ids``, ``bad_words``,
``skip_special_tokens``, ``truncate_prompt_tokens``, ``add_special_tokens``,
``prompt_logprobs`` (:mod:`rlvr.serve.logits_rules`, :mod:`rlvr.serve.decoding`). Fields
that would change the output but are not implemented (guided decoding / structured outputs,
``response_format`` other than text, tools and legacy functions, beam search, ``best_of``,
``suffix``) are refused (400 naming the field); fields no endpoint declares are refused too,
unless the server ignores them (``--ignore-unknown-fields``: a warning is logged).

``stream: true`` answers with server-sent events, sent as the engine samples each token
(:mod:`rlvr.serve.stream`; ``stream_options.include_usage`` adds a usage chunk). Log-probs
(:mod:`rlvr.serve.logprobs`): chat ``logprobs: true`` + ``top_logprobs: k``, completions
``logprobs: k`` (k <= 20), under the raw model distribution by default (``--logprobs-mode
tempered``: at the sampling temperature, as the trainer uses them). vLLM's
``return_tokens_as_token_ids`` and ``return_token_ids`` let an agent loop hand its
trajectories back for training with the exact tokens and log-probs. Each choice carries
vLLM's ``stop_reason`` (the stop string or stop token id that ended it, else null).

Responses carry OpenAI's ``usage``. Errors are OpenAI-style JSON ``{"error": {"message",
"type", "param", "code"}}``: 400 for bad fields (``param`` names the field), 404 unknown
model or route, 429 when the admission queue is full, 500 for a failure inside the server.

Requests are admitted ``max_concurrency`` at a time and generate one after another; the rest
wait in a bounded queue (``--max-queue``) (:mod:`rlvr.serve.admission`). A client that
disconnects leaves the queue, or stops its generation at the next decode step.

Every request is logged as one line (logger ``rlvr.serve``, INFO; ``rlvr serve`` prints them
on stderr): method, path, status, latency and, for completions, the tokens, e.g.
``POST /v1/chat/completions 200 153.2 ms tokens 21 prompt + 8 completion``.

Modules:

- :mod:`rlvr.serve.schemas`: request bodies and :class:`Choice`.
- :mod:`rlvr.serve.logits_rules`: penalties, biases, banned / allowed tokens, ``min_p``.
- :mod:`rlvr.serve.decoding`: one request's decode hooks (streaming, stop strings).
- :mod:`rlvr.serve.prompt_scores`: the prompt's own log-probs.
- :mod:`rlvr.serve.responses`: whole response bodies.
- :mod:`rlvr.serve.logprobs`: log-probs in OpenAI's chat and completions shapes.
- :mod:`rlvr.serve.stream`: streamed responses (server-sent events).
- :mod:`rlvr.serve.errors`: :class:`APIError` and the 400s made from bad fields.
- :mod:`rlvr.serve.admission`: the admission queue.
- :mod:`rlvr.serve.metrics`: Prometheus metrics.
- :mod:`rlvr.serve.server`: :class:`ModelServer`, a model + tokenizer + engine.
- :mod:`rlvr.serve.request_log`: the one-line-per-request log middleware.
- :mod:`rlvr.serve.utility_routes`: health, version, metrics, tokenizer routes.
- :mod:`rlvr.serve.app`: the FastAPI application.
- :mod:`rlvr.serve.runner`: socket, uvicorn, ``serve_forever``.

Models and checkpoints (LoRA adapters merged) are loaded by
:func:`rlvr.models.inference.load_for_inference`.
"""

from rlvr.serve.admission import Admission
from rlvr.serve.app import create_app
from rlvr.serve.decoding import RequestRun
from rlvr.serve.errors import APIError, bad_field, validation_error
from rlvr.serve.logits_rules import LogitsRules
from rlvr.serve.logprobs import TokenNames, chat_logprobs, completion_logprobs
from rlvr.serve.request_log import RequestLog, log_requests_to_stderr, request_line
from rlvr.serve.responses import Rendering, chat_response, completion_response
from rlvr.serve.runner import bind_socket, make_uvicorn_server, missing_dependencies, serve_forever
from rlvr.serve.schemas import (
    MAX_TOP_LOGPROBS,
    REFUSED_FIELDS,
    ChatMessage,
    ChatRequest,
    Choice,
    CompletionRequest,
    TextPart,
    stop_strings,
    unknown_fields,
)
from rlvr.serve.server import (
    DEFAULT_MAX_QUEUE,
    DEFAULT_MAX_TOKENS,
    ENGINES,
    LOGPROBS_MODES,
    Job,
    ModelServer,
)
from rlvr.serve.stream import event_stream

__all__ = [
    "APIError",
    "Admission",
    "ChatMessage",
    "ChatRequest",
    "Choice",
    "CompletionRequest",
    "DEFAULT_MAX_QUEUE",
    "DEFAULT_MAX_TOKENS",
    "ENGINES",
    "Job",
    "LOGPROBS_MODES",
    "LogitsRules",
    "MAX_TOP_LOGPROBS",
    "ModelServer",
    "REFUSED_FIELDS",
    "Rendering",
    "RequestLog",
    "RequestRun",
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
    "unknown_fields",
    "validation_error",
]
