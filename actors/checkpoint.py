"""The checkpoint actor: the one owner of the SQLite connection.

Every query runs in a worker thread (`trio.to_thread`), one at a time, so the event loop never
blocks on the disk and the connection never has two users.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from actors._runtime import Actor, Reply
from pager import store

log = logging.getLogger("pager.store")
T = TypeVar("T")


@attrs.frozen
class BrokerRunInfo:
    """What the store records about this broker process."""

    instance_id: str
    pid: int
    version: str
    started_at: str


@attrs.frozen
class GetMeta:
    key: str


@attrs.frozen
class SetMeta:
    key: str
    value: str


CheckpointMessage = GetMeta | SetMeta


class CheckpointActor(Actor[CheckpointMessage]):
    def __init__(self, database: Path, run: BrokerRunInfo, utc_now: Callable[[], str]) -> None:
        self._database = database
        self._run = run
        self._utc_now = utc_now
        self._conn: sqlite3.Connection | None = None

    async def _db(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        def call() -> T:
            return fn(*args, **kwargs)

        return await trio.to_thread.run_sync(call)

    @property
    def conn(self) -> sqlite3.Connection:
        assert self._conn is not None, "the checkpoint is used before on_start opened it"
        return self._conn

    async def on_start(self) -> None:
        self._conn = await self._db(store.open_database, self._database)
        await self._db(
            store.record_broker_start,
            self.conn,
            instance_id=self._run.instance_id,
            pid=self._run.pid,
            version=self._run.version,
            started_at=self._run.started_at,
        )
        log.info("database %s ready (schema %d)", self._database, store.CURRENT_SCHEMA_VERSION)

    async def handle(self, message: CheckpointMessage, reply: Reply[Any] | None) -> None:
        match message:
            case GetMeta(key=key):
                value = await self._db(store.get_meta, self.conn, key)
                if reply is not None:
                    reply.send(value)
            case SetMeta(key=key, value=value):
                await self._db(store.set_meta, self.conn, key, value)
                if reply is not None:
                    reply.send(None)
            case _:
                self.unhandled(message)

    async def on_stop(self) -> None:
        if self._conn is None:
            return
        conn, self._conn = self._conn, None

        def close() -> None:
            try:
                store.record_broker_stop(
                    conn,
                    instance_id=self._run.instance_id,
                    stopped_at=self._utc_now(),
                    reason="shutdown",
                )
                store.checkpoint(conn)
            finally:
                store.close_database(conn)

        await trio.to_thread.run_sync(close)
