"""The notification listener (pager/store/pg/_listen.py) on a real server: notifications reach
the handler on the event loop, and after its connection is cut the listener reconnects by
itself and tells each channel once (''), so whatever came while it was deaf is read."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio

from pager.store.pg import _listen
from pager.store.pg._database import connect
from tests.store.test_pg_schema import pg_store

CHANNEL = "pager_test"


async def test_notifications_arrive_and_a_cut_connection_is_caught_up(
    pg_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_listen, "RECONNECT_AFTER", 0.01)  # a timer of the listener's own
    store = pg_store(pg_dsn, tmp_path)
    heard: list[str] = []
    changed = trio.Event()

    def handler(payload: str) -> None:
        heard.append(payload)
        changed.set()

    async def until_heard(payload: str) -> None:
        nonlocal changed
        while payload not in heard:
            await changed.wait()
            changed = trio.Event()

    def notify(payload: str) -> None:
        with connect(store) as conn:
            conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))

    def cut_the_listener() -> None:
        with connect(store) as conn:
            rows: list[Any] = conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                " WHERE application_name = 'pager listen' AND datname = current_database()"
            ).fetchall()
        assert rows == [(True,)], rows

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(_listen.listen_forever, store, {CHANNEL: handler})
            await trio.to_thread.run_sync(notify, "one")
            await until_heard("one")
            await trio.to_thread.run_sync(cut_the_listener)
            # Sent while nobody listens: lost, as a notification may be; the catch-up ('')
            # after the reconnect is what makes the loss a delay.
            await trio.to_thread.run_sync(notify, "lost")
            await until_heard("")
            await trio.to_thread.run_sync(notify, "two")
            await until_heard("two")
            nursery.cancel_scope.cancel()
    assert heard[0] == "one"
    assert "" in heard[1:]
