"""The FastAPI application of ``rlvr serve``: the routes, OpenAI-style error bodies for every
failure, and the request log middleware."""

from __future__ import annotations

import logging

from rlvr.serve.errors import APIError, validation_error
from rlvr.serve.request_log import RequestLog, record_usage
# Module level, not inside create_app: FastAPI resolves the endpoints' (string) annotations
# through this module's globals.
from rlvr.serve.schemas import (BaseRequest, ChatRequest, CompletionRequest, chat_response,
                                completion_response, stop_strings)
from rlvr.serve.server import ModelServer

log = logging.getLogger("rlvr.serve")


def create_app(server: ModelServer, *, request_log=None):
    """The FastAPI application serving ``server`` (see :mod:`rlvr.serve` for the routes).
    ``request_log(line)`` gets one line per request (default: the ``rlvr.serve`` logger at
    INFO)."""
    # optional dependency: fastapi (rlvr[serve]); `import rlvr.serve` works without it, so
    # `rlvr serve` can name what is missing (rlvr.serve.runner.missing_dependencies)
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
        return record_usage(_run(server, body, prompts, body.max_tokens, completion_response))

    @app.post("/v1/chat/completions")
    def chat(body: ChatRequest) -> dict:
        """Answer the conversation in ``messages``, ``n`` choices."""
        server.check_model(body.model)
        prompts = [server.chat_prompt(body.messages)]
        return record_usage(_run(server, body, prompts,
                                 body.max_tokens or body.max_completion_tokens, chat_response))

    return app


def _run(server: ModelServer, body: BaseRequest, prompts: list[list[int]],
         max_tokens: int | None, respond) -> dict:
    params = server.sampling(body, prompts, max_tokens)
    stops = stop_strings(body.stop)
    server.admission.enter()
    try:
        choices = server.generate(prompts, params, stops)
    finally:
        server.admission.leave()
    return respond(server, prompts, choices)

