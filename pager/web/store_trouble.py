"""What a request is answered when the store failed under it: `unavailable`, with the fault's
own message (what is wrong, what to do: free the disk, fix permissions, retry), for every edge
(the /v1 routes, `/mcp` authentication and the MCP tools); the store is also marked degraded on
the broker's health board (pager/health.py).

Each backend raises its `StoreFault` where it ran the statement (pager/store/_errors.py); a
`StoreError` is a SQLite file that cannot be used (its permissions, its disk). Nothing else is
the store's trouble: it answers `internal`.
"""

from __future__ import annotations

from actors._runtime import CallTimeout
from pager.domain.errors import ErrorCode, PagerError
from pager.health import STORE, HealthBoard
from pager.store._errors import StoreError, StoreFault


def unavailable_cause(
    error: BaseException, *, board: HealthBoard | None = None
) -> PagerError | None:
    """`unavailable` naming what to do, if `error` is the store's fault (or one inside an
    exception group), or a call that timed out; None for any other failure. With `board`, a
    fault marks the store degraded with its message, until the store writes again."""
    fault = _fault_in(error)
    if fault is not None:
        if board is not None and getattr(fault, "degrades", True):
            board.degrade(STORE, str(fault))
        return PagerError(ErrorCode.UNAVAILABLE, str(fault))
    if isinstance(error, CallTimeout):
        return PagerError(
            ErrorCode.UNAVAILABLE,
            "the broker did not finish this request in time (its disk may be slow or stuck);"
            " retry shortly",
        )
    return None


def _fault_in(error: BaseException) -> StoreFault | StoreError | None:
    if isinstance(error, StoreFault | StoreError):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if (found := _fault_in(inner)) is not None:
                return found
    return None
