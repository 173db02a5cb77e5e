"""Whole (non-streamed) response bodies of ``rlvr serve``: ``text_completion`` and
``chat.completion`` objects with OpenAI's ``usage``, log-probs when asked for
(:mod:`rlvr.serve.logprobs`) and, with vLLM's ``return_token_ids``, the token ids:
``prompt_token_ids`` (chat: on the response; completions: on each choice, since each prompt
has its own) and each choice's ``token_ids`` (the completion tokens counted in ``usage``)."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import Any

from rlvr.serve.logprobs import TokenNames, chat_logprobs, completion_logprobs
from rlvr.serve.schemas import Choice


@dataclass(frozen=True)
class Rendering:
    """What a request asked to see of its choices.

    Attributes:
        model_id: the served model's id (``model`` of every response).
        prompts: the request's prompts as token ids (``Choice.prompt_index`` indexes them).
        logprobs: log-probs asked for (chat ``logprobs: true``, completions ``logprobs: k``).
        token_ids: vLLM's ``return_token_ids``.
        names: token id -> string of the log-prob entries.
    """

    model_id: str
    prompts: list[list[int]]
    logprobs: bool
    token_ids: bool
    names: TokenNames


def usage(prompts: list[list[int]], choices: list[Choice]) -> dict[str, int]:
    """OpenAI ``usage``: prompt tokens (each prompt once), completion tokens, total."""
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(c.tokens for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def response_head(kind: str, model_id: str) -> dict[str, Any]:
    """``id`` / ``object`` / ``created`` / ``model`` of a response or stream of ``kind``
    (``text_completion``, ``chat.completion`` or ``chat.completion.chunk``)."""
    prefix = "chatcmpl" if kind.startswith("chat") else "cmpl"
    return {"id": f"{prefix}-{uuid.uuid4().hex}", "object": kind, "created": int(time.time()),
            "model": model_id}


def completion_response(choices: list[Choice], how: Rendering) -> dict[str, Any]:
    """A ``text_completion`` object; choice ``index`` is ``prompt_index * n + sample``."""
    rendered = []
    for i, c in enumerate(choices):
        choice = {"index": i, "text": c.text,
                  "logprobs": completion_logprobs(c, how.names) if how.logprobs else None,
                  "finish_reason": c.finish_reason}
        if how.token_ids:
            choice.update(prompt_token_ids=how.prompts[c.prompt_index], token_ids=c.token_ids)
        rendered.append(choice)
    return {**response_head("text_completion", how.model_id), "choices": rendered,
            "usage": usage(how.prompts, choices)}


def chat_response(choices: list[Choice], how: Rendering) -> dict[str, Any]:
    """A ``chat.completion`` object with one assistant message per choice."""
    rendered = []
    for i, c in enumerate(choices):
        choice = {"index": i, "message": {"role": "assistant", "content": c.text},
                  "logprobs": chat_logprobs(c, how.names) if how.logprobs else None,
                  "finish_reason": c.finish_reason}
        if how.token_ids:
            choice["token_ids"] = c.token_ids
        rendered.append(choice)
    body = {**response_head("chat.completion", how.model_id), "choices": rendered,
            "usage": usage(how.prompts, choices)}
    if how.token_ids:
        body["prompt_token_ids"] = how.prompts[0]
    return body
