"""Whole (non-streamed) response bodies of ``rlvr serve``: ``text_completion`` and
``chat.completion`` objects with OpenAI's ``usage``, log-probs when asked for
(:mod:`rlvr.serve.logprobs`) and, with vLLM's ``return_token_ids``, the token ids:
``prompt_token_ids`` (chat: on the response; completions: on each choice, since each prompt
has its own) and each choice's ``token_ids`` (the completion tokens counted in ``usage``)."""

from __future__ import annotations

import dataclasses
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rlvr.serve.logprobs import TokenNames, chat_logprobs, completion_logprobs
from rlvr.serve.prompt_scores import PromptScores, echo_logprobs, vllm_prompt_logprobs
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
        echo: each prompt's text, put before its choices' text (completions ``echo``), or
            None.
        scores: each prompt's :class:`PromptScores` (``prompt_logprobs``, ``echo`` with
            ``logprobs``), or None.
        prompt_logprobs: vLLM's ``prompt_logprobs`` k, or None (not asked for).
        echo_k: top log-probs per echoed prompt position (completions ``logprobs``).
        token_text: ``token_text(id) -> str``, a token's text (echoed ``text_offset``).
    """

    model_id: str
    prompts: list[list[int]]
    logprobs: bool
    token_ids: bool
    names: TokenNames
    echo: list[str] | None = None
    scores: list[PromptScores] | None = None
    prompt_logprobs: int | None = None
    echo_k: int = 0
    token_text: Callable[[int], str] | None = None


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
    """A ``text_completion`` object; choice ``index`` is ``prompt_index * n + sample``. With
    ``echo`` the prompt's text comes first, and its log-probs (first None) before the
    completion's."""
    rendered = []
    for i, c in enumerate(choices):
        prefix = how.echo[c.prompt_index] if how.echo is not None else ""
        logprobs = completion_logprobs(c, how.names) if how.logprobs else None
        if logprobs is not None and how.echo is not None:
            logprobs = _echoed(logprobs, how, c.prompt_index, len(prefix))
        choice = {"index": i, "text": prefix + c.text, "logprobs": logprobs,
                  "finish_reason": c.finish_reason, "stop_reason": c.stop_reason}
        if how.prompt_logprobs is not None:
            choice["prompt_logprobs"] = prompt_logprobs_of(how, c.prompt_index)
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
                  "finish_reason": c.finish_reason, "stop_reason": c.stop_reason}
        if how.token_ids:
            choice["token_ids"] = c.token_ids
        rendered.append(choice)
    body = {**response_head("chat.completion", how.model_id), "choices": rendered,
            "usage": usage(how.prompts, choices)}
    if how.token_ids:
        body["prompt_token_ids"] = how.prompts[0]
    if how.prompt_logprobs is not None:
        body["prompt_logprobs"] = prompt_logprobs_of(how, 0)
    return body


def prompt_logprobs_of(how: Rendering, prompt: int) -> list[Any]:
    """vLLM's ``prompt_logprobs`` of prompt ``prompt`` (its top ``how.prompt_logprobs``)."""
    scores = how.scores[prompt]
    return vllm_prompt_logprobs(_top(scores, how.prompt_logprobs), how.names)


def _top(scores: PromptScores, k: int) -> PromptScores:
    return dataclasses.replace(scores, tops=[t if t is None else t[:k] for t in scores.tops])


def _echoed(logprobs: dict[str, list], how: Rendering, prompt: int, shift: int
            ) -> dict[str, list]:
    """The completion's ``logprobs`` after the echoed prompt's (offsets shifted by
    ``shift``, the prompt text's length)."""
    head = echo_logprobs(_top(how.scores[prompt], how.echo_k), how.names, how.token_text)
    return {"tokens": head["tokens"] + logprobs["tokens"],
            "token_logprobs": head["token_logprobs"] + logprobs["token_logprobs"],
            "top_logprobs": head["top_logprobs"] + logprobs["top_logprobs"],
            "text_offset": head["text_offset"] + [o + shift for o in logprobs["text_offset"]]}
