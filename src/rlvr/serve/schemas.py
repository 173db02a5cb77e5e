"""Request and response bodies of ``rlvr serve`` (OpenAI's completion and chat formats).

Requests are pydantic models with strict types (``"0.5"`` is not a number) that ignore
unknown fields; responses are plain dicts carrying OpenAI's ``usage``.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal, Union

from pydantic import BaseModel, ConfigDict, Field

from rlvr.serve.errors import bad_field

if TYPE_CHECKING:
    from rlvr.serve.server import ModelServer

MAX_N = 128
MAX_STOP = 4


class BaseRequest(BaseModel):
    """Fields shared by both endpoints (strict types: ``"0.5"`` is not a number)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    model: str | None = None
    n: int = Field(1, ge=1, le=MAX_N)
    temperature: float = Field(1.0, ge=0.0, allow_inf_nan=False)
    top_p: float = Field(1.0, gt=0.0, le=1.0, allow_inf_nan=False)
    top_k: int = Field(0, ge=-1)
    max_tokens: int | None = Field(None, ge=1)
    stop: Union[str, list[str], None] = None
    seed: int | None = None
    stream: bool | None = False
    logprobs: Union[bool, int, None] = None
    echo: bool | None = False


class CompletionRequest(BaseRequest):
    """Body of ``POST /v1/completions``: ``prompt`` is one string or a list of strings."""

    prompt: Union[str, list[str]]


class TextPart(BaseModel):
    """One ``{"type": "text", "text": ...}`` part of a message's content."""

    model_config = ConfigDict(strict=True, extra="ignore")

    type: Literal["text"]
    text: str


class ChatMessage(BaseModel):
    """One chat turn; ``content`` is a string or a list of text parts (joined)."""

    model_config = ConfigDict(strict=True, extra="ignore")

    role: Literal["system", "user", "assistant"]
    content: Union[str, list[TextPart]]

    def text(self) -> str:
        """The content as one string."""
        if isinstance(self.content, str):
            return self.content
        return "".join(part.text for part in self.content)


class ChatRequest(BaseRequest):
    """Body of ``POST /v1/chat/completions``; ``max_completion_tokens`` is accepted as an
    alias of ``max_tokens``."""

    messages: list[ChatMessage] = Field(min_length=1)
    max_completion_tokens: int | None = Field(None, ge=1)


@dataclass
class Choice:
    """One generated completion: ``text`` (stop string and special tokens removed),
    ``finish_reason`` (``stop`` or ``length``) and ``tokens`` (completion tokens counted)."""

    text: str
    finish_reason: str
    tokens: int


def stop_strings(stop: str | list[str] | None) -> list[str]:
    """The request's ``stop`` as a list of non-empty strings.

    Raises:
        APIError: 400 on an empty string or more than 4 strings.
    """
    stops = [stop] if isinstance(stop, str) else list(stop or [])
    if len(stops) > MAX_STOP:
        raise bad_field("stop", f"at most {MAX_STOP} stop strings, got {len(stops)}")
    if any(s == "" for s in stops):
        raise bad_field("stop", "stop strings must not be empty")
    return stops


def usage(prompts: list[list[int]], choices: list[Choice]) -> dict[str, int]:
    """OpenAI ``usage``: prompt tokens (each prompt once), completion tokens, total."""
    prompt_tokens = sum(len(p) for p in prompts)
    completion_tokens = sum(c.tokens for c in choices)
    return {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens}


def completion_response(server: ModelServer, prompts: list[list[int]], choices: list[Choice]
                        ) -> dict[str, Any]:
    """A ``text_completion`` object; choice ``index`` is ``prompt_index * n + sample``."""
    return {"id": f"cmpl-{uuid.uuid4().hex}", "object": "text_completion",
            "created": int(time.time()), "model": server.model_id,
            "choices": [{"index": i, "text": c.text, "logprobs": None,
                         "finish_reason": c.finish_reason} for i, c in enumerate(choices)],
            "usage": usage(prompts, choices)}


def chat_response(server: ModelServer, prompts: list[list[int]], choices: list[Choice]
                  ) -> dict[str, Any]:
    """A ``chat.completion`` object with one assistant message per choice."""
    return {"id": f"chatcmpl-{uuid.uuid4().hex}", "object": "chat.completion",
            "created": int(time.time()), "model": server.model_id,
            "choices": [{"index": i, "message": {"role": "assistant", "content": c.text},
                         "logprobs": None, "finish_reason": c.finish_reason}
                        for i, c in enumerate(choices)],
            "usage": usage(prompts, choices)}
