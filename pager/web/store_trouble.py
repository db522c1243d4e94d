"""What a request is answered when the store failed under it: `unavailable`, naming what to do
(free the disk, fix permissions, retry), for every edge (the /v1 routes, `/mcp` authentication
and the MCP tools), and marks the store degraded on the broker's health board (pager/health.py)."""

from __future__ import annotations

import sqlite3

from actors._runtime import CallTimeout
from pager.domain.errors import ErrorCode, PagerError
from pager.health import STORE, HealthBoard
from pager.store import StoreError

_PERMISSIONS = (
    "the broker may not write its database (permissions, or a read-only disk): make the state"
    " directory and its files writable by the broker's user, then retry"
)
#: SQLite's primary result codes for a database the broker cannot use right now, with what
#: to tell the caller. SQLITE_FULL is a full disk; SQLITE_IOERR a read or write the system
#: refused (a full disk, a file-size limit or a failing disk).
_STORE_TROUBLE: dict[int, str] = {
    sqlite3.SQLITE_FULL: "the disk holding Pager's state directory is full: free space on it,"
    " then retry",
    sqlite3.SQLITE_IOERR: "the disk holding Pager's state directory failed a read or write (it"
    " may be full or failing): free space on it or check it, then retry",
    sqlite3.SQLITE_READONLY: _PERMISSIONS,
    sqlite3.SQLITE_PERM: _PERMISSIONS,
    sqlite3.SQLITE_CANTOPEN: _PERMISSIONS,
    sqlite3.SQLITE_CORRUPT: "the database file is damaged: stop the broker (`pager exit`), then"
    " move pager.db aside or put a backup (pager.db.bak-N beside it) in its place",
    sqlite3.SQLITE_BUSY: "the database is busy: retry shortly",
    sqlite3.SQLITE_LOCKED: "the database is busy: retry shortly",
}


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
    """Actor crashes and timeouts wrap the store's error as their cause, and a failing
    rollback as its context, so the whole chain is searched."""
    pending, seen = [error], set()
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, StoreError):
            return PagerError(ErrorCode.UNAVAILABLE, str(exc))
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)
            hint = None if code is None else _STORE_TROUBLE.get(code & 0xFF)
            if hint is not None:
                return PagerError(
                    ErrorCode.UNAVAILABLE, f"the broker cannot use its database ({exc}); {hint}"
                )
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        pending.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)
    if isinstance(error, CallTimeout):
        return PagerError(
            ErrorCode.UNAVAILABLE,
            "the broker did not finish this request in time (its disk may be slow or stuck);"
            " retry shortly",
        )
    return None
