"""Request and response bodies of ``rlvr serve`` (OpenAI's completion and chat formats).

Requests are pydantic models with strict types (``"0.5"`` is not a number); fields no endpoint
declares are collected (:func:`unknown_fields`) and refused unless the server ignores them.
OpenAI and vLLM fields that would change the output but are not implemented here
(:data:`REFUSED_FIELDS`) are declared so that a non-default value is refused (400) instead of
silently ignored. Responses are plain dicts carrying OpenAI's ``usage``; their log-probs are
rendered by :mod:`rlvr.serve.logprobs`, their streamed form by :mod:`rlvr.serve.stream`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rlvr.serve.errors import bad_field

MAX_N = 128
# Most top log-probs per position a request may ask for (vLLM's default ``max_logprobs``; the
# OpenAI chat API allows 20 too).
MAX_TOP_LOGPROBS = 20
INT64 = (-2**63, 2**63 - 1)


class StreamOptions(BaseModel):
    """``stream_options``: ``include_usage`` adds a last chunk carrying ``usage``."""

    model_config = ConfigDict(strict=True, extra="ignore")

    include_usage: bool | None = False
    continuous_usage_stats: bool | None = False


class BaseRequest(BaseModel):
    """Fields shared by both endpoints (strict types: ``"0.5"`` is not a number). Each
    endpoint's request names its log-prob fields and answers ``top_logprobs_asked()``: the
    number of top log-probs per position asked for (0: only the sampled token's), or None
    when no log-probs are asked for. Fields not declared here land in ``model_extra``
    (refused by default, :func:`unknown_fields`)."""

    model_config = ConfigDict(strict=True, extra="allow")

    model: str | None = None
    n: int = Field(1, ge=1, le=MAX_N)
    temperature: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int = Field(0, ge=-1)
    min_p: float = Field(0.0, ge=0.0, le=1.0, allow_inf_nan=False)
    max_tokens: int | None = Field(None, ge=0)
    min_tokens: int = Field(0, ge=0)
    stop: str | list[str] | None = None
    stop_token_ids: list[int] | None = None
    include_stop_str_in_output: bool = False
    ignore_eos: bool = False
    seed: int | None = Field(None, ge=INT64[0], le=INT64[1])
    stream: bool | None = False
    stream_options: StreamOptions | None = None
    repetition_penalty: float = Field(1.0, gt=0.0, allow_inf_nan=False)
    presence_penalty: float | None = Field(0.0, ge=-2.0, le=2.0, allow_inf_nan=False)
    frequency_penalty: float | None = Field(0.0, ge=-2.0, le=2.0, allow_inf_nan=False)
    logit_bias: dict[str, float] | None = None
    allowed_token_ids: list[int] | None = None
    bad_words: list[str] | None = None
    prompt_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    skip_special_tokens: bool = True
    truncate_prompt_tokens: int | None = Field(None, ge=1)
    add_special_tokens: bool | None = None
    # vLLM's extensions: log-prob tokens as "token_id:<id>"; the prompt's and the choices'
    # token ids in the response.
    return_tokens_as_token_ids: bool | None = False
    return_token_ids: bool | None = False
    # no effect on the output
    user: str | None = None
    request_id: str | None = None
    # refused unless they hold their no-op value (see REFUSED_FIELDS)
    echo: Any = None
    tools: Any = None
    tool_choice: Any = None
    functions: Any = None
    function_call: Any = None
    response_format: Any = None
    guided_json: Any = None
    guided_regex: Any = None
    guided_choice: Any = None
    guided_grammar: Any = None
    guided_decoding_backend: Any = None
    guided_whitespace_pattern: Any = None
    structured_outputs: Any = None
    use_beam_search: Any = None
    length_penalty: Any = None
    logits_processors: Any = None
    best_of: Any = None
    suffix: Any = None


class CompletionRequest(BaseRequest):
    """Body of ``POST /v1/completions``: ``prompt`` is a string, a list of strings, a list
    of token ids or a list of such lists; ``logprobs: k`` (0..20) reports each token's
    log-prob and the k most likely tokens; ``echo`` puts the prompt before each choice's
    text (and its tokens' log-probs before the completion's)."""

    prompt: str | list[str] | list[int] | list[list[int]]
    logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    echo: bool | None = False

    def top_logprobs_asked(self) -> int | None:
        """``logprobs`` (None: none asked for)."""
        return self.logprobs


class TextPart(BaseModel):
    """One ``{"type": "text", "text": ...}`` part of a message's content."""

    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One chat turn; ``content`` is a string or a list of text parts (joined)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: str | list[TextPart]

    def text(self) -> str:
        """The content as one string."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatRequest(BaseRequest):
    """Body of ``POST /v1/chat/completions``; ``max_completion_tokens`` takes precedence over
    ``max_tokens``; ``logprobs: true`` reports each token's log-prob and ``top_logprobs: k``
    (0..20, needs ``logprobs``) the k most likely tokens; ``chat_template_kwargs``,
    ``add_generation_prompt`` and ``continue_final_message`` go to the chat template."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)
    logprobs: bool | None = False
    top_logprobs: int | None = Field(None, ge=0, le=MAX_TOP_LOGPROBS)
    chat_template_kwargs: dict[str, Any] | None = None
    add_generation_prompt: bool = True
    continue_final_message: bool = False
    chat_template: Any = None

    def top_logprobs_asked(self) -> int | None:
        """``top_logprobs`` (default 0) when ``logprobs`` is true, else None.

        Raises:
            APIError: 400 naming ``top_logprobs`` when it is given without ``logprobs``.
        """
        if not self.logprobs:
            if self.top_logprobs:
                raise bad_field("top_logprobs", "needs logprobs: true")
            return None
        return self.top_logprobs or 0


_GUIDED = "guided decoding / structured outputs are not supported by rlvr serve"
# field -> (its no-op values, why it is refused otherwise)
REFUSED_FIELDS: dict[str, tuple[tuple[Any, ...], str]] = {
    "tools": ((None, []), "tool calling is not supported by rlvr serve (rlvr's environments "
                          "parse tool calls from the text)"),
    "tool_choice": ((None, "none"), "tool calling is not supported by rlvr serve"),
    "functions": ((None, []), "function calling is not supported by rlvr serve"),
    "function_call": ((None, "none"), "function calling is not supported by rlvr serve"),
    "response_format": ((None, {"type": "text"}), "only the text response format is "
                                                  "supported by rlvr serve"),
    **dict.fromkeys(("guided_json", "guided_regex", "guided_choice", "guided_grammar",
                     "guided_decoding_backend", "guided_whitespace_pattern",
                     "structured_outputs"), ((None,), _GUIDED)),
    "use_beam_search": ((None, False), "beam search is not supported by rlvr serve"),
    "length_penalty": ((None, 1, 1.0), "length_penalty (beam search) is not supported by "
                                       "rlvr serve"),
    "logits_processors": ((None, []), "custom logits processors are not supported by "
                                      "rlvr serve"),
    "best_of": ((None, 1), "best_of is not supported by rlvr serve; send n"),
    "suffix": ((None, ""), "suffix is not supported by rlvr serve"),
    "chat_template": ((None,), "a request's own chat template is not accepted by rlvr "
                               "serve; the model's template is used"),
}


def refuse_unsupported(request: BaseRequest) -> None:
    """Refuse a request whose :data:`REFUSED_FIELDS` hold anything but their no-op values,
    ``echo`` on chat, ``stream_options`` without ``stream`` and ``echo`` with ``stream``.

    Raises:
        APIError: 400 naming the first such field.
    """
    for name, (no_ops, message) in REFUSED_FIELDS.items():
        value = getattr(request, name, None)
        if not any(_same_kind(value, ok) and value == ok for ok in no_ops):
            raise bad_field(name, f"{message}, got {value!r}")
    if isinstance(request, ChatRequest) and request.echo not in (None, False):
        raise bad_field("echo", f"echo is only supported on /v1/completions, got "
                                f"{request.echo!r}")
    if request.stream_options is not None and not request.stream:
        raise bad_field("stream_options", "only allowed with stream: true")
    if request.stream and request.echo:
        raise bad_field("echo", "echo is not supported with stream: true")


def unknown_fields(request: BaseModel) -> list[str]:
    """The request's top-level fields that no endpoint declares, sorted."""
    return sorted(request.model_extra or {})


def _same_kind(value: Any, other: Any) -> bool:
    """Numbers are of one kind (``0.0`` is ``0``, ``True`` is not ``1``), else same type."""
    def number(x):
        return isinstance(x, (int, float)) and not isinstance(x, bool)
    return (number(value) and number(other)) or type(value) is type(other)


@dataclass
class Choice:
    """One generated completion.

    Attributes:
        text: the decoded text (stop string and special tokens removed).
        finish_reason: ``stop`` or ``length``.
        token_ids: the completion's tokens up to the one that ended it (a stop token the
            model emitted included; when a stop string cut the text, up to the token that
            completed it): the tokens counted in ``usage``.
        prompt_index: which prompt of the request it continues.
        pieces: the text each token adds, ``"".join(pieces) == text`` (the text of a token
            that ends inside a multi-byte character comes with the token completing it), or
            None when not asked for.
        logprobs: each token's reported log-prob (:mod:`rlvr.serve.logprobs`), or None.
        top_logprobs: per token, the ``(token id, log-prob)`` of the k most likely tokens,
            most likely first, or None.
        stop_reason: what stopped it (vLLM's ``stop_reason``): the stop string, the id of a
            ``stop_token_ids`` token, or None (end of sequence, length).
    """

    text: str
    finish_reason: str
    token_ids: list[int]
    prompt_index: int = 0
    pieces: list[str] | None = None
    logprobs: list[float] | None = None
    top_logprobs: list[list[tuple[int, float]]] | None = None
    stop_reason: int | str | None = None

    @property
    def tokens(self) -> int:
        """Completion tokens counted in ``usage``."""
        return len(self.token_ids)


def stop_strings(stop: str | list[str] | None) -> list[str]:
    """The request's ``stop`` as a list of non-empty strings (any number of them).

    Raises:
        APIError: 400 on an empty string.
    """
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if any(s == "" for s in stops):
        raise bad_field("stop", "stop strings must not be empty")
    return stops
