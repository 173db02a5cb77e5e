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
(else 404). Unknown fields are ignored; ``stream``, ``logprobs`` and ``echo`` are refused
(400) rather than silently ignored.

Responses carry OpenAI's ``usage``: ``prompt_tokens`` (each prompt counted once),
``completion_tokens`` (all choices; a stop token the model emitted counts, text cut by a
``stop`` string counts up to the token that completed it) and ``total_tokens``. Errors are
OpenAI-style JSON ``{"error": {"message", "type", "param", "code"}}``: 400 for bad fields
(``param`` names the field), 404 unknown model or route, 429 when ``max_concurrency`` requests
are already in flight, 500 for a failure inside the server.

Every request is logged as one line (logger ``rlvr.serve``, INFO; ``rlvr serve`` prints them
on stderr): method, path, status, latency and, for completions, the tokens, e.g.
``POST /v1/chat/completions 200 153.2 ms tokens 21 prompt + 8 completion``.

Generation runs through :func:`rlvr.rollout.create_engine` (``torch`` engine, ``hf`` for
architectures it refuses), one request at a time: CPU decoding gains nothing from running two
batches side by side, so admitted requests wait their turn.
"""

from __future__ import annotations

import contextvars
import logging
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Sequence, Union

from pydantic import BaseModel, ConfigDict, Field

log = logging.getLogger("rlvr.serve")

DEFAULT_MAX_TOKENS = 256
MAX_N = 128
MAX_STOP = 4
ENGINES = ("auto", "torch", "hf")


class APIError(Exception):
    """An error answered as OpenAI-style JSON.

    Args:
        status: HTTP status code (400 bad field, 404 unknown model, 429 busy, ...).
        message: human-readable text; for a bad field it starts with the field's name.
        param: the offending field (dotted path), or None.
        type: OpenAI error type (``invalid_request_error``, ``rate_limit_error``, ...).
        code: optional machine-readable code (e.g. ``model_not_found``).
    """

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 type: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.type, self.code = (
            status, message, param, type, code)

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def bad_field(param: str, message: str) -> APIError:
    """A 400 error naming ``param``: ``"<param>: <message>"``."""
    return APIError(400, f"{param}: {message}", param=param)


# ---------------------------------------------------------------------------------------------
# Request bodies
# ---------------------------------------------------------------------------------------------


class _Request(BaseModel):
    """Fields shared by both endpoints (strict types: ``"0.5"`` is not a number)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    model: str | None = None
    n: int = Field(1, ge=1, le=MAX_N)
    temperature: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int = Field(0, ge=-1)
    max_tokens: int | None = Field(None, ge=1)
    stop: Union[str, list[str], None] = None
    seed: int | None = None
    stream: bool | None = False
    logprobs: Union[bool, int, None] = None
    echo: bool | None = False


class CompletionRequest(_Request):
    """Body of ``POST /v1/completions``: ``prompt`` is one string or a list of strings."""

    prompt: Union[str, list[str]]


class TextPart(BaseModel):
    """One ``{"type": "text", "text": ...}`` part of a message's content."""

    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One chat turn; ``content`` is a string or a list of text parts (joined)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: Union[str, list[TextPart]]

    def text(self) -> str:
        """The content as one string."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatRequest(_Request):
    """Body of ``POST /v1/chat/completions``; ``max_completion_tokens`` is accepted as an
    alias of ``max_tokens``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------


@dataclass
class Choice:
    """One generated completion: ``text`` (stop string and special tokens removed),
    ``finish_reason`` (``stop`` or ``length``) and ``tokens`` (completion tokens counted)."""

    text: str
    finish_reason: str
    tokens: int


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


def stop_strings(stop: str | list[str] | None) -> list[str]:
    """The request's ``stop`` as a list of non-empty strings.

    Raises:
        APIError: 400 on an empty string or more than 4 strings.
    """
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOP:
        raise bad_field("stop", f"at most {MAX_STOP} stop strings, got {len(stops)}")
    if any(s == "" for s in stops):
        raise bad_field("stop", "stop strings must not be empty")
    return stops


class ModelServer:
    """A model, its tokenizer and a rollout engine, answering completion requests.

    Args:
        model: a transformers causal LM (plain, no adapters).
        tokenizer: its tokenizer (the chat template comes from here).
        model_id: the id reported by ``/v1/models`` and in responses.
        engine: ``auto`` (``torch``, or ``hf`` when the torch engine refuses the architecture),
            ``torch`` or ``hf``.
        max_concurrency: requests in flight at most (more get 429).
        default_max_tokens: ``max_tokens`` when a request gives none.
        precision: the engine's compute precision, ``auto`` / ``bf16`` / ``fp32``
            (:mod:`rlvr.models.precision`).

    Raises:
        ValueError: unknown ``engine`` or ``precision``, or ``max_concurrency`` < 1.
        rlvr.rollout.UnsupportedModelError: ``engine="torch"`` on an architecture it refuses.
    """

    def __init__(self, model, tokenizer, model_id: str, *, engine: str = "auto",
                 max_concurrency: int = 4, default_max_tokens: int = DEFAULT_MAX_TOKENS,
                 precision: str = "auto"):
        from rlvr.train.prompting import stop_token_ids

        if engine not in ENGINES:
            raise ValueError(f"engine: expected one of {', '.join(ENGINES)}, got {engine!r}")
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.model_id = model_id
        self.created = int(time.time())
        self.admission = Admission(max_concurrency)
        self.default_max_tokens = default_max_tokens
        self.eos_ids = stop_token_ids(tokenizer)
        self.context_length = _context_length(model)
        self.engine = _make_engine(engine, model, tokenizer.pad_token_id, precision)
        self._generate_lock = threading.Lock()
        # A fast tokenizer resets its truncation / padding state on every call, which fails
        # ("Already borrowed") when two request threads use it at once.
        self._tokenizer_lock = threading.Lock()

    def warm_up(self) -> float:
        """Generate one token once, so the engine's one-off setup (weight snapshot, kernel
        packing: seconds on the default model) is not paid by the first request. Returns
        the seconds it took."""
        from rlvr.rollout import SamplingParams

        start = time.perf_counter()
        prompt = self._encode("Hi", special=False) or [0]
        with self._generate_lock:
            self.engine.generate([prompt], SamplingParams(temperature=0, max_new_tokens=1))
        return time.perf_counter() - start

    # -- request handling ---------------------------------------------------------------------

    def check_model(self, requested: str | None) -> None:
        """Raise a 404 :class:`APIError` unless ``requested`` is None or the served id."""
        if requested is not None and requested != self.model_id:
            raise APIError(404, f"model: {requested!r} is not served here; this server "
                                f"serves {self.model_id!r}", param="model",
                           code="model_not_found")

    def completion_prompts(self, prompt: str | list[str]) -> list[list[int]]:
        """Token ids of each prompt string (the tokenizer's own special tokens added).

        Raises:
            APIError: 400 naming ``prompt`` when it is an empty list or a prompt has no tokens.
        """
        texts = [prompt] if isinstance(prompt, str) else prompt
        if not texts:
            raise bad_field("prompt", "expected a string or a non-empty list of strings")
        ids = [self._encode(text, special=True) for text in texts]
        for i, row in enumerate(ids):
            if not row:
                where = "prompt" if isinstance(prompt, str) else f"prompt.{i}"
                raise bad_field(where, "the prompt is empty (0 tokens)")
        return ids

    def chat_prompt(self, messages: Sequence[ChatMessage]) -> list[int]:
        """Token ids of ``messages`` under the chat template, ending with the assistant header.

        Raises:
            APIError: 400 naming ``messages`` when the tokenizer has no chat template or the
                template rejects the conversation.
        """
        if not getattr(self.tokenizer, "chat_template", None):
            raise bad_field("messages", f"model {self.model_id!r} has no chat template; use "
                                        f"/v1/completions")
        plain = [{"role": m.role, "content": m.text()} for m in messages]
        try:
            with self._tokenizer_lock:
                text = self.tokenizer.apply_chat_template(plain, add_generation_prompt=True,
                                                          tokenize=False)
        except Exception as exc:  # jinja raises its own TemplateError subclasses
            raise bad_field("messages", f"the chat template rejects them: {exc}") from exc
        return self._encode(text, special=False)

    def sampling(self, request: _Request, prompts: list[list[int]], max_tokens: int | None):
        """:class:`rlvr.rollout.SamplingParams` for ``request`` (stop strings that are one
        token also stop decoding early).

        Raises:
            APIError: 400 naming ``stream``, ``logprobs``, ``echo`` (unsupported) or
                ``max_tokens`` (prompt + max_tokens exceed the model's context).
        """
        from rlvr.rollout import SamplingParams

        _refuse_unsupported(request)
        max_new = max_tokens or self._default_max_tokens(prompts)
        longest = max(len(p) for p in prompts)
        if self.context_length and longest + max_new > self.context_length:
            raise bad_field("max_tokens", f"prompt ({longest} tokens) + max_tokens ({max_new}) "
                                          f"exceeds the model's context of "
                                          f"{self.context_length} tokens")
        single = [self._single_token(s) for s in stop_strings(request.stop)]
        return SamplingParams(temperature=request.temperature, top_p=request.top_p,
                              top_k=max(request.top_k, 0), max_new_tokens=max_new,
                              n=request.n, seed=request.seed,
                              stop_token_ids=tuple(self.eos_ids) + tuple(
                                  t for t in single if t is not None))

    def generate(self, prompts: list[list[int]], params, stops: list[str]) -> list[Choice]:
        """Sample ``params.n`` choices per prompt (prompt-major order), one call at a time."""
        with self._generate_lock:
            out = self.engine.generate(prompts, params)
        return [self._choice(out.completion(row), out.finish_reason[row], stops)
                for row in range(out.num_rows)]

    # -- helpers ------------------------------------------------------------------------------

    def _default_max_tokens(self, prompts: list[list[int]]) -> int:
        """``default_max_tokens``, shortened to what the context leaves after the longest
        prompt (at least 1, so a prompt filling the context still gets the 400 above)."""
        if not self.context_length:
            return self.default_max_tokens
        room = self.context_length - max(len(p) for p in prompts)
        return max(1, min(self.default_max_tokens, room))

    def _encode(self, text: str, *, special: bool) -> list[int]:
        with self._tokenizer_lock:
            return list(self.tokenizer(text, add_special_tokens=special).input_ids)

    def _single_token(self, text: str) -> int | None:
        ids = self._encode(text, special=False)
        return ids[0] if len(ids) == 1 else None

    def _decode(self, ids: Sequence[int]) -> str:
        with self._tokenizer_lock:
            return self.tokenizer.decode(list(ids), skip_special_tokens=True)

    def _choice(self, ids: list[int], finish: str, stops: list[str]) -> Choice:
        """Decode one completion, cutting it before the first stop string. The token count
        then runs up to the token that completed the stop string."""
        text = self._decode(ids)
        cut = _first_stop(text, stops)
        if cut is None:
            return Choice(text, finish, len(ids))
        lo, hi = 1, len(ids)  # smallest token prefix whose text already contains a stop
        while lo < hi:
            mid = (lo + hi) // 2
            if _first_stop(self._decode(ids[:mid]), stops) is None:
                lo = mid + 1
            else:
                hi = mid
        return Choice(text[:cut], "stop", lo)


def _first_stop(text: str, stops: list[str]) -> int | None:
    """Index of the earliest occurrence of any stop string in ``text``, or None."""
    found = [i for i in (text.find(s) for s in stops) if i >= 0]
    return min(found) if found else None


def _refuse_unsupported(request: _Request) -> None:
    if request.stream:
        raise bad_field("stream", "streaming is not supported by rlvr serve; send "
                                  "stream: false")
    if request.logprobs not in (None, False, 0):
        raise bad_field("logprobs", "log-probabilities are not returned by rlvr serve")
    if request.echo:
        raise bad_field("echo", "echo is not supported by rlvr serve")


def _context_length(model) -> int | None:
    config = getattr(model, "config", None)
    value = getattr(config, "max_position_embeddings", None)
    return int(value) if isinstance(value, int) and value > 0 else None


def _make_engine(name: str, model, pad_token_id: int | None, precision: str = "auto"):
    from rlvr.rollout import create_auto_engine

    return create_auto_engine(name, model, pad_token_id=pad_token_id, precision=precision,
                              log=log.info)


# ---------------------------------------------------------------------------------------------
# Responses
# ---------------------------------------------------------------------------------------------


def usage(prompts: list[list[int]], choices: list[Choice]) -> dict[str, int]:
    """OpenAI ``usage``: prompt tokens (each prompt once), completion tokens, total."""
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(c.tokens for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_response(server: ModelServer, prompts: list[list[int]], choices: list[Choice]
                        ) -> dict[str, Any]:
    """A ``text_completion`` object; choice ``index`` is ``prompt_index * n + sample``."""
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
            "created": int(time.time()), "model": server.model_id,
            "choices": [{"index": i, "text": c.text, "logprobs": None,
                         "finish_reason": c.finish_reason} for i, c in enumerate(choices)],
            "usage": usage(prompts, choices)}


def chat_response(server: ModelServer, prompts: list[list[int]], choices: list[Choice]
                  ) -> dict[str, Any]:
    """A ``chat.completion`` object with one assistant message per choice."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": server.model_id,
            "choices": [{"index": i, "message": {"role": "assistant", "content": c.text},
                         "logprobs": None, "finish_reason": c.finish_reason}
                        for i, c in enumerate(choices)],
            "usage": usage(prompts, choices)}


# ---------------------------------------------------------------------------------------------
# The app
# ---------------------------------------------------------------------------------------------


def validation_error(errors: Sequence[dict]) -> APIError:
    """A pydantic validation error as a 400 naming its field (dotted path, e.g.
    ``messages.0.role``). Of several errors (a value failing every member of a union) the
    one reaching deepest into the value is reported: ``prompt.0`` for ``"prompt": [1]``."""
    errors = list(errors) or [{"loc": ("body",), "msg": "invalid request"}]
    paths = [_field_path(error) for error in errors]
    deepest = max(range(len(errors)), key=lambda i: len(paths[i]))
    first, param = errors[deepest], ".".join(paths[deepest]) or "body"
    kind = first.get("type", "")
    if kind == "json_invalid":
        reason = first.get("ctx", {}).get("error", "parse error")
        return bad_field("body", f"invalid JSON: {reason}")
    if kind == "missing":
        return bad_field(param, "required field is missing")
    if param == "body":
        return bad_field("body", "expected a JSON object (Content-Type: application/json)")
    got = first.get("input")
    return bad_field(param, f"{first.get('msg', 'invalid value')}, got {got!r}")


def _field_path(error: dict) -> list[str]:
    """The error's location without ``body`` and without the type tags pydantic adds for
    union members (``prompt.list[str].0`` -> ``prompt.0``)."""
    return [str(part) for part in error.get("loc", ())
            if part != "body" and not _is_type_tag(str(part))]


def _is_type_tag(part: str) -> bool:
    return part in {"str", "int", "float", "bool", "none", "TextPart"} or \
        part.startswith(("list[", "dict[", "function-", "literal["))


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
    latency from the request's arrival)."""

    def __init__(self, app, write=None):
        self.app, self.write = app, write or log.info

    async def __call__(self, scope, receive, send):
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start, status, box, written = time.perf_counter(), [500], {}, [False]
        token = _REQUEST_USAGE.set(box)

        def write_once():
            if not written[0]:
                written[0] = True
                self.write(request_line(scope.get("method", "?"), scope.get("path", "?"),
                                        status[0], time.perf_counter() - start, box.get("usage")))

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


def create_app(server: ModelServer, *, request_log=None):
    """The FastAPI application serving ``server`` (see the module doc for the routes).
    ``request_log(line)`` gets one line per request (default: the ``rlvr.serve`` logger at
    INFO)."""
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    app = FastAPI(title="rlvr serve", description=f"OpenAI-compatible API over "
                                                   f"{server.model_id}")
    app.add_middleware(RequestLog, write=request_log)

    @app.exception_handler(APIError)
    async def _api_error(_: Request, exc: APIError):
        headers = {"Retry-After": "1"} if exc.status == 429 else None
        return JSONResponse(exc.body(), status_code=exc.status, headers=headers)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_: Request, exc: RequestValidationError):
        error = validation_error(exc.errors())
        return JSONResponse(error.body(), status_code=error.status)

    @app.exception_handler(HTTPException)
    async def _http(_: Request, exc: HTTPException):
        error = APIError(exc.status_code, str(exc.detail),
                         type="not_found_error" if exc.status_code == 404 else
                         "invalid_request_error")
        return JSONResponse(error.body(), status_code=exc.status_code)

    @app.exception_handler(Exception)
    async def _crash(_: Request, exc: Exception):
        log.exception("request failed")
        error = APIError(500, f"internal error: {type(exc).__name__}: {exc}",
                         type="server_error")
        return JSONResponse(error.body(), status_code=500)

    @app.get("/v1/models")
    def models() -> dict:
        """The served model."""
        return {"object": "list", "data": [{"id": server.model_id, "object": "model",
                                            "created": server.created, "owned_by": "rlvr"}]}

    @app.post("/v1/completions")
    def completions(body: CompletionRequest) -> dict:
        """Continue ``prompt`` (string or list of strings), ``n`` choices per prompt."""
        server.check_model(body.model)
        prompts = server.completion_prompts(body.prompt)
        return _logged(_run(server, body, prompts, body.max_tokens, completion_response))

    @app.post("/v1/chat/completions")
    def chat(body: ChatRequest) -> dict:
        """Answer the conversation in ``messages``, ``n`` choices."""
        server.check_model(body.model)
        prompts = [server.chat_prompt(body.messages)]
        return _logged(_run(server, body, prompts, body.max_tokens or body.max_completion_tokens,
                            chat_response))

    return app


def _logged(response: dict) -> dict:
    """``response``, its ``usage`` left for :class:`RequestLog`'s line."""
    box = _REQUEST_USAGE.get()
    if box is not None:
        box["usage"] = response.get("usage")
    return response


def _run(server: ModelServer, body: _Request, prompts: list[list[int]],
         max_tokens: int | None, respond) -> dict:
    params = server.sampling(body, prompts, max_tokens)
    stops = stop_strings(body.stop)
    server.admission.enter()
    try:
        choices = server.generate(prompts, params, stops)
    finally:
        server.admission.leave()
    return respond(server, prompts, choices)


# ---------------------------------------------------------------------------------------------
# Loading and running
# ---------------------------------------------------------------------------------------------


def load_for_serving(name: str):
    """``(model, tokenizer)`` for ``name``: anything :func:`rlvr.models.load_model_and_tokenizer`
    accepts, plus a LoRA adapter checkpoint (a directory with ``adapter_config.json``), whose
    base model is the run's (``RUN/checkpoints/step-N``): its ``sft_model/`` when the run
    recorded that in ``lora_base.json``, else ``model.name`` of its ``config.yaml``; or the
    adapter's ``base_model_name_or_path``. The adapters are merged into plain weights.

    Raises:
        rlvr.models.loader.ModelLoadError: the model, or an adapter's base model, does not load.
    """
    from rlvr.models import load_model_and_tokenizer

    path = Path(name)
    if not (path / "adapter_config.json").is_file():
        return load_model_and_tokenizer(name)
    from transformers import AutoTokenizer

    from rlvr.models.lora import load_adapter

    base_name, seed = _adapter_base(path)
    base, tokenizer = load_model_and_tokenizer(base_name, seed=seed)
    if (path / "tokenizer_config.json").is_file():
        tokenizer = AutoTokenizer.from_pretrained(path)
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
    return load_adapter(base, path, trainable=False).merge_and_unload(), tokenizer


def _adapter_base(path: Path) -> tuple[str, int]:
    """(base model name, tiny-random seed) of the adapter checkpoint at ``path``."""
    import json

    import yaml

    from rlvr.models.loader import ModelLoadError

    from rlvr.train.run import lora_base

    for run_dir in (path.parent, path.parent.parent):
        config = run_dir / "config.yaml"
        if config.is_file():
            data = yaml.safe_load(config.read_text()) or {}
            name = (data.get("model") or {}).get("name")
            if name:  # the run's sft_model/ when its adapters were trained on it
                return lora_base(run_dir, str(name), int(data.get("seed", 0)))
    base = json.loads((path / "adapter_config.json").read_text()).get("base_model_name_or_path")
    if base:
        return str(base), 0
    raise ModelLoadError(f"{path}: LoRA adapter without a base model (no run config.yaml "
                         f"beside it and no base_model_name_or_path in adapter_config.json)")


def missing_dependencies() -> list[str]:
    """The server's packages (the ``serve`` extra) that are not installed."""
    import importlib.util

    return [name for name in ("fastapi", "uvicorn") if importlib.util.find_spec(name) is None]


def bind_socket(host: str, port: int):
    """A listening TCP socket on ``host:port`` (IPv6 when ``host`` contains ``:``).

    Raises:
        OSError: the address is in use or cannot be bound (message names host and port).
    """
    import socket

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
    import uvicorn

    config = uvicorn.Config(app, log_level=log_level, access_log=log_level == "debug",
                            timeout_graceful_shutdown=5)
    return uvicorn.Server(config)


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


def serve_forever(server: ModelServer, sock, *, log_level: str = "info") -> None:
    """Serve ``server`` on the bound socket ``sock`` until interrupted (Ctrl-C), one log line
    per request on stderr."""
    log_requests_to_stderr()
    make_uvicorn_server(create_app(server), log_level=log_level).run(sockets=[sock])


__all__ = [
    "APIError",
    "Admission",
    "ChatRequest",
    "CompletionRequest",
    "ModelServer",
    "RequestLog",
    "bind_socket",
    "create_app",
    "load_for_serving",
    "make_uvicorn_server",
    "missing_dependencies",
    "request_line",
    "serve_forever",
]
