"""The SQLite writer's runner: an actor whose mailbox queues the store's reads and writes for
the one writing connection (`pager/store/sqlite_writer.py`, a plain object), and `Checkpoint`,
what the broker's children hold of it. The composition root starts it (`serve_sqlite_writer`)
for the SQLite backend; the store itself knows nothing of actors.

The mailbox is what makes group commit: writes that queue up while a commit is in flight are
taken together (up to `MAX_BATCH`) and committed in one transaction. A writer that does not
answer in time (a wedged disk) or is not running is `StoreUnavailable` to its caller.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, TypeVar

import trio

from actors._runtime import Actor, ActorError, ActorRef, CallTimeout, Reply, run_actor
from pager.store import StoreUnavailable
from pager.store._conn import AfterCommit
from pager.store.sqlite_writer import (
    CheckpointMessage,
    Connection,
    QuickReads,
    Read,
    SqliteWriter,
    Write,
)

T = TypeVar("T")

#: Writes committed in one transaction at most; bounds how long one batch holds the thread.
MAX_BATCH = 128
#: A store call that takes longer than this is reported as a failure (a wedged disk).
CALL_TIMEOUT = 60.0


class Checkpoint:
    """What other actors hold: `await read(fn)` (fn runs in a worker thread), `await write(fn)`
    (on the event loop, its commit in the thread), and `await lookup(fn)` for short reads (fn
    runs at once, on the event loop: no thread handoff, it awaits nothing)."""

    #: A statement costs no round trip here: a send reads its facts inside its write.
    reads_ahead = False

    def __init__(self, ref: ActorRef[CheckpointMessage], quick: QuickReads) -> None:
        self.ref = ref
        self.quick = quick

    async def lookup(self, fn: Callable[[Connection], T]) -> T:
        """Run a short read (a few index lookups) now, on the last committed state."""
        return self.quick.run(fn)

    async def read(self, fn: Callable[[Connection], T]) -> T:
        result: T = await self._call(Read(fn))
        return result

    async def write(self, fn: Callable[[Connection], T], *, heavy: bool = False) -> T:
        """Run `fn` inside a committed transaction; returns once the commit is durable.

        `fn` runs on the event loop unless `heavy`: say so for writes that may touch many rows.
        Raises the `StoreFault` the store met (nothing of `fn` was committed then)."""
        result: T = await self._call(Write(fn, heavy))
        return result

    async def write_late(
        self, fn: Callable[[Connection], AfterCommit[T]], *, heavy: bool = False
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
    """Runs one `SqliteWriter`: opens it on start, answers each read, commits the writes
    queued together as one batch, closes it on stop."""

    mailbox_size = 1024

    def __init__(self, writer: SqliteWriter) -> None:
        self.writer = writer

    async def on_start(self) -> None:
        await self.writer.open()

    async def handle(self, message: CheckpointMessage, reply: Reply[Any] | None) -> None:
        match message:
            case Read(fn=fn):
                await self._read(fn, reply)
            case Write():
                items = [(message, reply), *self.take_queued(MAX_BATCH - 1)]
                writes = [(m, r) for m, r in items if isinstance(m, Write)]
                outcomes = await self.writer.commit([m for m, _ in writes])
                for (_, write_reply), (ok, value) in zip(writes, outcomes, strict=True):
                    if write_reply is None:
                        continue
                    if ok:
                        write_reply.send(value)
                    else:
                        write_reply.fail(value)
                for other, other_reply in items:
                    if isinstance(other, Read):
                        await self._read(other.fn, other_reply)
            case _:
                self.unhandled(message)

    async def _read(self, fn: Callable[[Any], Any], reply: Reply[Any] | None) -> None:
        try:
            value = await self.writer.read(fn)
        except Exception as exc:
            if reply is not None:
                reply.fail(exc)
            return
        if reply is not None:
            reply.send(value)

    async def on_stop(self) -> None:
        await self.writer.close()


async def serve_sqlite_writer(
    writer: SqliteWriter,
    quick: QuickReads,
    *,
    task_status: trio.TaskStatus[Checkpoint] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run `writer` as the actor named `store` until cancelled; hands out its `Checkpoint`."""
    async with trio.open_nursery() as nursery:
        ref = await nursery.start(partial(run_actor, CheckpointActor(writer), name="store"))
        task_status.started(Checkpoint(ref, quick))
