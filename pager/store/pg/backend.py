"""The PostgreSQL backend, assembled (SPEC §13): the store child of the broker tree on a
database that several brokers share, each of them a *host*.

At start the broker upgrades the schema if it is the first of a newer version (pg/_database.py),
records its run, and claims its host row; while it runs it beats the host's heartbeat (the
others show the host alive while it is fresh) and measures the offset of the database's clock,
so every persisted time and deadline is the database's time, not this machine's.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from functools import partial
from typing import Any

import attrs
import psycopg
import trio

from pager.config import StoreConfig
from pager.domain.clock import WallClock
from pager.domain.exports import Exports
from pager.domain.hosts import HostBoard, HostView
from pager.domain.windows import Windows
from pager.health import HealthBoard
from pager.store._conn import Conn
from pager.store._errors import StoreFault
from pager.store._sql import sql
from pager.store.backend import StoreAccess
from pager.store.events import EventLogReader
from pager.store.off_loop import ThreadedEventLog
from pager.store.pg._conn import PgConn
from pager.store.pg._database import PgUnreachable, connect, first_line, pg_fault, upgrade
from pager.store.pg._export import PgExports
from pager.store.pg._listen import listen_forever
from pager.store.pg._schema import EVENTS_CHANNEL, SWEEP_LOCK, WAKE_CHANNEL
from pager.store.pg._writer import PgWriter
from pager.store.ports import EventLog, Leadership, WakeHandler, Wakeups
from pager.store.sqlite_writer import BrokerRunInfo

log = logging.getLogger("pager.store")

#: A host whose heartbeat is older than this many heartbeats is not alive.
ALIVE_HEARTBEATS = 3


class DatabaseClock:
    """Unix seconds on the database's clock: this machine's clock plus the offset measured
    against the database's `clock_timestamp()` (half the round trip is the error bound). Until
    the first measurement, this machine's clock."""

    def __init__(self) -> None:
        self.offset = 0.0

    def now(self) -> float:
        return time.time() + self.offset

    def measure(self, conn: Conn) -> None:
        before = time.time()
        row = conn.execute(sql("SELECT extract(epoch FROM clock_timestamp())::float8")).fetchone()
        after = time.time()
        self.offset = float(row[0]) - (before + after) / 2


@attrs.frozen
class _Host:
    name: str
    run: BrokerRunInfo


def _claim_host(conn: Conn, host: _Host, now: float) -> None:
    """Record the run and take the host's row (a restarted broker takes its own row back;
    the store child restarted within one run finds its run recorded already)."""
    run = host.run
    conn.execute(
        sql(
            "INSERT INTO broker_runs (host, instance_id, pid, version, started_at)"
            " VALUES ({}, {}, {}, {}, {}) ON CONFLICT (instance_id) DO NOTHING"
        ),
        (host.name, run.instance_id, run.pid, run.version, run.started_at),
    )
    conn.execute(
        sql(
            "INSERT INTO hosts (name, instance_id, version, started_at, heartbeat_at)"
            " VALUES ({}, {}, {}, {}, {}) ON CONFLICT (name) DO UPDATE SET instance_id ="
            " excluded.instance_id, version = excluded.version, started_at = excluded.started_at,"
            " heartbeat_at = excluded.heartbeat_at"
        ),
        (host.name, run.instance_id, run.version, now, now),
    )


def _beat(conn: Conn, *, host: _Host, now: float) -> bool:
    """The heartbeat; False when another broker took this host's name since."""
    cursor = conn.execute(
        sql("UPDATE hosts SET heartbeat_at = {} WHERE name = {} AND instance_id = {}"),
        (now, host.name, host.run.instance_id),
    )
    return cursor.rowcount == 1


def _release_host(conn: Conn, host: _Host, stopped_at: str) -> None:
    """A clean stop: the run's end, and the host shown not alive at once."""
    conn.execute(
        sql(
            "UPDATE broker_runs SET stopped_at = {}, stop_reason = 'shutdown'"
            " WHERE instance_id = {} AND stopped_at IS NULL"
        ),
        (stopped_at, host.run.instance_id),
    )
    conn.execute(
        sql("UPDATE hosts SET heartbeat_at = 0 WHERE name = {} AND instance_id = {}"),
        (host.name, host.run.instance_id),
    )


class PgWakeups:
    """Wakes across hosts: NOTIFY on one channel that every broker LISTENs on, the payload
    naming the identity and the host that changed it (a broker ignores its own)."""

    shared = True

    def __init__(self, host: str) -> None:
        self._host = host
        self.writer: PgWriter | None = None  # while the store runs
        self._handler: WakeHandler | None = None

    async def notify(self, identity_id: str) -> None:
        writer = self.writer
        if writer is None:
            return
        payload = f"{identity_id} {self._host}"
        await writer.write(
            lambda conn: conn.execute(
                sql("SELECT pg_notify({}, {})"), (WAKE_CHANNEL, payload)
            ).fetchone()
        )

    def in_write(self, conn: Conn, identity_id: str) -> None:
        """`notify` inside the caller's write transaction: delivered at its commit (none if
        it rolls back), with no write of its own."""
        conn.execute(sql("SELECT pg_notify({}, {})"), (WAKE_CHANNEL, f"{identity_id} {self._host}"))

    async def on_wake(self, handler: WakeHandler | None) -> None:
        self._handler = handler

    def heard(self, payload: str) -> None:
        """A notification on WAKE_CHANNEL ('' after the listener reconnected)."""
        handler = self._handler
        if handler is None:
            return
        if not payload:
            handler(None)
            return
        identity_id, _, origin = payload.partition(" ")
        if origin != self._host:
            handler(identity_id)


class PgLeadership:
    """This broker sweeps while it holds SWEEP_LOCK, a session-level advisory lock on a
    connection of its own. The server lets the lock go when that connection ends: the broker
    stopped, died (the kernel closes its socket at once) or was cut off (the server's TCP
    keepalives, set short on every connection Pager opens, notice within about 11 s); another
    broker then takes it at its next sweep."""

    def __init__(self, store: StoreConfig) -> None:
        self._store = store
        self._conn: psycopg.Connection[Any] | None = None
        self._held = False
        self._lock = threading.Lock()

    async def lead(self) -> bool:
        return await trio.to_thread.run_sync(self._lead)

    def _lead(self) -> bool:
        with self._lock:
            try:
                conn = self._conn
                if conn is None or conn.closed or conn.broken:
                    self._held = False
                    conn = self._conn = connect(self._store, application_name="pager sweeps")
                if self._held:
                    conn.execute("SELECT 1")  # still connected, so still held
                else:
                    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (SWEEP_LOCK,)).fetchone()
                    self._held = bool(row and row[0])
            except (psycopg.OperationalError, PgUnreachable) as exc:
                log.warning("cannot tell whether this broker sweeps: %s", first_line(exc))
                self._close()
                return False
            return self._held

    def _close(self) -> None:
        conn, self._conn, self._held = self._conn, None, False
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def close(self) -> None:
        with self._lock:
            self._close()


class PgReadSide:
    """A read connection of one user's own (views, listings, the retention plan)."""

    def __init__(self, store: StoreConfig) -> None:
        self._writer = PgWriter(store, pool=1)

    async def read(self, fn: Callable[[Conn], Any]) -> Any:
        return await self._writer.read(fn)

    async def aclose(self) -> None:
        self._writer.close()


class PgEventLog:
    """The event log on a connection of its own, reopened after it broke; a failure for want
    of the database is `PgUnreachable`, which the feed waits out and retries. Blocking: the
    backend hands it out behind `ThreadedEventLog`."""

    def __init__(self, store: StoreConfig) -> None:
        self._store = store
        self._reader: EventLogReader | None = None

    def _call(self, read: Callable[[EventLogReader], Any]) -> Any:
        if self._reader is None:
            self._reader = EventLogReader(
                PgConn(connect(self._store, application_name="pager events"))
            )
        try:
            return read(self._reader)
        except psycopg.Error as exc:
            fault = pg_fault(exc, self._store.url or "")
            if fault is not None:
                raise fault from exc
            if not isinstance(exc, psycopg.OperationalError):
                raise
            self.close()
            raise PgUnreachable(self._store.url or "", first_line(exc)) from None

    def latest_seq(self) -> int:
        return int(self._call(lambda reader: reader.latest_seq()))

    def oldest_seq(self) -> int | None:
        found = self._call(lambda reader: reader.oldest_seq())
        return None if found is None else int(found)

    def rows_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        rows: list[tuple[int, str, str, str]] = self._call(
            lambda reader: reader.rows_after(seq, limit)
        )
        return rows

    def close(self) -> None:
        reader, self._reader = self._reader, None
        if reader is not None:
            with contextlib.suppress(psycopg.Error):  # a broken one: nothing left to lose
                reader.close()


class PgBackend:
    kind = "postgresql"

    def __init__(
        self,
        store: StoreConfig,
        host_name: str,
        run: BrokerRunInfo,
        utc_now: Callable[[], str],
        windows: Windows,
    ) -> None:
        self._store = store
        self._host = _Host(host_name, run)
        self._utc_now = utc_now
        self._heartbeat = windows.host_heartbeat
        self.port_key = f"port@{host_name}"
        self._clock = DatabaseClock()
        self.hosts = HostBoard(host_name)
        self.store_host = host_name
        self._wakeups = PgWakeups(host_name)
        self.wakeups: Wakeups = self._wakeups
        self.wake_in_write: Callable[[Conn, str], None] | None = self._wakeups.in_write
        self._leadership = PgLeadership(store)
        self.leadership: Leadership = self._leadership
        self.clock: WallClock = self._clock

    async def run(
        self,
        *,
        on_commit: Callable[[], None],
        board: HealthBoard,
        task_status: trio.TaskStatus[StoreAccess] = trio.TASK_STATUS_IGNORED,
    ) -> None:
        await trio.to_thread.run_sync(self._upgrade)
        writer = PgWriter(self._store, on_commit=on_commit, board=board)
        try:
            await writer.read(self._clock.measure)
            now = self.clock.now()
            await writer.write(lambda conn: _claim_host(conn, self._host, now))
            await self._see_hosts(writer)
            log.info("PostgreSQL store %s ready (host %s)", self._store.url, self._host.name)
            async with trio.open_nursery() as nursery:
                # Other brokers' events reach this one's feed (its own commits tell it at once).
                channels = {
                    EVENTS_CHANNEL: lambda _payload: on_commit(),
                    WAKE_CHANNEL: self._wakeups.heard,
                }
                nursery.start_soon(partial(listen_forever, self._store, channels))
                self._wakeups.writer = writer
                try:
                    task_status.started(writer)
                    await self._beat_forever(writer, board)
                finally:
                    self._wakeups.writer = None
        finally:
            with trio.CancelScope(shield=True):
                self._leadership.close()  # another broker sweeps from now on
                stopped_at = self._utc_now()
                try:
                    await writer.write(lambda conn: _release_host(conn, self._host, stopped_at))
                except StoreFault as exc:
                    log.warning("could not record this broker's stop: %s", exc)
                writer.close()

    def _upgrade(self) -> None:
        conn = connect(self._store, application_name="pager upgrade")
        try:
            version = upgrade(conn, where=self._store.url or "")
        finally:
            conn.close()
        log.info("PostgreSQL store at schema version %d", version)

    async def _beat_forever(self, writer: PgWriter, board: HealthBoard) -> None:
        name = self._host.name
        while True:
            await trio.sleep(self._heartbeat)
            try:
                await writer.read(self._clock.measure)
                ours = await writer.write(partial(_beat, host=self._host, now=self.clock.now()))
                await self._see_hosts(writer)
            except StoreFault as exc:
                # The writer marked the board; the next beat tries again (it is what finds
                # the store back when nothing else asks).
                log.warning("heartbeat failed: %s", exc)
                continue
            if not ours:
                board.degrade(
                    "host",
                    f"another broker took the host name {name!r} in the shared store; give"
                    " each machine its own `[host] name` in config.toml",
                )

    async def _see_hosts(self, writer: PgWriter) -> None:
        """Refresh `hosts` from their heartbeats: alive while fresher than ALIVE_HEARTBEATS."""
        rows = await writer.read(
            lambda conn: conn.execute(
                sql("SELECT name, version, started_at, heartbeat_at FROM hosts ORDER BY name")
            ).fetchall()
        )
        fresh_after = self.clock.now() - ALIVE_HEARTBEATS * self._heartbeat
        this = self._host.name
        self.hosts.update(
            HostView(
                name=str(name),
                alive=name == this or float(beat) > fresh_after,
                version=str(version),
                started_at=float(started),
                heartbeat_at=float(beat),
                this=name == this,
            )
            for name, version, started, beat in rows
        )

    def read_side(self) -> PgReadSide:
        return PgReadSide(self._store)

    def event_log(self, *, inline: bool = False) -> EventLog:
        return ThreadedEventLog(PgEventLog(self._store), inline=inline)

    def exports(self) -> Exports:
        return PgExports(self._store)

    def status(self) -> dict[str, Any]:
        return {"kind": self.kind, "where": self._store.display(), "host": self._host.name}
