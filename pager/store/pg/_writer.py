"""The PostgreSQL store's writer and readers, as the ports expect them (`write`, `lookup`,
`read`): each call runs the store's statements (pager/store/_conn.py) in one transaction on a
connection of its own kind, so a read never waits behind a write's transaction.

First step of the backend (issue 14): one connection per kind, each call one at a time, run in
a worker thread (or inline, for tests on trio's mock clock). Still to come: a small pool for
writes, a lookup path that does not block the event loop for a network round trip, the
database's clock for deadlines, and LISTEN/NOTIFY wakes across hosts.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
import trio

from pager.config import StoreConfig
from pager.store._conn import Conn
from pager.store.pg._conn import PgConn
from pager.store.pg._database import connect

T = TypeVar("T")


class _Connection:
    """One connection, used by one call at a time, each call its own transaction."""

    def __init__(self, store: StoreConfig, name: str) -> None:
        self._store = store
        self._name = name
        self._raw: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()

    def run(self, fn: Callable[[Conn], T], *, read_only: bool = False) -> T:
        with self._lock:
            if self._raw is None or self._raw.closed:
                self._raw = connect(self._store, application_name=f"pager {self._name}")
            raw = self._raw
            with raw.transaction():
                if read_only:  # one snapshot for all of `fn`'s statements, as SQLite's reads
                    raw.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
                return fn(PgConn(raw))

    def close(self) -> None:
        with self._lock:
            if self._raw is not None:
                self._raw.close()
                self._raw = None


class PgWriter:
    """`write(fn)`: `fn` in a read-write transaction; `lookup(fn)`/`read(fn)`: in a read-only
    one on another connection. `inline` runs them on the event loop (tests on the mock clock,
    where a worker thread would let the clock jump)."""

    def __init__(self, store: StoreConfig, *, inline: bool = False) -> None:
        self._writes = _Connection(store, "writer")
        self._reads = _Connection(store, "reader")
        self._inline = inline

    async def write(self, fn: Callable[[Conn], T], *, heavy: bool = False) -> T:
        if self._inline:
            return self._writes.run(fn)
        return await trio.to_thread.run_sync(lambda: self._writes.run(fn))

    def lookup(self, fn: Callable[[Conn], T]) -> T:
        return self._reads.run(fn, read_only=True)

    async def read(self, fn: Callable[[Conn], T]) -> T:
        if self._inline:
            return self._reads.run(fn, read_only=True)
        return await trio.to_thread.run_sync(lambda: self._reads.run(fn, read_only=True))

    def close(self) -> None:
        self._writes.close()
        self._reads.close()
