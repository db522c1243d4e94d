"""The checkpoint actor: the one owner of the SQLite connection.

Writes that queue up while a commit is in flight are committed together (group commit), each
inside its own savepoint so that one failing write fails only its own caller. A batch's
statements run on the event loop, and only its `COMMIT` (the fsync, 0.3-5 ms under load) in a
worker thread (`trio.to_thread`), so the loop never waits on the disk; so does waiting for the
write lock while another process holds it (up to the busy timeout, counted from when a batch
first found it held: batches queued behind a refused one do not each wait it again). Run in
the thread too, the statements were slowed by the thread's scheduling (p50 ~1 ms and p90 ~5 ms
per batch with 8 busy clients on 2 cores, against ~0.3 and ~0.6 ms on the loop), and every
write waited on that.
Writes that may touch many rows (retention sweeps, purges, requeuing lapsed claims) say
`heavy`: their batch runs whole in the thread. Reads through the actor always run in the
thread; short lookups go through `QuickReads`. The connection never has two users at once.
Functions passed in get the connection and must not touch any actor's state.

A SQLite failure of the moment (a full disk, an I/O error, the lock held past the busy timeout)
is raised to the caller as its `StoreFault` here, where the statement ran, and marks the store
degraded on /health; the next committed batch clears it. A writer that does not answer in time
(a wedged disk) or is not running is `StoreUnavailable` to its caller.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from actors._runtime import Actor, ActorError, ActorRef, CallTimeout, Reply, off_loop
from pager import store
from pager.health import STORE, HealthBoard
from pager.store import StoreFault, StoreUnavailable, as_fault, faults_typed
from pager.store._conn import AfterCommit

log = logging.getLogger("pager.store")
T = TypeVar("T")

#: Writes committed in one transaction at most; bounds how long one batch holds the thread.
MAX_BATCH = 128
#: A store call that takes longer than this is reported as a failure (a wedged disk).
CALL_TIMEOUT = 60.0
#: Once another process has held the write lock past the busy timeout, how long each later
#: batch still waits for it (a moment, for a holder that lets go and takes it again).
BUSY_GRACE = 0.1


@attrs.frozen
class BrokerRunInfo:
    """What the store records about this broker process."""

    instance_id: str
    pid: int
    version: str
    started_at: str


@attrs.frozen
class Read:
    fn: Callable[[sqlite3.Connection], Any]


@attrs.frozen
class Write:
    fn: Callable[[sqlite3.Connection], Any]
    heavy: bool = False  # may touch many rows: kept off the event loop


CheckpointMessage = Read | Write


class QuickReads:
    """Short reads (index lookups of a few rows) run right away on the event loop, through a
    read-only connection of their own. In WAL mode it sees every committed write and never
    waits for one in flight. A worker-thread handoff costs ~110 µs of CPU, several times such
    a lookup; anything that scans or pages goes through `Checkpoint.read` instead.
    """

    #: A WAL reader is blocked only by a crash recovery of the WAL; the loop must not wait long.
    BUSY_TIMEOUT_MS = 200

    def __init__(self, database: Path) -> None:
        self._database = database
        self._conn: sqlite3.Connection | None = None
        self._busy_timeout_ms = 0  # the connection's, read once it is open

    def run(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        if conn is None:  # opened on first use: the writer must have created the database
            conn = self._conn = store.open_read_only(self._database)
            conn.execute(f"PRAGMA busy_timeout = {self.BUSY_TIMEOUT_MS}")
        # One read transaction, so a lookup of several queries sees one committed state.
        with faults_typed(read_only=True):
            conn.execute("BEGIN")
            try:
                return fn(conn)
            finally:
                conn.execute("COMMIT")

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


class Checkpoint:
    """What other actors hold: `await read(fn)` (fn runs in a worker thread), `await write(fn)`
    (on the event loop, its commit in the thread), and `await lookup(fn)` for short reads (fn
    runs at once, on the event loop: no thread handoff, it awaits nothing)."""

    def __init__(self, ref: ActorRef[CheckpointMessage], quick: QuickReads) -> None:
        self.ref = ref
        self.quick = quick

    async def lookup(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """Run a short read (a few index lookups) now, on the last committed state."""
        return self.quick.run(fn)

    async def read(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        result: T = await self._call(Read(fn))
        return result

    async def write(self, fn: Callable[[sqlite3.Connection], T], *, heavy: bool = False) -> T:
        """Run `fn` inside a committed transaction; returns once the commit is durable.

        `fn` runs on the event loop unless `heavy`: say so for writes that may touch many rows.
        Raises the `StoreFault` the store met (nothing of `fn` was committed then)."""
        result: T = await self._call(Write(fn, heavy))
        return result

    async def write_late(
        self, fn: Callable[[sqlite3.Connection], AfterCommit[T]], *, heavy: bool = False
    ) -> T:
        """`write`, for an answer read as late as possible (`AfterCommit`): on SQLite, where
        a statement costs no round trip, built at once, inside the transaction."""
        return await self.write(lambda conn: fn(conn).finish(), heavy=heavy)

    async def _call(self, message: CheckpointMessage) -> Any:
        try:
            return await self.ref.call(message, timeout=CALL_TIMEOUT)
        except CallTimeout:
            raise StoreUnavailable(
                f"the broker's database did not answer within {CALL_TIMEOUT:g}s (its disk may be"
                " slow or stuck); retry shortly, and check the disk holding Pager's state"
                " directory if it lasts"
            ) from None
        except ActorError as exc:  # the writer is restarting: its supervisor brings it back
            raise StoreUnavailable(
                f"the broker's database writer is restarting ({exc}); retry shortly"
            ) from exc


class CheckpointActor(Actor[CheckpointMessage]):
    mailbox_size = 1024

    def __init__(
        self,
        database: Path,
        run: BrokerRunInfo | None,
        utc_now: Callable[[], str],
        *,
        inline: bool = False,
        on_commit: Callable[[], None] | None = None,
        board: HealthBoard | None = None,
    ) -> None:
        self._database = database
        self._run = run
        self._utc_now = utc_now
        # Told after each committed write batch (the operator event feed reads on from there);
        # called on the event loop, so it must be quick and must not touch the database.
        self._on_commit = on_commit
        # A failed commit marks the store degraded on /health; the next good one clears it.
        self._board = board
        # Inline runs queries on the event loop: only for tests on trio's mock clock, where a
        # worker thread would let the clock jump while the query runs.
        self._inline = inline
        self._conn: sqlite3.Connection | None = None
        self._busy_timeout_ms = 0  # the connection's, read once it is open
        # Trio time at which a batch first found the write lock held by another process, None
        # once a batch took it: a lock held past the busy timeout is not waited for again.
        self._busy_since: float | None = None

    async def _in_thread(self, fn: Callable[[], T]) -> T:
        return await off_loop(fn, inline=self._inline)

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "the checkpoint is used before on_start opened it"
        return self._conn

    async def on_start(self) -> None:
        self._conn = await self._in_thread(lambda: store.open_database(self._database))
        self._busy_timeout_ms = int(self.conn.execute("PRAGMA busy_timeout").fetchone()[0])
        run = self._run
        if run is not None:
            try:
                await self._in_thread(
                    lambda: store.record_broker_start(
                        self.conn,
                        instance_id=run.instance_id,
                        pid=run.pid,
                        version=run.version,
                        started_at=run.started_at,
                    )
                )
            except BaseException:
                store.close_database(self.conn)
                raise
        log.info("database %s ready (schema %d)", self._database, store.CURRENT_SCHEMA_VERSION)

    async def handle(self, message: CheckpointMessage, reply: Reply[Any] | None) -> None:
        match message:
            case Read(fn=fn):
                await self._read(fn, reply)
            case Write():
                items = [(message, reply), *self.take_queued(MAX_BATCH - 1)]
                writes = [(m, r) for m, r in items if isinstance(m, Write)]
                await self._commit([m for m, _ in writes], [r for _, r in writes])
                for other, other_reply in items:
                    if isinstance(other, Read):
                        await self._read(other.fn, other_reply)
            case _:
                self.unhandled(message)

    async def _read(
        self, fn: Callable[[sqlite3.Connection], Any], reply: Reply[Any] | None
    ) -> None:
        conn = self.conn
        try:
            value = await self._in_thread(lambda: fn(conn))
        except Exception as exc:
            if reply is not None:
                reply.fail(as_fault(exc))
            return
        if reply is not None:
            reply.send(value)

    def _begin_within(self, wait_ms: int) -> None:
        """`BEGIN IMMEDIATE`, waiting at most `wait_ms` for another process's write lock."""
        conn = self.conn
        conn.execute(f"PRAGMA busy_timeout = {wait_ms}")
        try:
            conn.execute("BEGIN IMMEDIATE")
        finally:
            conn.execute(f"PRAGMA busy_timeout = {self._busy_timeout_ms}")

    async def _begin(self) -> None:
        """Take the write lock for a batch. Free now (the usual case): at once, on the loop.
        Held by another process (a backup, a person's `sqlite3` shell): waited for in the
        thread, so the loop, and /health with it, never waits; and only until the busy timeout
        counted from when a batch first found it held. A batch that arrives later, the lock
        still held, waits a moment only: else each batch queued behind a refused one (an
        identity's next request behind its last) would wait the whole busy timeout again,
        and a caller would be held for several of them before its `busy` answer."""
        try:
            self._begin_within(0)
        except sqlite3.OperationalError as exc:
            if exc.sqlite_errorcode != sqlite3.SQLITE_BUSY:
                raise
            now = trio.current_time()
            if self._busy_since is None:
                self._busy_since = now
            left = self._busy_since + self._busy_timeout_ms / 1000 - now
            wait_ms = round(max(left, BUSY_GRACE) * 1000)
            await self._in_thread(lambda: self._begin_within(wait_ms))
        self._busy_since = None

    async def _commit(self, writes: list[Write], replies: list[Reply[Any] | None]) -> None:
        conn = self.conn

        def apply() -> list[tuple[bool, Any]]:
            """Every write in its own savepoint of the transaction `begin` opened."""
            outcomes: list[tuple[bool, Any]] = []
            try:
                for write in writes:
                    conn.execute("SAVEPOINT op")
                    try:
                        outcomes.append((True, write.fn(conn)))
                    except Exception as exc:
                        if not conn.in_transaction:
                            # SQLite rolled the whole transaction back itself (a full disk, an
                            # I/O error): the batch is lost, and `exc` is what to report.
                            raise
                        conn.execute("ROLLBACK TO op")
                        outcomes.append((False, as_fault(exc)))
                    conn.execute("RELEASE op")
            except BaseException:
                store.rollback(conn)
                raise
            return outcomes

        def commit() -> None:
            try:
                conn.execute("COMMIT")
            except BaseException:
                store.rollback(conn)
                raise

        def apply_and_commit() -> list[tuple[bool, Any]]:
            outcomes = apply()
            commit()
            return outcomes

        try:
            await self._begin()
            try:
                if self._inline or any(write.heavy for write in writes):
                    outcomes = await self._in_thread(apply_and_commit)
                else:  # the lock held, statements do not wait: on the loop, the commit not
                    outcomes = apply()
                    await self._in_thread(commit)
            except BaseException:
                store.rollback(conn)  # cancelled before the thread took the batch or commit
                raise
        except Exception as exc:  # the batch or its commit failed: nothing in it happened
            failure = as_fault(exc)
            if isinstance(failure, StoreFault):
                log.warning("commit of %d writes failed: %s", len(writes), failure)
            else:
                log.error("commit of %d writes failed: %r", len(writes), exc)
            self._mark(failure)
            for reply in replies:
                if reply is not None:
                    reply.fail(failure)
            return
        faults = [value for ok, value in outcomes if not ok and isinstance(value, StoreFault)]
        wrote = any(ok for ok, _ in outcomes)
        if faults or wrote:  # a batch whose writes all failed otherwise proves nothing
            self._mark(faults[0] if faults else None)
        if self._on_commit is not None and wrote:
            self._on_commit()
        for reply, (ok, value) in zip(replies, outcomes, strict=True):
            if reply is None:
                continue
            if ok:
                reply.send(value)
            else:
                reply.fail(value)

    def _mark(self, failure: BaseException | None) -> None:
        """Keep /health's store mark in step: a fault marks it, a batch that wrote clears it
        (a lock and a dict lookup when nothing is marked)."""
        if self._board is None:
            return
        if isinstance(failure, StoreFault):
            if failure.degrades:
                self._board.degrade(STORE, str(failure))
        elif failure is None:
            self._board.recover(STORE)

    async def on_stop(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None
        run = self._run

        def close() -> None:
            try:
                if run is not None:
                    store.record_broker_stop(
                        conn,
                        instance_id=run.instance_id,
                        stopped_at=self._utc_now(),
                        reason="shutdown",
                    )
                store.checkpoint(conn)
            finally:
                store.close_database(conn)

        await self._in_thread(close)
