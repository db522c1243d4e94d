"""Short explicit transactions and the mapping of SQLite failures to store errors.

Connections run with `isolation_level=None` (autocommit): the sqlite3 module never opens a
transaction behind our back, so every write says where it begins and ends.
"""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from pathlib import Path

from pager.store._errors import StoreCorrupt, StoreError, StoreUnwritable

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
