"""What a request is answered when the store failed under it: `unavailable`, naming what to do
(free the disk, fix permissions, retry), for every edge (the /v1 routes, `/mcp` authentication
and the MCP tools), and marks the store degraded on the broker's health board (pager/health.py)."""

from __future__ import annotations

from actors._runtime import CallTimeout
from pager.domain.errors import ErrorCode, PagerError
from pager.health import STORE, HealthBoard
from pager.store.trouble import store_trouble


def unavailable_cause(
    error: BaseException, *, board: HealthBoard | None = None
) -> PagerError | None:
    """`unavailable` naming what to do, if the store (its file or its disk) failed anywhere
    down `error`'s chain, or a call timed out; None for any other failure. With `board`, an
    `unavailable` answer also marks the store degraded with its message, until whoever sees
    the store write again clears it (`board.recover(STORE)`)."""
    found = _store_trouble(error)
    if found is not None and board is not None:
        board.degrade(STORE, found.message)
    return found


def _store_trouble(error: BaseException) -> PagerError | None:
    message = store_trouble(error)
    if message is not None:
        return PagerError(ErrorCode.UNAVAILABLE, message)
    if isinstance(error, CallTimeout):
        return PagerError(
            ErrorCode.UNAVAILABLE,
            "the broker did not finish this request in time (its disk may be slow or stuck);"
            " retry shortly",
        )
    return None
