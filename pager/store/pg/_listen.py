"""LISTEN on a dedicated connection, feeding the broker's event loop (SPEC §13): what another
broker committed reaches this one as a notification, at its commit.

psycopg's async API is asyncio-only, so a worker thread waits on the connection and hands each
notification to the trio loop. A notification is only a hint to look: if the connection breaks,
the listener reconnects and then tells every channel once, so that whoever listens reads on
from the database and a notification lost in between only delays.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

import psycopg
import trio

from pager.config import StoreConfig
from pager.store.pg._database import PgUnreachable, connect, first_line

log = logging.getLogger("pager.store")

#: Seconds the listening thread waits before it looks whether it should stop.
POLL = 0.5
#: Seconds between attempts to reconnect after the listening connection broke.
RECONNECT_AFTER = 1.0


async def listen_forever(
    store: StoreConfig,
    channels: Mapping[str, Callable[[str], None]],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Call `channels[name](payload)` on the event loop for each notification on `name`, until
    cancelled; started once the first LISTEN is in place."""
    token = trio.lowlevel.current_trio_token()
    stop = threading.Event()
    started = False

    def deliver(channel: str, payload: str) -> None:
        try:
            trio.from_thread.run_sync(channels[channel], payload, trio_token=token)
        except trio.RunFinishedError:
            stop.set()

    def listen() -> None:
        conn = connect(store, application_name="pager listen")
        try:
            for channel in channels:
                conn.execute(f'LISTEN "{channel}"')
            trio.from_thread.run_sync(ready.set, trio_token=token)
            while not stop.is_set():
                for note in conn.notifies(timeout=POLL):
                    deliver(note.channel, note.payload)
        except psycopg.OperationalError as exc:
            raise PgUnreachable(store.url or "", first_line(exc)) from None
        finally:
            conn.close()

    try:
        while True:
            ready = trio.Event()
            async with trio.open_nursery() as nursery:

                async def run_once(scope: trio.CancelScope = nursery.cancel_scope) -> None:
                    await _run_in_thread(listen, stop)
                    scope.cancel()  # the connection broke (or never came): start over

                nursery.start_soon(run_once)
                await ready.wait()
                if not started:
                    started = True
                    task_status.started()
                else:  # back after a break: whatever came meanwhile is to be read
                    log.info("listening for other brokers' commits again")
                    for handler in channels.values():
                        handler("")
                await trio.sleep_forever()
            await trio.sleep(RECONNECT_AFTER)
    finally:
        stop.set()


async def _run_in_thread(listen: Callable[[], None], stop: threading.Event) -> None:
    """`listen` in a thread (abandoned on cancel: it sees `stop` within POLL and ends); a
    lost connection is logged and ends this run, so the caller reconnects."""
    try:
        await trio.to_thread.run_sync(listen, abandon_on_cancel=True)
    except PgUnreachable as exc:
        log.warning("the notification connection broke: %s", exc)
