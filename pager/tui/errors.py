"""The two ways a `/v1` call fails, as the TUI tells them apart."""

from __future__ import annotations


class Unreachable(Exception):
    """No usable answer from the broker (down, restarting, or the stream dropped): retry."""


class ApiError(Exception):
    """The broker answered with an error (`{error: {code, message}}`): show it."""

    def __init__(self, status: int, code: str, message: str) -> None:
        super().__init__(f"{message} ({code}, HTTP {status})" if message else f"{code} ({status})")
        self.status = status
        self.code = code
        self.message = message
