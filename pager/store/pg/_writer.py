"""The PostgreSQL store's writer and readers, as the ports expect them (`write`, `lookup`,
`read`): each call runs the store's statements (pager/store/_conn.py) in one transaction of its
own, on a connection of its kind, so a read never waits behind a write's transaction.

- Writes run in worker threads on a small pool of connections (psycopg's async API is
  asyncio-only): the database, not one connection, orders concurrent writes, as it must when
  several brokers write at once. A transaction the database rolled back for a deadlock or a
  serialization conflict is run again (its statements are rerun whole, so nothing is half done).
- Reads run in a worker thread on a connection of their own, in one REPEATABLE READ READ ONLY
  transaction, so all of a read's statements see one committed state.
- Lookups run in worker threads too, on a small pool of connections of their own (bounded by a
  capacity limiter), so the event loop never waits on a round trip: /health and every other
  request go on while a lookup waits on a slow or cut link. Their statements run without a
  transaction around them (no BEGIN and COMMIT round trips).

A connection that broke (the server restarted, the link was cut) is dropped, and the next call
opens a new one: the broker reconnects by itself. A call that fails for want of a connection
raises `PgUnreachable` (a `StoreUnavailable`); an error the server answers with for its own
trouble (a full disk, a lock held too long, a standby) raises its `StoreFault` (pg_fault), the
connection kept. Either way its caller is answered `unavailable`, and the store is marked
degraded on /health until a call succeeds again.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import select
import socket
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import psycopg
import trio

from pager.config import StoreConfig
from pager.health import STORE, HealthBoard
from pager.store._conn import AfterCommit, Conn
from pager.store._errors import StoreFault
from pager.store._guard import STALE_SQLSTATE, StaleFacts
from pager.store._sql import sql
from pager.store.pg._batch import BatchConn
from pager.store.pg._conn import PgConn
from pager.store.pg._database import (
    CONNECT_TIMEOUT,
    PgUnreachable,
    connect,
    first_line,
    pg_fault,
)

log = logging.getLogger("pager.store")
T = TypeVar("T")

#: Connections the writes of one broker use at most (and so writes in flight at once). A
#: connection carries one round trip at a time, so across a link of 40 ms a round trip each
#: one carries at most 25 writes a second: 16 let 16 clients' sends go at once (a send is one
#: write). They are opened as load needs them (the pool lends the one used last first), so a
#: quiet broker holds one; at full load a broker holds up to 16 + LOOKUP_POOL + a few of its
#: own (reads, events, LISTEN, the sweep's lock): about 40 of the server's `max_connections`
#: (100 by default).
WRITE_POOL = 16
#: Times a transaction the database rolled back (deadlock, serialization) is run in all.
ATTEMPTS = 3
#: How long the server lets a write's transaction sit idle before it ends it (see _Pool).
IDLE_IN_TRANSACTION = "10s"
#: Connections the lookups of one broker use at most (and so lookups in flight at once):
#: as many as writes, since each send is one lookup and one write (see WRITE_POOL).
LOOKUP_POOL = 16
#: Seconds a lookup may wait on a connection attempt, the first time the store stops
#: answering (after that, lookups fail at once until a probe finds it back).
LOOKUP_TIMEOUT = 3
#: Seconds a lookup waits for its answer. A lookup is a few index reads: past this the link
#: or the server is in trouble (a link that still acknowledges TCP but passes nothing on
#: would hold it forever, keepalives and all). Its connection is cut and its caller answered
#: `unavailable`; the server ends the statement by itself by then too (`statement_timeout`).
LOOKUP_ANSWER = 5.0
#: A failure that took longer than this was a timeout (a cut link, a server that does not
#: answer), not a refusal (a server that is down answers "refused" at once).
SLOW_FAILURE = 0.5


class _Connection:
    """One connection, used by one call at a time, each call its own transaction: read-write,
    or (`read_only`) REPEATABLE READ READ ONLY, so all of a read's statements see one state.
    `one_statement_snapshots`: no transaction around a call, each statement sees the latest
    commit (the lookups: see PgWriter). `batched`: a write's statements go out together, as
    few round trips as its reads allow (pg/_batch.py)."""

    def __init__(
        self,
        store: StoreConfig,
        name: str,
        *,
        read_only: bool = False,
        one_statement_snapshots: bool = False,
        batched: bool = False,
        server: Mapping[str, str] | None = None,
        timeout: int = CONNECT_TIMEOUT,
    ) -> None:
        self._store = store
        self._batched = batched
        self._name = name
        self._read_only = read_only
        self._bare = one_statement_snapshots
        self._server = server
        self._timeout = timeout
        self._raw: psycopg.Connection[Any] | None = None
        self._lock = threading.Lock()
        self._cut = False  # set by `cut`: the call waiting on the connection gives up

    def run(self, fn: Callable[[Conn], T]) -> T:
        with self._lock:
            rolled_back = 0
            while True:
                raw, fresh = self._open()
                began = False
                try:
                    if self._bare:  # read-only statements: a retry below changes nothing
                        return fn(PgConn(raw))
                    if self._batched:
                        batch = BatchConn(raw)
                        try:
                            return _batched(batch, fn)
                        finally:
                            # Nothing is done before the COMMIT goes: a connection lost before
                            # then (one that died while idle) is tried once more below.
                            began = batch.committing
                    with raw.transaction():
                        began = True
                        return fn(PgConn(raw))
                except psycopg.errors.TransactionRollback as exc:
                    rolled_back += 1
                    if rolled_back == ATTEMPTS:
                        raise (pg_fault(exc, self._store.url or "") or exc) from exc
                except psycopg.Error as exc:
                    if exc.sqlstate == STALE_SQLSTATE:  # rolled back: decide again
                        raise StaleFacts() from None
                    fault = pg_fault(exc, self._store.url or "")
                    if fault is not None:  # the server said why; the connection stays
                        raise fault from exc
                    if not isinstance(exc, psycopg.OperationalError):
                        raise  # a bug or a domain rule, not the store's trouble
                    self._drop()
                    if self._cut:  # given up on (`cut`): no second try
                        self._cut = False
                        raise PgUnreachable(
                            self._store.url or "", "it did not answer in time"
                        ) from None
                    if not began and not fresh:
                        # It died while idle (a server restart since the last call): its
                        # BEGIN failed, nothing of `fn` ran; once more on a new connection.
                        continue
                    raise PgUnreachable(self._store.url or "", first_line(exc)) from None

    def _open(self) -> tuple[psycopg.Connection[Any], bool]:
        """The connection, and whether it was opened just now."""
        if self._raw is None or self._raw.closed or self._raw.broken or _said_goodbye(self._raw):
            self._drop()
            raw = connect(
                self._store,
                application_name=f"pager {self._name}",
                server=self._server,
                timeout=self._timeout,
            )
            if self._read_only:  # said in each BEGIN: no round trip of its own
                raw.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
                raw.read_only = True
            if self._bare:  # statements without a BEGIN: read-only by the session's default
                raw.execute("SET default_transaction_read_only = on")
            self._raw = raw
            return raw, True
        return self._raw, False

    def cut(self) -> None:
        """From another thread: shut the connection's socket down, so a call waiting on a
        link that passes nothing fails at once (and its connection is dropped)."""
        raw = self._raw
        if raw is None or raw.closed:
            return
        self._cut = True
        with contextlib.suppress(OSError, psycopg.Error):
            sock = socket.socket(fileno=os.dup(raw.pgconn.socket))
            try:
                sock.shutdown(socket.SHUT_RDWR)
            finally:
                sock.close()

    def _drop(self) -> None:
        raw, self._raw = self._raw, None
        if raw is not None:
            with contextlib.suppress(psycopg.Error):  # a broken one: nothing left to lose
                raw.close()

    def close(self) -> None:
        with self._lock:
            self._drop()


def _batched(conn: BatchConn, fn: Callable[[Conn], T]) -> T:
    """`fn` in one transaction whose statements go out together: BEGIN with the first batch,
    COMMIT with the last (pg/_batch.py). A value that `fn` answers as `AfterCommit` is built
    once the commit's answer is in (its cursors' rows come with it). A failure leaves no
    transaction open behind it."""
    raw = conn.raw
    conn.execute(sql("BEGIN"))
    try:
        value = fn(conn)
        conn.execute(sql("COMMIT"))
        conn.committing = True
        conn.flush()
    except BaseException:
        if raw.info.transaction_status != psycopg.pq.TransactionStatus.IDLE and not raw.broken:
            with contextlib.suppress(psycopg.Error):
                raw.execute("ROLLBACK")
        raise
    return value.finish() if isinstance(value, AfterCommit) else value


def _said_goodbye(raw: psycopg.Connection[Any]) -> bool:
    """Whether the server wrote to this idle connection (a connection nobody LISTENs on):
    only a server ending it does (its FATAL on a shutdown or restart, then end of stream).
    Checked before each call without a round trip, so a write whose statements go out with
    their COMMIT in one message (pg/_batch.py) never goes out on a connection already gone
    (whether such a message reached the server could not be told)."""
    try:
        readable, _, _ = select.select([raw.pgconn.socket], [], [], 0)
    except (OSError, ValueError, psycopg.Error):
        return True
    return bool(readable)


class _Lent:
    """The connection a call runs on while it runs, to `cut` it from another thread."""

    def __init__(self) -> None:
        self._connection: _Connection | None = None
        self._lock = threading.Lock()

    def lend(self, connection: _Connection | None) -> None:
        with self._lock:
            self._connection = connection

    def cut(self) -> None:
        with self._lock:
            if self._connection is not None:
                self._connection.cut()


class _Pool:
    """Up to `size` connections, each lent to one worker thread at a time: the one used last
    first (a stack), so a quiet broker keeps reusing one open connection, not opening each in
    turn (a connection attempt over a slow link costs several round trips)."""

    def __init__(
        self,
        store: StoreConfig,
        name: str,
        size: int,
        *,
        one_statement_snapshots: bool = False,
        batched: bool = False,
        timeout: int = CONNECT_TIMEOUT,
        statement_timeout: float | None = None,
        generic_plans: bool = False,
    ) -> None:
        self._idle: queue.LifoQueue[_Connection] = queue.LifoQueue()
        # A write never waits on this broker between its statements: a transaction left open
        # (its broker cut off mid-way) is ended by the server, and its locks with it.
        server = {"idle_in_transaction_session_timeout": IDLE_IN_TRANSACTION}
        if statement_timeout is not None:
            server["statement_timeout"] = f"{int(statement_timeout * 1000)}ms"
        if generic_plans:
            # psycopg prepares a statement run a few times on a connection; its plan is then
            # made once, not again for each run's values (a send's read joins a dozen tables:
            # planning it cost the server several times running it).
            server["plan_cache_mode"] = "force_generic_plan"
        self._all = [
            _Connection(
                store,
                f"{name} {n}",
                server=server,
                one_statement_snapshots=one_statement_snapshots,
                batched=batched,
                timeout=timeout,
            )
            for n in range(size)
        ]
        for connection in self._all:
            self._idle.put(connection)

    def run(self, fn: Callable[[Conn], T], lent: _Lent | None = None) -> T:
        """`fn` on an idle connection; `lent` holds that connection while it runs."""
        connection = self._idle.get()
        if lent is not None:
            lent.lend(connection)
        try:
            return connection.run(fn)
        finally:
            if lent is not None:
                lent.lend(None)
            self._idle.put(connection)

    def close(self) -> None:
        for connection in self._all:
            connection.close()


class PgWriter:
    """`write(fn)`: `fn` in a read-write transaction, committed before it returns;
    `read(fn)`: in a read-only snapshot on another connection; `lookup(fn)`: read-only
    statements on a pool of their own, each seeing the latest commit. All three run in worker
    threads: nothing here waits on the network on the event loop.

    `on_commit` is told (on the event loop) after each successful write, as the SQLite
    checkpoint tells it after each batch; `board` is marked degraded while the database
    cannot be reached. `inline` runs everything on the event loop (tests on trio's mock clock,
    where a worker thread would let the clock jump)."""

    #: Each statement read before a write costs a round trip: a send's facts are read with
    #: its address, and its write checks them (pager/store/ports.py `ReadAhead`).
    reads_ahead = True

    def __init__(
        self,
        store: StoreConfig,
        *,
        inline: bool = False,
        pool: int = WRITE_POOL,
        on_commit: Callable[[], None] | None = None,
        board: HealthBoard | None = None,
    ) -> None:
        self._store_url = store.url or ""
        self._writes = _Pool(store, "writer", pool, batched=True)
        self._reads = _Connection(store, "reader", read_only=True)
        # Lookups are a few index reads each: no BEGIN and COMMIT round trips around them.
        # Their statements may see two commits apart, as two lookups may; what they find is
        # checked where it matters (the identity actor decides whether a session is current,
        # every change is a guarded update).
        self._lookups = _Pool(
            store,
            "lookups",
            LOOKUP_POOL,
            one_statement_snapshots=True,
            timeout=LOOKUP_TIMEOUT,
            statement_timeout=LOOKUP_ANSWER,
            generic_plans=True,
        )
        self._lookup_slots = trio.CapacityLimiter(LOOKUP_POOL)
        # Set while the store does not answer at all (calls time out): lookups then fail at
        # once instead of each waiting out a timeout (their callers answered `unavailable`
        # within a moment), and a probe in a worker thread (or any other call there) finds
        # the store back and clears it. A store that refuses at once (a server restarting) is
        # simply tried again each time.
        self._unresponsive = False
        self._probing = threading.Lock()
        # Bounds the threads that wait for a pooled connection to what the pool can serve.
        self._slots = trio.CapacityLimiter(pool)
        self._inline = inline
        self._on_commit = on_commit
        self._board = board

    async def write(self, fn: Callable[[Conn], T], *, heavy: bool = False) -> T:
        value = await self._call(lambda: self._writes.run(fn), limiter=self._slots)
        if self._on_commit is not None:
            self._on_commit()
        return value

    async def write_late(self, fn: Callable[[Conn], AfterCommit[T]], *, heavy: bool = False) -> T:
        """`write`, the answer built once the COMMIT's answer is in: statements whose rows
        it reads go out with the COMMIT, not in a round trip of their own."""
        built: T = await self.write(fn, heavy=heavy)  # type: ignore[arg-type]  # see _batched
        return built

    async def lookup(self, fn: Callable[[Conn], T]) -> T:
        if self._unresponsive:
            self._probe()
            raise PgUnreachable(
                self._store_url, "it did not answer the last call; waiting for it to answer again"
            )
        if self._inline:
            return self._watched(lambda: self._lookups.run(fn))
        lent = _Lent()
        with trio.move_on_after(LOOKUP_ANSWER):
            return await trio.to_thread.run_sync(
                lambda: self._watched(lambda: self._lookups.run(fn, lent)),
                limiter=self._lookup_slots,
                abandon_on_cancel=True,  # its thread ends once `cut` below reaches it
            )
        # No answer in time: a link that passes nothing on. Its connection is cut (the thread
        # waiting on it fails and drops it), and lookups fail at once until a probe finds
        # the store answering again.
        lent.cut()
        self._unresponsive = True
        unanswered = PgUnreachable(
            self._store_url, f"it did not answer a lookup within {LOOKUP_ANSWER:g} s"
        )
        if self._board is not None:
            self._board.degrade(STORE, str(unanswered))
        raise unanswered

    def _probe(self) -> None:
        """Ask the store whether it answers again, in a thread of its own (one at a time)."""
        if not self._probing.acquire(blocking=False):
            return

        def probe() -> None:
            try:
                self._watched(lambda: self._reads.run(lambda conn: conn.execute(sql("SELECT 1"))))
            except PgUnreachable:
                pass  # still unresponsive; the next lookup probes again
            finally:
                self._probing.release()

        threading.Thread(target=probe, name="pager store probe", daemon=True).start()

    async def read(self, fn: Callable[[Conn], T]) -> T:
        return await self._call(lambda: self._reads.run(fn))

    async def _call(
        self, run: Callable[[], T], *, limiter: trio.CapacityLimiter | None = None
    ) -> T:
        if self._inline:
            return self._watched(run)
        return await trio.to_thread.run_sync(lambda: self._watched(run), limiter=limiter)

    def _watched(self, run: Callable[[], T]) -> T:
        """`run()`, keeping the board's store mark in step with whether the database answers.
        (The board is thread-safe; it is told from worker threads too.)"""
        began = time.monotonic()
        try:
            value = run()
        except StoreFault as exc:
            if isinstance(exc, PgUnreachable) and time.monotonic() - began > SLOW_FAILURE:
                self._unresponsive = True
            if self._board is not None and exc.degrades:
                self._board.degrade(STORE, str(exc))
            raise
        self._unresponsive = False
        if self._board is not None:
            self._board.recover(STORE)
        return value

    def close(self) -> None:
        self._writes.close()
        self._reads.close()
        self._lookups.close()
