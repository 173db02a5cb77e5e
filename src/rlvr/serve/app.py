"""The FastAPI application of ``rlvr serve``: the routes (whole JSON responses, or server-sent
events with ``stream: true``), OpenAI-style error bodies for every failure, and the request
log middleware."""

from __future__ import annotations

import logging

from rlvr.serve.errors import APIError, validation_error
from rlvr.serve.logprobs import TokenNames
from rlvr.serve.request_log import RequestLog, record_usage
from rlvr.serve.responses import Rendering, chat_response, completion_response, usage
# Module level, not inside create_app: FastAPI resolves the endpoints' (string) annotations
# through this module's globals.
from rlvr.serve.schemas import BaseRequest, ChatRequest, CompletionRequest, stop_strings
from rlvr.serve.server import ModelServer
from rlvr.serve.stream import event_stream

log = logging.getLogger("rlvr.serve")

# response kind -> its whole response body, and the ``object`` of its streamed chunks
_WHOLE = {"text_completion": completion_response, "chat.completion": chat_response}
_CHUNK_KIND = {"text_completion": "text_completion", "chat.completion": "chat.completion.chunk"}


def create_app(server: ModelServer, *, request_log=None):
    """The FastAPI application serving ``server`` (see :mod:`rlvr.serve` for the routes).
    ``request_log(line)`` gets one line per request (default: the ``rlvr.serve`` logger at
    INFO)."""
    # optional dependency: fastapi (rlvr[serve]); `import rlvr.serve` works without it, so
    # `rlvr serve` can name what is missing (rlvr.serve.runner.missing_dependencies)
    from fastapi import FastAPI, Request
    from fastapi.exceptions import RequestValidationError
    from fastapi.responses import JSONResponse, StreamingResponse
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

    def respond(body: BaseRequest, prompts: list[list[int]], max_tokens: int | None,
                kind: str):
        """Generate and answer a ``kind`` request (``text_completion`` or
        ``chat.completion``): a JSON object, or its chunks as server-sent events."""
        # completions' text_offset needs each token's piece of the text, as streaming does
        pieces = bool(body.stream) or (kind == "text_completion"
                                       and body.top_logprobs_asked() is not None)
        choices, how = _run(server, body, prompts, max_tokens, pieces=pieces)
        if not body.stream:
            return record_usage(_WHOLE[kind](choices, how))
        record_usage({"usage": usage(prompts, choices)})
        include_usage = bool(body.stream_options and body.stream_options.include_usage)
        return StreamingResponse(event_stream(_CHUNK_KIND[kind], choices, how, include_usage),
                                 media_type="text/event-stream",
                                 headers={"Cache-Control": "no-cache"})

    @app.post("/v1/completions", response_model=None)
    def completions(body: CompletionRequest):
        """Continue ``prompt`` (string or list of strings), ``n`` choices per prompt."""
        server.check_model(body.model)
        return respond(body, server.completion_prompts(body.prompt), body.max_tokens,
                       "text_completion")

    @app.post("/v1/chat/completions", response_model=None)
    def chat(body: ChatRequest):
        """Answer the conversation in ``messages``, ``n`` choices."""
        server.check_model(body.model)
        return respond(body, [server.chat_prompt(body.messages)],
                       body.max_tokens or body.max_completion_tokens, "chat.completion")

    return app


def _run(server: ModelServer, body: BaseRequest, prompts: list[list[int]],
         max_tokens: int | None, *, pieces: bool):
    """Check ``body``, generate its choices (admitted by
    :class:`rlvr.serve.admission.Admission`) and say how to render them:
    ``(choices, Rendering)``.

    Raises:
        APIError: 400 for a bad field, 429 when the server is busy.
    """
    params = server.sampling(body, prompts, max_tokens)
    stops = stop_strings(body.stop)
    logprobs = body.top_logprobs_asked() is not None
    server.admission.enter()
    try:
        choices = server.generate(prompts, params, stops, logprobs=logprobs, pieces=pieces)
    finally:
        server.admission.leave()
    names = TokenNames(server.token_text, as_token_ids=bool(body.return_tokens_as_token_ids))
    return choices, Rendering(model_id=server.model_id, prompts=prompts, logprobs=logprobs,
                              token_ids=bool(body.return_token_ids), names=names)

