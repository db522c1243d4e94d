"""The size limit of a message body (SPEC §9), and how a body over it is refused: the broker
and the command line (which checks before sending) say the same words.

Stdlib only: `pager send` imports this on every send."""

from __future__ import annotations

#: The default of `[limits] body_cap` in config.toml: the most bytes (UTF-8) a body may have.
BODY_CAP = 32 * 1024


def body_size(body: str) -> int:
    """The body's length in UTF-8 bytes, as the limit counts it."""
    return len(body.encode("utf-8", "surrogatepass"))


def oversized_body(size: int, cap: int) -> str:
    return f"the body is {size} bytes; the limit is {cap}. Send less, or split it"
