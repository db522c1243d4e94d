"""Whether a failure is the store's (its file or its disk), and what to tell about it: an
infrastructure error (ARCHITECTURE.md, "Errors by kind") that answers a caller `unavailable`,
marks the store degraded and is retried, never a bug that should crash an actor.

The SQLite backend's result codes stay in here, so nothing outside `pager/store` needs them."""

from __future__ import annotations

import sqlite3

from pager.store._errors import StoreError, StoreUnavailable

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


def store_trouble(error: BaseException) -> str | None:
    """What to tell about the store's failure anywhere down `error`'s chain (actor crashes and
    timeouts wrap the store's error as their cause, a failing rollback as its context); None
    when the store is not the cause."""
    pending, seen = [error], set()
    while pending:
        exc = pending.pop()
        if id(exc) in seen:
            continue
        seen.add(id(exc))
        if isinstance(exc, StoreError | StoreUnavailable):
            return str(exc)
        if isinstance(exc, sqlite3.Error):
            code = getattr(exc, "sqlite_errorcode", None)
            hint = None if code is None else _STORE_TROUBLE.get(code & 0xFF)
            if hint is not None:
                return f"the broker cannot use its database ({exc}); {hint}"
        if isinstance(exc, BaseExceptionGroup):
            pending.extend(exc.exceptions)
        pending.extend(e for e in (exc.__cause__, exc.__context__) if e is not None)
    return None
