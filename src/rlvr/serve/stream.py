"""Streamed responses of ``rlvr serve`` (``stream: true``): server-sent events as the OpenAI
SDK reads them.

Each event is ``data: <json>`` and a blank line; the last is ``data: [DONE]``. Every chunk of
one response shares its ``id`` and ``created``. Per choice, in order of ``index``:

- chat (``object: chat.completion.chunk``): a first chunk with ``delta: {"role":
  "assistant", "content": ""}``, one chunk per completion token (``delta: {"content":
  piece}``, its ``logprobs`` entry when asked for), then ``delta: {}`` with the
  ``finish_reason``;
- completions (``object: text_completion``): one chunk per token (``text``: its piece,
  ``logprobs`` for that token), then ``text: ""`` with the ``finish_reason``.

With vLLM's ``return_token_ids`` each token chunk carries ``token_ids: [id]`` and the prompt's
ids come once (chat: ``prompt_token_ids`` on the very first chunk; completions: on each
choice's first chunk). With ``stream_options: {"include_usage": true}`` every chunk has
``usage: null`` and one last chunk has ``choices: []`` and the ``usage``.

The engine samples a request's completions as one batch, so the chunks are sent once the
batch is done (the text of a choice arrives token by token, but not while it is decoded).
"""

from __future__ import annotations

import json
import os
from typing import Any, Callable, Iterator, Sequence

from rlvr.serve.logprobs import chat_logprobs, completion_logprobs
from rlvr.serve.responses import Rendering, response_head, usage
from rlvr.serve.schemas import Choice

DONE = "data: [DONE]\n\n"


def token_pieces(ids: Sequence[int], text: str, decode: Callable[[Sequence[int]], str]
                 ) -> list[str]:
    """The text each token of ``ids`` adds to ``text``, their decoded (possibly cut)
    completion: token i ends where ``decode(ids[:i + 1])`` stops agreeing with ``text``, never
    before token i - 1 ended, and the last token ends at ``len(text)``. So
    ``"".join(pieces) == text``, and a token ending inside a multi-byte character (decoded as
    U+FFFD) adds nothing until the token completing it.

    Args:
        ids: the completion's token ids.
        text: their text (special tokens dropped, cut before a stop string).
        decode: ``decode(ids) -> str`` as ``text`` was decoded.

    Returns:
        One string per token (``[]`` for no tokens).
    """
    if not ids:
        return []
    ends, end = [], 0
    for i in range(1, len(ids)):
        end = max(end, len(os.path.commonprefix([decode(ids[:i]), text])))
        ends.append(end)
    ends.append(len(text))
    return [text[a:b] for a, b in zip([0] + ends[:-1], ends)]


def sse_event(chunk: dict[str, Any]) -> str:
    """One server-sent event carrying ``chunk`` as JSON (no NaN / infinity)."""
    return f"data: {json.dumps(chunk, allow_nan=False, ensure_ascii=False)}\n\n"


def chat_chunk_choices(choices: list[Choice], how: Rendering) -> Iterator[dict[str, Any]]:
    """The ``choices`` entries of a chat stream, one per chunk, in order."""
    for index, choice in enumerate(choices):
        yield {"index": index, "delta": {"role": "assistant", "content": ""},
               "logprobs": None, "finish_reason": None}
        for i, token in enumerate(choice.token_ids):
            entry = {"index": index, "delta": {"content": choice.pieces[i]},
                     "logprobs": chat_logprobs(choice, how.names, i, i + 1) if how.logprobs
                     else None, "finish_reason": None}
            if how.token_ids:
                entry["token_ids"] = [token]
            yield entry
        yield {"index": index, "delta": {}, "logprobs": None,
               "finish_reason": choice.finish_reason}


def completion_chunk_choices(choices: list[Choice], how: Rendering
                             ) -> Iterator[dict[str, Any]]:
    """The ``choices`` entries of a completions stream, one per chunk, in order."""
    for index, choice in enumerate(choices):
        for i, token in enumerate(choice.token_ids):
            entry = {"index": index, "text": choice.pieces[i],
                     "logprobs": completion_logprobs(choice, how.names, i, i + 1)
                     if how.logprobs else None, "finish_reason": None}
            if how.token_ids:
                entry["token_ids"] = [token]
                if i == 0:
                    entry["prompt_token_ids"] = how.prompts[choice.prompt_index]
            yield entry
        yield {"index": index, "text": "", "logprobs": None,
               "finish_reason": choice.finish_reason}


def event_stream(kind: str, choices: list[Choice], how: Rendering, include_usage: bool
                 ) -> Iterator[str]:
    """The server-sent events of a streamed response.

    Args:
        kind: ``chat.completion.chunk`` or ``text_completion``.
        choices: the generated choices (with ``pieces``).
        how: what the request asked to see.
        include_usage: ``stream_options.include_usage``.

    Raises:
        ValueError: unknown ``kind``, or a choice without ``pieces``.
    """
    entries = {"chat.completion.chunk": chat_chunk_choices,
               "text_completion": completion_chunk_choices}
    if kind not in entries:
        raise ValueError(f"kind: expected one of {', '.join(entries)}, got {kind!r}")
    if any(c.pieces is None for c in choices):
        raise ValueError("streamed choices need their text pieces")
    head = response_head(kind, how.model_id)
    extra = {"usage": None} if include_usage else {}
    for number, entry in enumerate(entries[kind](choices, how)):
        chunk = {**head, "choices": [entry], **extra}
        if number == 0 and how.token_ids and kind == "chat.completion.chunk":
            chunk["prompt_token_ids"] = how.prompts[0]
        yield sse_event(chunk)
    if include_usage:
        yield sse_event({**head, "choices": [], "usage": usage(how.prompts, choices)})
    yield DONE
