"""Short explicit transactions and the mapping of SQLite failures to store errors: those of a
file being opened (`StoreError`, by `store_errors`) and those of the moment on a request path
(`StoreFault`, by `faults_typed`, which the writer and the readers run every statement under).

Connections run with `isolation_level=None` (autocommit): the sqlite3 module never opens a
transaction behind our back, so every write says where it begins and ends.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pager.store._errors import (
    StoreBusy,
    StoreCorrupt,
    StoreDamaged,
    StoreDenied,
    StoreError,
    StoreFault,
    StoreFull,
    StoreIOError,
    StoreUnwritable,
)

# Primary result codes (the low byte of an extended code) that mean "this user or this disk
# cannot write here" or "the file is damaged". Anything else (busy, constraint, misuse) is
# raised unchanged: it is not a property of the file.
_UNWRITABLE_CODES = frozenset(
    {sqlite3.SQLITE_PERM, sqlite3.SQLITE_READONLY, sqlite3.SQLITE_CANTOPEN}
)
_CORRUPT_CODES = frozenset({sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB})


def database_path(conn: sqlite3.Connection) -> Path:
    """The file behind the connection's main database, for error messages."""
    try:
        for _seq, name, file in conn.execute("PRAGMA database_list"):
            if name == "main":
                return Path(file)
    except sqlite3.Error:
        pass
    return Path("<unknown database>")


def translate_error(exc: sqlite3.Error, path: Path) -> StoreError | None:
    """The store error that `exc` means for the file at `path`, or None if it is not one."""
    code = getattr(exc, "sqlite_errorcode", None)
    if code is None:
        return None
    primary = code & 0xFF
    if primary in _UNWRITABLE_CODES:
        return StoreUnwritable(path, str(exc))
    if primary == sqlite3.SQLITE_FULL:
        return StoreUnwritable(path, str(exc), fix=f"free space on the disk holding {path.parent}")
    if primary in _CORRUPT_CODES:
        return StoreCorrupt(path, str(exc))
    return None


_DENIED = (
    "the broker may not write its database (permissions, or a read-only disk): make the state"
    " directory and its files writable by the broker's user, then retry"
)
#: SQLite's primary result codes for a database the broker cannot use right now: the fault
#: each is, and what to tell the caller. SQLITE_FULL is a full disk; SQLITE_IOERR a read or
#: write the system refused (a full disk, a file-size limit or a failing disk); SQLITE_BUSY a
#: lock another process held past the busy timeout.
_FAULTS: dict[int, tuple[type[StoreFault], str]] = {
    sqlite3.SQLITE_FULL: (
        StoreFull,
        "the disk holding Pager's state directory is full: free space on it, then retry",
    ),
    sqlite3.SQLITE_IOERR: (
        StoreIOError,
        "the disk holding Pager's state directory failed a read or write (it may be full or"
        " failing): free space on it or check it, then retry",
    ),
    sqlite3.SQLITE_BUSY: (
        StoreBusy,
        "another process holds the database's lock (a backup, a copy, another program): retry"
        " shortly, and if it lasts, stop whatever holds pager.db open",
    ),
    sqlite3.SQLITE_LOCKED: (StoreBusy, "the database is busy: retry shortly"),
    sqlite3.SQLITE_READONLY: (StoreDenied, _DENIED),
    sqlite3.SQLITE_PERM: (StoreDenied, _DENIED),
    sqlite3.SQLITE_CANTOPEN: (StoreDenied, _DENIED),
    sqlite3.SQLITE_CORRUPT: (
        StoreDamaged,
        "the database file is damaged: stop the broker (`pager exit`), then move pager.db"
        " aside or put a backup (pager.db.bak-N beside it) in its place",
    ),
}


def sqlite_fault(exc: sqlite3.Error, *, read_only: bool = False) -> StoreFault | None:
    """The fault `exc` is, by its SQLite result code; None for anything else (a constraint,
    a misuse: a bug or a domain rule, never the store's trouble). On a `read_only` connection
    a refused write is such a bug, not the disk's permissions."""
    code = getattr(exc, "sqlite_errorcode", None)
    found = None if code is None else _FAULTS.get(code & 0xFF)
    if found is None or (read_only and code is not None and code & 0xFF == sqlite3.SQLITE_READONLY):
        return None
    kind, hint = found
    return kind(f"the broker cannot use its database ({exc}); {hint}")


def as_fault(exc: BaseException) -> BaseException:
    """`exc` as the fault it is, if it is a SQLite failure of the store; else `exc` itself."""
    if isinstance(exc, sqlite3.Error):
        fault = sqlite_fault(exc)
        if fault is not None:
            fault.__cause__ = exc
            return fault
    return exc


@contextlib.contextmanager
def faults_typed(*, read_only: bool = False) -> Iterator[None]:
    """Re-raise a SQLite failure of the moment (full, I/O, busy, …) as its `StoreFault`."""
    try:
        yield
    except sqlite3.Error as exc:
        fault = sqlite_fault(exc, read_only=read_only)
        if fault is None:
            raise
        raise fault from exc


@contextlib.contextmanager
def store_errors(conn: sqlite3.Connection, path: Path | None = None) -> Iterator[None]:
    """Re-raise SQLite failures that are about the file as `StoreError`s."""
    try:
        yield
    except sqlite3.Error as exc:
        mapped = translate_error(exc, path if path is not None else database_path(conn))
        if mapped is None:
            raise
        raise mapped from exc


@contextlib.contextmanager
def immediate_transaction(conn: sqlite3.Connection) -> Iterator[None]:
    """`BEGIN IMMEDIATE` … `COMMIT`, rolled back if the body or the commit raises.

    IMMEDIATE takes the write lock up front, so a busy database fails (after busy_timeout) at
    BEGIN rather than half-way through the body. Inside an enclosing transaction (the
    checkpoint's group commit) it joins that one: the enclosing owner commits or rolls back.
    """
    if conn.in_transaction:
        yield
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException:
        rollback(conn)
        raise


def rollback(conn: sqlite3.Connection) -> None:
    """Roll back the open transaction, if any, on the way out of a failure."""
    if conn.in_transaction:
        # A failing ROLLBACK must not hide the error that caused it.
        with contextlib.suppress(sqlite3.Error):
            conn.execute("ROLLBACK")
