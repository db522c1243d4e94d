"""What a request is answered when the store failed under it: `unavailable`, with the fault's
own message (what is wrong, what to do: free the disk, fix permissions, retry), for every edge
(the /v1 routes, `/mcp` authentication and the MCP tools); the store is also marked degraded on
the broker's health board (pager/health.py).

Each backend raises its `StoreFault` where it ran the statement (pager/store/_errors.py); a
`StoreError` is a SQLite file that cannot be used (its permissions, its disk): both are the
domain's `Unavailable`, so the edge knows them without knowing the store. A call that got no
answer in time is a `TimeoutError`. Nothing else is the store's trouble: it answers `internal`.
"""

from __future__ import annotations

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.faults import Unavailable
from pager.health import STORE, HealthBoard


def unavailable_cause(
    error: BaseException, *, board: HealthBoard | None = None
) -> PagerError | None:
    """`unavailable` naming what to do, if `error` is the store's fault (or one inside an
    exception group), or a call that timed out; None for any other failure. With `board`, a
    fault marks the store degraded with its message, until the store writes again."""
    fault = _fault_in(error)
    if fault is not None:
        if board is not None and fault.degrades:
            board.degrade(STORE, str(fault))
        return PagerError(ErrorCode.UNAVAILABLE, str(fault))
    if isinstance(error, TimeoutError):
        return PagerError(
            ErrorCode.UNAVAILABLE,
            "the broker did not finish this request in time (its disk may be slow or stuck);"
            " retry shortly",
        )
    return None


def _fault_in(error: BaseException) -> Unavailable | None:
    if isinstance(error, Unavailable):
        return error
    if isinstance(error, BaseExceptionGroup):
        for inner in error.exceptions:
            if (found := _fault_in(inner)) is not None:
                return found
    return None
