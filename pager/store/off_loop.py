"""The async ports over a blocking reader of one user (the event log's connection, one
export's): each call runs in a worker thread, so the event loop never waits on a disk or a
database link. `inline` runs them on the loop instead: only for tests on trio's mock clock,
where a worker thread would let the clock jump while the call runs."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import trio

T = TypeVar("T")


async def off_loop(fn: Callable[[], T], *, inline: bool) -> T:
    if inline:
        return fn()
    return await trio.to_thread.run_sync(fn)


async def _closing(close: Callable[[], None], *, inline: bool) -> None:
    # Closed on the way out of a cancelled task too: the connection must not be left open.
    with trio.CancelScope(shield=True):
        await off_loop(close, inline=inline)


class BlockingEventLog(Protocol):
    def latest_seq(self) -> int: ...

    def oldest_seq(self) -> int | None: ...

    def rows_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]: ...

    def close(self) -> None: ...


class ThreadedEventLog:
    """The `EventLog` port (pager/store/ports.py) over a blocking reader."""

    def __init__(self, reader: BlockingEventLog, *, inline: bool = False) -> None:
        self._reader = reader
        self._inline = inline

    async def latest_seq(self) -> int:
        return await off_loop(self._reader.latest_seq, inline=self._inline)

    async def oldest_seq(self) -> int | None:
        return await off_loop(self._reader.oldest_seq, inline=self._inline)

    async def rows_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        reader = self._reader
        return await off_loop(lambda: reader.rows_after(seq, limit), inline=self._inline)

    async def close(self) -> None:
        await _closing(self._reader.close, inline=self._inline)


class BlockingExportReader(Protocol):
    def batch(self, size: int) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


class ThreadedExportReader:
    """The `ExportReader` port (pager/store/operator_ports.py) over a blocking reader."""

    def __init__(self, reader: BlockingExportReader) -> None:
        self._reader = reader

    async def batch(self, size: int) -> list[dict[str, Any]]:
        reader = self._reader
        return await off_loop(lambda: reader.batch(size), inline=False)

    async def close(self) -> None:
        await _closing(self._reader.close, inline=False)


async def open_export(open_reader: Callable[[], BlockingExportReader]) -> ThreadedExportReader:
    """Open one export in a worker thread (it connects and starts its snapshot)."""
    return ThreadedExportReader(await off_loop(open_reader, inline=False))
