"""A broker on PostgreSQL when the database goes away (SPEC §13, Faults): sends fail at once
with `unavailable` (never a false success, never a hang), /health and `pager status` say the
store is unreachable, and once the server is back the broker carries on by itself, nothing that
was acknowledged lost. The test cluster is the tests' own (tests/pg_cluster.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest
import trio

from tests.e2e.conftest import (
    FAST_WINDOWS,
    Broker,
    mcp_session,
    postgres_env,
    start_broker,
    structured,
    tool_error,
)
from tests.launch.conftest import PagerHome
from tests.pg_cluster import PgCluster

#: A hang guard for one call while the database is down (not a timing check).
CALL_BOUND = 30


@pytest.fixture
def pg_broker(tmp_path: Path, pg_dsn: str) -> Iterator[Broker]:
    home = PagerHome(tmp_path / "home")
    yield start_broker(home, tmp_path / "repo", **FAST_WINDOWS, **postgres_env(pg_dsn, tmp_path))
    home.kill_all()


async def test_a_stopped_database_answers_unavailable_then_the_broker_recovers(
    pg_broker: Broker, pg_cluster: PgCluster
) -> None:
    broker = pg_broker
    alice = await broker.register("alice")
    bob = await broker.register("bob")
    sent_ok: list[str] = []
    async with mcp_session(broker.url, alice["token"]) as a:
        for n in range(3):
            sent = structured(await a.call_tool("send", {"to": "bob", "body": f"before {n}"}))
            sent_ok.append(sent["message_id"])
        await trio.to_thread.run_sync(pg_cluster.stop)
        try:
            with trio.fail_after(CALL_BOUND):
                refused = tool_error(await a.call_tool("send", {"to": "bob", "body": "lost?"}))
            assert refused["code"] == "unavailable", refused
            health = httpx2.get(broker.url + "/health", timeout=10).json()
            assert health["status"] == "degraded"
            assert any(d["kind"] == "store" for d in health["degraded"]), health
            status = await trio.to_thread.run_sync(broker.home.run, "status")
            assert "degraded      store" in status.stdout, status.stdout
        finally:
            await trio.to_thread.run_sync(pg_cluster.start)
        # Back: the next send goes through on a new connection, with no retry by the caller.
        with trio.fail_after(CALL_BOUND):
            sent = structured(await a.call_tool("send", {"to": "bob", "body": "after"}))
        sent_ok.append(sent["message_id"])
    health = httpx2.get(broker.url + "/health", timeout=10).json()
    assert health["status"] == "ok", health
    async with mcp_session(broker.url, bob["token"]) as b:
        claims = structured(await b.call_tool("fetch", {"limit": 50}))["claims"]
    assert [c["message"]["id"] for c in claims] == sent_ok  # nothing lost, nothing invented
