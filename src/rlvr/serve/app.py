"""The FastAPI application of ``rlvr serve``: the routes (whole JSON responses, or server-sent
events with ``stream: true``), OpenAI-style error bodies for every failure, and the request
log middleware."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from dataclasses import dataclass

from rlvr.serve.errors import APIError, validation_error
from rlvr.serve.logprobs import TokenNames
from rlvr.serve.request_log import RequestLog, record_usage
from rlvr.serve.responses import Rendering, chat_response, completion_response

# Module level, not inside create_app: FastAPI resolves the endpoints' (string) annotations
# through this module's globals.
from rlvr.serve.schemas import BaseRequest, ChatRequest, CompletionRequest
from rlvr.serve.server import Job, ModelServer
from rlvr.serve.stream import event_stream
from rlvr.serve.utility_routes import add_utility_routes

try:  # optional dependency: starlette, with fastapi (rlvr[serve])
    from starlette.requests import Request
except ImportError:  # `import rlvr.serve` works without it (runner.missing_dependencies)
    Request = None

log = logging.getLogger("rlvr.serve")

# response kind -> its whole response body, and the ``object`` of its streamed chunks
_WHOLE = {"text_completion": completion_response, "chat.completion": chat_response}
_CHUNK_KIND = {"text_completion": "text_completion", "chat.completion": "chat.completion.chunk"}
# the status logged for a request whose client went away (nginx's convention; never sent)
CLIENT_GONE = 499


def create_app(server: ModelServer, *, request_log=None):
    """The FastAPI application serving ``server`` (see :mod:`rlvr.serve` for the routes).
    ``request_log(line)`` gets one line per request (default: the ``rlvr.serve`` logger at
    INFO)."""
    # optional dependency: fastapi (rlvr[serve]); `import rlvr.serve` works without it, so
    # `rlvr serve` can name what is missing (rlvr.serve.runner.missing_dependencies)
    from fastapi import FastAPI
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse
    from starlette.exceptions import HTTPException

    app = FastAPI(title="rlvr serve", description=f"OpenAI-compatible API over "
                                                   f"{server.model_id}")
    app.add_middleware(RequestLog, write=request_log, observe=server.metrics.observe)

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
        log.error("request failed", exc_info=exc)
        error = APIError(500, f"internal error: {type(exc).__name__}: {exc}",
                         type="server_error")
        return JSONResponse(error.body(), status_code=500)

    @app.get("/v1/models")
    def models() -> dict:
        """The served model."""
        return {"object": "list", "data": [{"id": server.model_id, "object": "model",
                                            "created": server.created, "owned_by": "rlvr",
                                            "max_model_len": server.context_length}]}

    add_utility_routes(app, server)

    @app.post("/v1/completions", response_model=None)
    async def completions(body: CompletionRequest, request: Request):
        """Continue ``prompt`` (text or token ids, one or a list), ``n`` choices per prompt."""
        return await _respond(server, body, request, "text_completion")

    @app.post("/v1/chat/completions", response_model=None)
    async def chat(body: ChatRequest, request: Request):
        """Answer the conversation in ``messages``, ``n`` choices."""
        return await _respond(server, body, request, "chat.completion")

    return app


async def _respond(server: ModelServer, body: BaseRequest, request, kind: str):
    """Plan, admit (queue), generate and answer a ``kind`` request (``text_completion`` or
    ``chat.completion``): a JSON object, or server-sent events with ``stream: true``. A client
    that goes away while its request waits leaves the queue; while it generates, decoding
    stops at the next step (its rows free the batch)."""
    from fastapi.responses import Response, StreamingResponse
    from starlette.concurrency import run_in_threadpool

    server.check_model(body.model)
    job = await run_in_threadpool(server.plan, body)  # tokenizing: off the event loop
    how = _rendering(server, body, job)
    arrived = time.perf_counter()
    if not await _admitted(server, request):
        server.metrics.cancelled.inc()
        return Response(status_code=CLIENT_GONE)
    job.admitted_at = time.perf_counter()
    server.metrics.queue_time.observe(job.admitted_at - arrived)
    loop = asyncio.get_running_loop()
    if body.stream:
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(
            event_stream(_CHUNK_KIND[kind], job.run, how, include_usage,
                         _steps(server, job, _start(server, job, request, loop)),
                         on_usage=lambda used: record_usage({"usage": used})),
            media_type="text/event-stream", headers={"Cache-Control": "no-cache"})
    try:
        future = loop.run_in_executor(server.executor, server.execute, job)
        watch = asyncio.ensure_future(_disconnected(request))
        try:
            await asyncio.wait({future, watch}, return_when=asyncio.FIRST_COMPLETED)
            if watch.done() and not future.done():
                job.run.cancel()
                server.metrics.cancelled.inc()
        finally:
            watch.cancel()
        await future
    finally:
        server.admission.leave()
    _observe_first_token(server, job)
    if job.run.cancelled:
        return Response(status_code=CLIENT_GONE)
    return record_usage(_WHOLE[kind](job.run.choices(), how))


async def _admitted(server: ModelServer, request) -> bool:
    """Wait for admission; False (out of the queue) when the client went away first.

    Raises:
        APIError: 429 when the queue is full.
    """
    enter = asyncio.ensure_future(server.admission.enter())
    watch = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({enter, watch}, return_when=asyncio.FIRST_COMPLETED)
    finally:
        watch.cancel()
    if enter.done():
        enter.result()  # 429
        return True
    enter.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await enter
    return False


@dataclass
class _Started:
    """A streamed job running in a worker thread: its deltas arrive on ``queue`` (``end``
    last), ``future`` is the thread's, ``watch`` waits for the client to go away."""

    queue: asyncio.Queue
    end: object
    future: asyncio.Future
    watch: asyncio.Future


def _start(server: ModelServer, job: Job, request, loop) -> _Started:
    """Start ``job`` now, before the response is sent: its slot is released when the thread
    ends, and a client gone away cancels it, even if the stream is never read."""
    queue: asyncio.Queue = asyncio.Queue()
    end = object()
    job.run.emit = lambda deltas: loop.call_soon_threadsafe(queue.put_nowait, deltas)
    future = loop.run_in_executor(server.executor, server.execute, job)

    def ended(_):
        server.admission.leave()
        queue.put_nowait(end)

    future.add_done_callback(ended)
    watch = asyncio.ensure_future(_disconnected(request))
    watch.add_done_callback(lambda w: w.cancelled() or job.run.cancel())
    return _Started(queue, end, future, watch)


async def _steps(server: ModelServer, job: Job, started: _Started):
    """Yield each decode step's deltas as they come; stops decoding when the stream is
    closed early (the client went away)."""
    finished = False
    try:
        while True:
            item = await started.queue.get()
            if item is started.end:
                break
            yield item
        finished = True
        _observe_first_token(server, job)
        started.future.result()  # raises what generation raised
    finally:
        started.watch.cancel()
        if not finished:
            job.run.cancel()
            server.metrics.cancelled.inc()


async def _disconnected(request) -> None:
    """Return once the client has disconnected."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def _observe_first_token(server: ModelServer, job: Job) -> None:
    if job.run.first_step_at is not None and job.admitted_at:
        server.metrics.first_token.observe(job.run.first_step_at - job.admitted_at)


def _rendering(server: ModelServer, body: BaseRequest, job: Job) -> Rendering:
    names = TokenNames(server.token_text, as_token_ids=bool(body.return_tokens_as_token_ids))
    echo = bool(getattr(body, "echo", False))
    top = body.top_logprobs_asked()
    return Rendering(model_id=server.model_id, prompts=job.prompts, logprobs=top is not None,
                     token_ids=bool(body.return_token_ids), names=names,
                     echo=job.prompt_texts if echo else None, scores=_Scores(job),
                     prompt_logprobs=body.prompt_logprobs, echo_k=top or 0,
                     token_text=server.token_text)


class _Scores:
    """The job's prompt scores, read once generation has run."""

    def __init__(self, job: Job):
        self.job = job

    def __getitem__(self, index: int):
        return self.job.scores[index]
