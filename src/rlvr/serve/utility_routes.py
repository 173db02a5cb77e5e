"""The routes of ``rlvr serve`` beside generation, as vLLM's OpenAI server has them:

- ``GET /health``: 200 with an empty body while the server runs;
- ``GET /version``: ``{"version": <rlvr's version>}``;
- ``GET /metrics``: Prometheus metrics (:mod:`rlvr.serve.metrics`);
- ``POST /tokenize``: ``{"prompt": text, "add_special_tokens": true}`` or ``{"messages":
  [...], "add_generation_prompt": true, "continue_final_message": false,
  "chat_template_kwargs": {...}, "add_special_tokens": false}`` -> ``{"count",
  "max_model_len", "tokens", "token_strs"}`` (``token_strs`` with ``return_token_strs``);
- ``POST /detokenize``: ``{"tokens": [ids]}`` -> ``{"prompt": text}``;
- ``GET /tokenizer_info``: the tokenizer's special tokens, chat template, class and maximum
  length (lm-evaluation-harness reads ``eos_token`` and ``chat_template`` from here when it
  tokenizes through the server).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from rlvr import __version__
from rlvr.serve.errors import bad_field
from rlvr.serve.schemas import ChatMessage, ChatRequest
from rlvr.serve.server import ModelServer


class TokenizeRequest(BaseModel):
    """Body of ``POST /tokenize``: ``prompt`` or ``messages`` (exactly one)."""

    model_config = ConfigDict(strict=True, extra="forbid")

    model: str | None = None
    prompt: str | None = None
    messages: list[ChatMessage] | None = None
    add_special_tokens: bool | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template_kwargs: dict[str, Any] | None = None
    return_token_strs: bool = False


class DetokenizeRequest(BaseModel):
    """Body of ``POST /detokenize``."""

    model_config = ConfigDict(strict=True, extra="forbid")

    model: str | None = None
    tokens: list[int] = Field(default_factory=list)


def tokenizer_info(server: ModelServer) -> dict[str, str | int | bool | None]:
    """What ``GET /tokenizer_info`` answers: ``tokenizer_class``, the special tokens
    (``eos_token``, ``bos_token``, ``pad_token``, ``unk_token``), ``chat_template`` and
    ``model_max_length`` (the served context)."""
    tok = server.tokenizer
    return {"tokenizer_class": type(tok).__name__, "eos_token": tok.eos_token,
            "bos_token": tok.bos_token, "pad_token": tok.pad_token,
            "unk_token": tok.unk_token, "chat_template": getattr(tok, "chat_template", None),
            "model_max_length": server.context_length}


def tokenize(server: ModelServer, body: TokenizeRequest) -> dict[str, Any]:
    """Answer ``POST /tokenize`` (see the module doc).

    Raises:
        APIError: 400 unless exactly one of ``prompt`` and ``messages`` is given, or for a
            prompt the context cannot hold.
    """
    server.check_model(body.model)
    if (body.prompt is None) == (body.messages is None):
        raise bad_field("prompt", "give either prompt or messages")
    if body.prompt is not None:
        ids = server.encode(body.prompt, special=body.add_special_tokens is not False)
    else:
        chat = ChatRequest(messages=body.messages, add_special_tokens=body.add_special_tokens,
                           add_generation_prompt=body.add_generation_prompt,
                           continue_final_message=body.continue_final_message,
                           chat_template_kwargs=body.chat_template_kwargs)
        ids = server.chat_prompt(chat)
    return {"count": len(ids), "max_model_len": server.context_length, "tokens": ids,
            "token_strs": [server.token_text(t) for t in ids] if body.return_token_strs
            else None}


def add_utility_routes(app, server: ModelServer) -> None:
    """Add the routes of the module doc to the FastAPI ``app``."""
    from fastapi.responses import Response
    from starlette.concurrency import run_in_threadpool

    @app.get("/health")
    def health():
        """200 while the server runs."""
        return Response(status_code=200)

    @app.get("/version")
    def version() -> dict:
        """rlvr's version."""
        return {"version": __version__}

    @app.get("/metrics")
    def metrics():
        """Prometheus metrics."""
        body, content_type = server.metrics.text()
        return Response(body, media_type=content_type)

    @app.get("/tokenizer_info")
    def info() -> dict:
        """The tokenizer's special tokens, chat template and class."""
        return tokenizer_info(server)

    @app.post("/tokenize")
    async def tokenize_route(body: TokenizeRequest) -> dict:
        """Token ids of a prompt or a conversation."""
        return await run_in_threadpool(tokenize, server, body)

    @app.post("/detokenize")
    def detokenize(body: DetokenizeRequest) -> dict:
        """The text of token ids (special tokens kept)."""
        server.check_model(body.model)
        server.check_token_ids(body.tokens, "tokens")
        return {"prompt": server.decode(body.tokens, skip_special=False)}
