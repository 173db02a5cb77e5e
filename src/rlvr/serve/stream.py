"""Streamed responses of ``rlvr serve`` (``stream: true``): server-sent events as the OpenAI
SDK reads them.

Each event is ``data: <json>`` and a blank line; the last is ``data: [DONE]``. Every chunk of
one response shares its ``id`` and ``created``. Per choice, in order of ``index``:

- chat (``object: chat.completion.chunk``): a first chunk per choice with ``delta: {"role":
  "assistant", "content": ""}`` (sent at once), one chunk per completion token (``delta:
  {"content": piece}``, its ``logprobs`` entry when asked for), then ``delta: {}`` with the
  ``finish_reason`` and ``stop_reason``;
- completions (``object: text_completion``): one chunk per token (``text``: its piece,
  ``logprobs`` for that token), then ``text: ""`` with the ``finish_reason`` and
  ``stop_reason``.

Chunks are sent as the engine samples: each decode step's tokens, for all choices (``n > 1``
interleaved, each chunk naming its choice's ``index``). A piece holds back text that may be
the start of a stop string or an incomplete character, so nothing sent is taken back.

With vLLM's ``return_token_ids`` each token chunk carries ``token_ids: [id]`` and the prompt's
ids come once (chat: ``prompt_token_ids`` on the very first chunk; completions: on each
choice's first chunk). With ``stream_options: {"include_usage": true}`` every chunk has
``usage: null`` and one last chunk has ``choices: []`` and the ``usage``.

An error after the response has started is sent as one ``data: {"error": ...}`` event, then
``data: [DONE]``.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any

from rlvr.serve.decoding import Delta, RequestRun
from rlvr.serve.errors import APIError
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


def _view(state, index: int) -> Choice:
    """A row's state as a :class:`Choice` (lists shared, read up to its current token)."""
    return Choice(state.text, state.finish or "length", state.ids, pieces=state.pieces,
                  logprobs=state.logprobs, top_logprobs=state.tops or None,
                  prompt_index=index)


def opening_entries(kind: str, rows: int) -> list[dict[str, Any]]:
    """The ``choices`` entries sent before any token: chat's ``role`` chunk per choice."""
    if kind != "chat.completion.chunk":
        return []
    return [{"index": i, "delta": {"role": "assistant", "content": ""}, "logprobs": None,
             "finish_reason": None} for i in range(rows)]


def delta_entries(kind: str, run: RequestRun, deltas: list[Delta], how: Rendering
                  ) -> list[dict[str, Any]]:
    """The ``choices`` entries of one decode step's deltas: per row its token's piece (and
    log-probs, token id) and, when the row ended with it, a finish entry."""
    entries = []
    chat = kind == "chat.completion.chunk"
    for row, i, finished in deltas:
        state = run.rows[row]
        choice = _view(state, row // run.n)
        logprobs = None
        if how.logprobs:
            logprobs = (chat_logprobs(choice, how.names, i, i + 1) if chat else
                        completion_logprobs(choice, how.names, i, i + 1))
        entry = {"index": row, "logprobs": logprobs, "finish_reason": None}
        entry.update({"delta": {"content": state.pieces[i]}} if chat else
                     {"text": state.pieces[i]})
        if how.token_ids:
            entry["token_ids"] = [state.ids[i]]
            if i == 0 and not chat:
                entry["prompt_token_ids"] = how.prompts[row // run.n]
        entries.append(entry)
        if finished:
            end = {"index": row, "logprobs": None, "finish_reason": state.finish,
                   "stop_reason": state.stop_reason}
            end.update({"delta": {}} if chat else {"text": ""})
            entries.append(end)
    return entries


async def event_stream(kind: str, run: RequestRun, how: Rendering, include_usage: bool,
                       batches: AsyncIterator[list[Delta]],
                       on_usage: Callable[[dict], Any] | None = None) -> AsyncIterator[str]:
    """The server-sent events of a streamed response, sent as the engine samples.

    Args:
        kind: ``chat.completion.chunk`` or ``text_completion``.
        run: the request's decoding state.
        how: what the request asked to see.
        include_usage: ``stream_options.include_usage``.
        batches: each decode step's deltas, until generation ends (an exception it raises
            is sent as an ``error`` event).
        on_usage: told the response's ``usage`` at the end.

    Raises:
        ValueError: unknown ``kind``.
    """
    if kind not in ("chat.completion.chunk", "text_completion"):
        raise ValueError(f"kind: expected chat.completion.chunk or text_completion, "
                         f"got {kind!r}")
    head = response_head(kind, how.model_id)
    extra = {"usage": None} if include_usage else {}
    first = True

    def event(entry):
        nonlocal first
        chunk = {**head, "choices": [entry], **extra}
        if first and how.token_ids and kind == "chat.completion.chunk":
            chunk["prompt_token_ids"] = how.prompts[0]
        first = False
        return sse_event(chunk)

    for entry in opening_entries(kind, len(run.rows)):
        yield event(entry)
    try:
        async for deltas in batches:
            for entry in delta_entries(kind, run, deltas, how):
                yield event(entry)
    except APIError as exc:
        yield sse_event(exc.body())
        yield DONE
        return
    except Exception as exc:
        error = APIError(500, f"internal error: {type(exc).__name__}: {exc}",
                         type="server_error")
        yield sse_event(error.body())
        yield DONE
        return
    used = usage(how.prompts, run.choices())
    if on_usage is not None:
        on_usage(used)
    if include_usage:
        yield sse_event({**head, "choices": [], "usage": used})
    yield DONE
