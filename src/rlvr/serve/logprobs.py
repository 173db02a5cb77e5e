"""Log-probs in ``rlvr serve``'s responses, in the two shapes of the OpenAI API.

Chat (``logprobs: true``, ``top_logprobs: k``): ``{"content": [entry, ...]}``, one entry per
completion token, ``{"token", "logprob", "bytes", "top_logprobs": [{"token", "logprob",
"bytes"}, ... k]}``.

Completions (``logprobs: k``): ``{"tokens": [...], "token_logprobs": [...], "top_logprobs":
[{token: logprob, ...}, ...], "text_offset": [...]}``; as in OpenAI's API, each position's
``top_logprobs`` holds the k most likely tokens *and* the sampled one (up to k + 1 entries;
tokens of the same text collapse into one key, as a dict must). ``text_offset`` is where each
token's text starts in the choice's ``text``.

The values are the engine's own (:mod:`rlvr.rollout.reported_logprobs`), computed from the
same logits as its training log-probs (the torch engine: the sampler's logits); a token
string is ``tokenizer.decode([id])`` (special tokens kept), or ``"token_id:<id>"`` with
vLLM's ``return_tokens_as_token_ids``. A log-prob of ``-inf`` (a token the model rules out)
is sent as -9999.0, as vLLM does, since JSON has no infinity.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from rlvr.serve.schemas import Choice

# JSON has no -Infinity; vLLM sends this instead.
FLOOR_LOGPROB = -9999.0


class TokenNames:
    """Token id -> the string a log-prob entry shows (cached per request).

    Args:
        decode: ``decode(id) -> str``, one token's text (special tokens kept).
        as_token_ids: render ``"token_id:<id>"`` instead (vLLM's
            ``return_tokens_as_token_ids``).
    """

    def __init__(self, decode: Callable[[int], str], as_token_ids: bool = False):
        self._decode = decode
        self.as_token_ids = as_token_ids
        self._cache: dict[int, str] = {}

    def __call__(self, token_id: int) -> str:
        name = self._cache.get(token_id)
        if name is None:
            name = f"token_id:{token_id}" if self.as_token_ids else self._decode(token_id)
            self._cache[token_id] = name
        return name


def json_logprob(value: float) -> float:
    """``value`` as JSON can carry it: -inf becomes :data:`FLOOR_LOGPROB`.

    Raises:
        ValueError: ``value`` is NaN or +inf (no log-prob is).
    """
    if value == -math.inf:
        return FLOOR_LOGPROB
    if not math.isfinite(value):
        raise ValueError(f"log-prob {value!r} is not a log-probability")
    return value


def _entry(name: str, value: float) -> dict[str, Any]:
    return {"token": name, "logprob": json_logprob(value), "bytes": list(name.encode("utf-8"))}


def chat_logprobs(choice: Choice, names: TokenNames, start: int = 0, stop: int | None = None
                  ) -> dict[str, Any]:
    """A chat choice's ``logprobs`` over its tokens ``[start, stop)`` (all by default; one
    token per streamed chunk).

    Raises:
        ValueError: ``choice`` carries no log-probs.
    """
    values, tops = _reported(choice)
    content = []
    for i in range(start, len(choice.token_ids) if stop is None else stop):
        entry = _entry(names(choice.token_ids[i]), values[i])
        entry["top_logprobs"] = [_entry(names(t), v) for t, v in tops[i]]
        content.append(entry)
    return {"content": content}


def completion_logprobs(choice: Choice, names: TokenNames, start: int = 0,
                        stop: int | None = None) -> dict[str, Any]:
    """A completion choice's ``logprobs`` over its tokens ``[start, stop)``; ``text_offset``
    counts from the start of the choice's text (``choice.pieces`` is needed).

    Raises:
        ValueError: ``choice`` carries no log-probs or no pieces.
    """
    values, tops = _reported(choice)
    if choice.pieces is None:
        raise ValueError("completion log-probs need the choice's text pieces")
    stop = len(choice.token_ids) if stop is None else stop
    offset = sum(len(p) for p in choice.pieces[:start])
    out: dict[str, list] = {"tokens": [], "token_logprobs": [], "top_logprobs": [],
                            "text_offset": []}
    for i in range(start, stop):
        name = names(choice.token_ids[i])
        top = {names(t): json_logprob(v) for t, v in tops[i]}
        top.setdefault(name, json_logprob(values[i]))
        out["tokens"].append(name)
        out["token_logprobs"].append(json_logprob(values[i]))
        out["top_logprobs"].append(top)
        out["text_offset"].append(offset)
        offset += len(choice.pieces[i])
    return out


def _reported(choice: Choice) -> tuple[list[float], list[list[tuple[int, float]]]]:
    if choice.logprobs is None:
        raise ValueError("the choice carries no log-probs (the request asked for none)")
    tops = choice.top_logprobs or [[] for _ in choice.token_ids]
    return choice.logprobs, tops
