"""Sample completions from an OpenAI-compatible chat server (``rlvr serve``, vLLM, llama.cpp
server and the like) for ``rlvr eval --endpoint URL``.

One prompt is one conversation (a list of ``{"role", "content"}`` messages). For each prompt
the client asks ``POST /v1/chat/completions`` for ``n`` choices in one request; a server that
ignores ``n`` (returns fewer choices) is asked again for the rest, with ``seed + k`` on the
k-th extra request so a seeded server does not return the same sample again.

Robustness: every request has a timeout (seconds, ``httpx`` read / connect / write / pool
timeouts); connection errors, timeouts, HTTP 429 and 5xx are retried up to ``retries`` times
with exponential backoff (``backoff_s * 2**attempt``, or the server's ``Retry-After`` when
that is longer; at most 30 s); other 4xx answers fail at once (they will not change on
retry). Prompts are sampled concurrently on a thread pool of ``concurrency`` workers sharing one
connection pool, and results come back in prompt order.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

MAX_BACKOFF_S = 30.0
CHAT_PATH = "/v1/chat/completions"


@dataclass(frozen=True)
class EndpointSample:
    """One completion from the endpoint.

    Attributes:
        text: the assistant message's content ("" when the server returned none).
        tokens: completion tokens of this sample: exact when its response held one choice,
            else the response's ``usage.completion_tokens`` shared out over its choices in
            proportion to text length, none above ``max_tokens`` (an estimate; the per-prompt
            sum stays exact); None when the server reports no usage.
        seconds: wall-clock seconds of the request that produced it (retries and backoff
            included) divided by the number of choices it returned, so the per-prompt sum is
            the time spent on that prompt.
    """

    text: str
    tokens: int | None
    seconds: float


class EndpointError(RuntimeError):
    """The endpoint failed: a non-retryable answer (4xx other than 429, malformed JSON), or
    every attempt failed. The message names the URL, the prompt index and the last error."""


@dataclass(frozen=True)
class _Settings:
    url: str
    n: int
    temperature: float
    top_p: float
    max_tokens: int
    seed: int | None
    retries: int
    backoff_s: float
    model: str | None


def chat_url(url: str) -> str:
    """The chat completions URL for ``url``: a server root (``http://host:8000``), its ``/v1``,
    or the full ``.../v1/chat/completions`` (kept as is).

    Raises:
        ValueError: ``url`` is not an http(s) URL.
    """
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        raise ValueError(f"url: expected an http:// or https:// URL, got {url!r}")
    base = url.rstrip("/")
    if base.endswith("/chat/completions"):
        return base
    if base.endswith("/v1"):
        return base + "/chat/completions"
    return base + CHAT_PATH


def sample_endpoint(url: str, prompts: list[list[dict]], *, n: int, temperature: float,
                    top_p: float, max_tokens: int, seed: int | None, timeout_s: float,
                    retries: int, concurrency: int, model: str | None = None,
                    backoff_s: float = 0.5) -> list[list[EndpointSample]]:
    """``n`` chat completions for each prompt from the OpenAI-compatible server at ``url``.

    Args:
        url: server root, ``.../v1`` or the full chat completions URL (see :func:`chat_url`).
        prompts: one list of ``{"role": ..., "content": ...}`` messages per prompt.
        n: samples per prompt, >= 1.
        temperature: sampling temperature, >= 0.
        top_p: nucleus mass in (0, 1].
        max_tokens: completion length cap in tokens, >= 1.
        seed: sent as ``seed`` (``seed + k`` on the k-th extra request for one prompt); None
            sends no seed.
        timeout_s: per-request timeout in seconds, > 0.
        retries: extra attempts after a failed one (connection error, timeout, 429, 5xx), >= 0.
        concurrency: prompts in flight at once (worker threads and connections), >= 1.
        model: sent as ``model`` when given (vLLM requires the served name).
        backoff_s: first retry delay in seconds (doubling per attempt, at most 30 s), >= 0.

    Returns:
        ``result[i]`` holds the ``n`` samples of ``prompts[i]``, in prompt order.

    Raises:
        ValueError: an argument out of range (the message names it).
        EndpointError: a prompt could not be sampled (see :class:`EndpointError`).
        ImportError: ``httpx`` is not installed (``pip install 'rlvr[serve]'``).
    """
    try:
        import httpx  # optional dependency: httpx (rlvr[serve])
    except ImportError as exc:
        raise ImportError("sampling from an endpoint needs httpx: pip install 'rlvr[serve]'"
                          ) from exc

    _check_arguments(prompts, n, temperature, top_p, max_tokens, seed, timeout_s, retries,
                     concurrency, model, backoff_s)
    settings = _Settings(chat_url(url), n, float(temperature), float(top_p), max_tokens, seed,
                         retries, float(backoff_s), model)
    if not prompts:
        return []
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    with httpx.Client(timeout=httpx.Timeout(timeout_s), limits=limits) as client:
        if concurrency == 1 or len(prompts) == 1:
            return [_sample_prompt(client, settings, i, p) for i, p in enumerate(prompts)]
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="endpoint") as pool:
            futures = [pool.submit(_sample_prompt, client, settings, i, p)
                       for i, p in enumerate(prompts)]
            try:
                return [future.result() for future in futures]
            except BaseException:
                for future in futures:
                    future.cancel()
                raise


def _check_arguments(prompts, n, temperature, top_p, max_tokens, seed, timeout_s, retries,
                     concurrency, model, backoff_s) -> None:
    """Raise ValueError naming the first argument out of range."""
    def number(value) -> bool:
        return isinstance(value, (int, float)) and not isinstance(value, bool)

    def integer(value) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    checks = [
        ("n", integer(n) and n >= 1, "an int >= 1", n),
        ("temperature", number(temperature) and temperature >= 0, "a number >= 0",
         temperature),
        ("top_p", number(top_p) and 0 < top_p <= 1, "a number in (0, 1]", top_p),
        ("max_tokens", integer(max_tokens) and max_tokens >= 1, "an int >= 1", max_tokens),
        ("seed", seed is None or integer(seed), "an int or None", seed),
        ("timeout_s", number(timeout_s) and timeout_s > 0, "a number > 0", timeout_s),
        ("retries", integer(retries) and retries >= 0, "an int >= 0", retries),
        ("concurrency", integer(concurrency) and concurrency >= 1, "an int >= 1", concurrency),
        ("model", model is None or isinstance(model, str), "a string or None", model),
        ("backoff_s", number(backoff_s) and backoff_s >= 0, "a number >= 0", backoff_s),
    ]
    for name, ok, expected, value in checks:
        if not ok:
            raise ValueError(f"{name}: expected {expected}, got {value!r}")
    if not isinstance(prompts, (list, tuple)):
        raise ValueError(f"prompts: expected a list of message lists, got "
                         f"{type(prompts).__name__}")
    for i, messages in enumerate(prompts):
        _check_messages(i, messages)


def _check_messages(index: int, messages) -> None:
    if not isinstance(messages, (list, tuple)) or not messages:
        raise ValueError(f"prompts[{index}]: expected a non-empty list of messages, got "
                         f"{messages!r}")
    for j, message in enumerate(messages):
        if not (isinstance(message, dict) and isinstance(message.get("role"), str)
                and "content" in message):
            raise ValueError(f"prompts[{index}][{j}]: expected a dict with 'role' (str) and "
                             f"'content', got {message!r}")


def _sample_prompt(client, settings: _Settings, index: int, messages: Sequence[dict]
                   ) -> list[EndpointSample]:
    """All ``n`` samples of one prompt: one request, then more while choices are missing."""
    samples: list[EndpointSample] = []
    extra = 0
    while len(samples) < settings.n:
        want = settings.n - len(samples)
        seed = None if settings.seed is None else settings.seed + extra
        payload = _payload(settings, messages, want, seed)
        body, seconds = _post_with_retries(client, settings, index, payload)
        got = _samples(body, seconds, settings.url, index, settings.max_tokens)[:want]
        if not got:
            raise EndpointError(f"{settings.url}: prompt {index}: the response has no choices")
        samples.extend(got)
        extra += 1
    return samples


def _payload(settings: _Settings, messages: Sequence[dict], n: int, seed: int | None
             ) -> dict[str, Any]:
    payload: dict[str, Any] = {"messages": list(messages), "n": n,
                               "temperature": settings.temperature, "top_p": settings.top_p,
                               "max_tokens": settings.max_tokens}
    if seed is not None:
        payload["seed"] = seed
    if settings.model is not None:
        payload["model"] = settings.model
    return payload


def _post_with_retries(client, settings: _Settings, index: int, payload: dict
                       ) -> tuple[dict, float]:
    """POST ``payload``; return ``(JSON body, seconds including retries)``.

    Raises:
        EndpointError: a non-retryable answer, or ``retries + 1`` failed attempts.
    """
    import httpx  # optional dependency: httpx (rlvr[serve])

    start = time.perf_counter()
    last, last_retry_after = "no attempt made", None
    for attempt in range(settings.retries + 1):
        if attempt:
            time.sleep(_delay(settings.backoff_s, attempt, last_retry_after))
        last_retry_after = None
        try:
            response = client.post(settings.url, json=payload)
        except httpx.TimeoutException as exc:
            last = f"timed out ({type(exc).__name__})"
            continue
        except httpx.TransportError as exc:
            last = f"connection error ({type(exc).__name__}: {exc})"
            continue
        if response.status_code == 429 or response.status_code >= 500:
            last = f"HTTP {response.status_code}: {_error_text(response)}"
            last_retry_after = _retry_after(response)
            continue
        if response.status_code >= 400:
            raise EndpointError(f"{settings.url}: prompt {index}: HTTP {response.status_code}: "
                                f"{_error_text(response)}")
        return _json(response, settings.url, index), time.perf_counter() - start
    raise EndpointError(f"{settings.url}: prompt {index}: failed after {settings.retries + 1} "
                        f"attempt(s); last error: {last}")


def _delay(backoff_s: float, attempt: int, retry_after: float | None) -> float:
    """Seconds to wait before retry ``attempt`` (1-based): ``backoff_s * 2**(attempt-1)``, or
    the server's Retry-After when that is longer, at most ``MAX_BACKOFF_S``."""
    delay = backoff_s * 2 ** (attempt - 1)
    if retry_after is not None:
        delay = max(delay, retry_after)
    return min(delay, MAX_BACKOFF_S)


def _retry_after(response) -> float | None:
    try:
        value = float(response.headers.get("retry-after", ""))
    except ValueError:
        return None
    return value if value >= 0 else None


def _error_text(response) -> str:
    """The OpenAI-style ``error.message`` of a response, else its first 200 characters."""
    try:
        error = response.json().get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
    except (ValueError, AttributeError):
        pass
    return response.text[:200] or response.reason_phrase


def _json(response, url: str, index: int) -> dict:
    try:
        body = response.json()
    except ValueError as exc:
        raise EndpointError(f"{url}: prompt {index}: the response is not JSON "
                            f"({response.text[:200]!r})") from exc
    if not isinstance(body, dict) or not isinstance(body.get("choices"), list):
        raise EndpointError(f"{url}: prompt {index}: the response has no 'choices' list")
    return body


def _samples(body: dict, seconds: float, url: str, index: int, max_tokens: int
             ) -> list[EndpointSample]:
    """The response's choices as samples (tokens and seconds shared out, see EndpointSample)."""
    texts = [_choice_text(choice, url, index) for choice in body["choices"]]
    if not texts:
        return []
    total = (body.get("usage") or {}).get("completion_tokens")
    tokens = (_share(total, texts, max_tokens) if isinstance(total, int)
              else [None] * len(texts))
    per = seconds / len(texts)
    return [EndpointSample(text, count, per) for text, count in zip(texts, tokens)]


def _choice_text(choice, url: str, index: int) -> str:
    if not isinstance(choice, dict):
        raise EndpointError(f"{url}: prompt {index}: a choice is not an object: {choice!r}")
    message = choice.get("message")
    if isinstance(message, dict):
        return message.get("content") or ""
    return choice.get("text") or ""  # a completions-style choice


def _share(total: int, texts: list[str], cap: int) -> list[int]:
    """Split ``total`` tokens over ``texts`` in proportion to their lengths, no part above
    ``cap`` (max_tokens; the excess goes to the others), rounded by largest remainder so the
    parts sum to ``total``. No cap when ``total`` exceeds ``cap`` per text (the server then
    broke its own limit)."""
    weights = [len(t) + 1e-6 for t in texts]  # empty texts share what the others cannot take
    limit = cap if total <= cap * len(texts) else None
    exact = [0.0] * len(texts)
    free, left = list(range(len(texts))), float(total)
    while free:
        mass = sum(weights[i] for i in free)
        over = [i for i in free if limit is not None and left * weights[i] / mass > limit]
        if not over:
            for i in free:
                exact[i] = left * weights[i] / mass
            break
        for i in over:
            exact[i], left = float(limit), left - limit
        free = [i for i in free if i not in over]
    parts = [int(x) for x in exact]
    order = sorted(range(len(texts)), key=lambda i: exact[i] - parts[i], reverse=True)
    for i in order[: max(0, total - sum(parts))]:
        parts[i] += 1
    return parts
