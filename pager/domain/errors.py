"""The protocol errors of SPEC §8: one exception carrying `{code, message, …}` to every edge."""

from __future__ import annotations

import enum
from typing import Any

from pager.domain.hints import Edge, Hint, with_hint


class ErrorCode(enum.StrEnum):
    VALIDATION_FAILED = "validation_failed"
    UNSUPPORTED_VERSION = "unsupported_version"
    OVERSIZED_CONTENT = "oversized_content"
    UNKNOWN_RECIPIENT = "unknown_recipient"
    RECIPIENT_ALIAS_CHANGED = "recipient_alias_changed"
    ALIAS_CONFLICT = "alias_conflict"
    CONFLICT = "conflict"
    EXPIRED = "expired"
    ENDED = "ended"
    RATE_LIMITED = "rate_limited"
    HOP_LIMIT = "hop_limit"
    UNAUTHENTICATED = "unauthenticated"
    NOT_FOUND = "not_found"
    UNAVAILABLE = "unavailable"
    INTERNAL = "internal"


#: The HTTP status each code answers with on plain HTTP routes.
HTTP_STATUS: dict[ErrorCode, int] = {
    ErrorCode.VALIDATION_FAILED: 400,
    ErrorCode.UNSUPPORTED_VERSION: 400,
    ErrorCode.OVERSIZED_CONTENT: 413,
    ErrorCode.UNKNOWN_RECIPIENT: 404,
    ErrorCode.RECIPIENT_ALIAS_CHANGED: 409,
    ErrorCode.ALIAS_CONFLICT: 409,
    ErrorCode.CONFLICT: 409,
    ErrorCode.EXPIRED: 401,
    ErrorCode.ENDED: 401,
    ErrorCode.RATE_LIMITED: 429,
    ErrorCode.HOP_LIMIT: 409,
    ErrorCode.UNAUTHENTICATED: 401,
    ErrorCode.NOT_FOUND: 404,
    ErrorCode.UNAVAILABLE: 503,
    ErrorCode.INTERNAL: 500,
}


class PagerError(Exception):
    """A failure the caller should see: a code, a message saying what is wrong, the key of
    what to do next (`hint`, said by each edge in its own words: pager/domain/hints.py), and
    details."""

    def __init__(
        self, code: ErrorCode, message: str, *, hint: Hint | None = None, **details: Any
    ) -> None:
        super().__init__(with_hint(message, hint, Edge.HTTP))
        self.code = code
        self.message = message
        self.hint = hint
        self.details = details

    def text(self, edge: Edge = Edge.HTTP) -> str:
        """The message and what to do next, as `edge` says it."""
        return with_hint(self.message, self.hint, edge)

    def to_json(self, edge: Edge = Edge.HTTP) -> dict[str, Any]:
        """The error as `edge` answers it, with the hint's key, so that a client (the command
        line speaks /v1) can say it in its own words."""
        answer: dict[str, Any] = {"code": self.code.value, "message": self.text(edge)}
        if self.hint is not None:
            answer["hint"] = self.hint.value
        return {**answer, **self.details}

    @property
    def http_status(self) -> int:
        return HTTP_STATUS[self.code]

    def __repr__(self) -> str:
        return f"PagerError({self.code.value!r}, {self.text()!r})"
