"""Errors of ``rlvr serve``, answered as OpenAI-style JSON: :class:`APIError` and the 400s made
from bad fields and from pydantic's validation errors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


class APIError(Exception):
    """An error answered as OpenAI-style JSON.

    Args:
        status: HTTP status code (400 bad field, 404 unknown model, 429 busy, ...).
        message: human-readable text; for a bad field it starts with the field's name.
        param: the offending field (dotted path), or None.
        type: OpenAI error type (``invalid_request_error``, ``rate_limit_error``, ...).
        code: optional machine-readable code (e.g. ``model_not_found``).
    """

    def __init__(self, status: int, message: str, *, param: str | None = None,
                 type: str = "invalid_request_error", code: str | None = None):
        super().__init__(message)
        self.status, self.message, self.param, self.type, self.code = (
            status, message, param, type, code)

    def body(self) -> dict[str, Any]:
        """The JSON body: ``{"error": {"message", "type", "param", "code"}}``."""
        return {"error": {"message": self.message, "type": self.type, "param": self.param,
                          "code": self.code}}


def bad_field(param: str, message: str) -> APIError:
    """A 400 error naming ``param``: ``"<param>: <message>"``."""
    return APIError(400, f"{param}: {message}", param=param)


def validation_error(errors: Sequence[dict]) -> APIError:
    """A pydantic validation error as a 400 naming its field (dotted path, e.g.
    ``messages.0.role``). Of several errors (a value failing every member of a union) the
    one reaching deepest into the value is reported: ``prompt.0`` for ``"prompt": [1]``."""
    errors = list(errors) or [{"loc": ("body",), "msg": "invalid request"}]
    paths = [_field_path(error) for error in errors]
    deepest = max(range(len(errors)), key=lambda i: len(paths[i]))
    first, param = errors[deepest], ".".join(paths[deepest]) or "body"
    kind = first.get("type", "")
    if kind == "json_invalid":
        reason = first.get("ctx", {}).get("error", "parse error")
        return bad_field("body", f"invalid JSON: {reason}")
    if kind == "missing":
        return bad_field(param, "required field is missing")
    if param == "body":
        return bad_field("body", "expected a JSON object (Content-Type: application/json)")
    got = first.get("input")
    return bad_field(param, f"{first.get('msg', 'invalid value')}, got {got!r}")


def _field_path(error: dict) -> list[str]:
    """The error's location without ``body`` and without the type tags pydantic adds for
    union members (``prompt.list[str].0`` -> ``prompt.0``)."""
    return [str(part) for part in error.get("loc", ())
            if part != "body" and not _is_type_tag(str(part))]


def _is_type_tag(part: str) -> bool:
    return part in {"str", "int", "float", "bool", "none", "TextPart"} or \
        part.startswith(("list[", "dict[", "function-", "literal["))
