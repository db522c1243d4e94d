"""The operator's views port (pager/store/operator_ports.py) in its SQLite backend
(pager/store/sqlite_operator.py) on a real database: what each call answers, its pages' keys,
and that it reads on the read side (never waiting for an open write)."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from pager.domain.records import MessageState
from pager.store import close_database, open_database, views
from pager.store import messaging as ms
from pager.store.operator_ports import OperatorViews, Slice
from pager.store.read_views import ReadViews
from pager.store.sqlite_export import SqliteExports
from pager.store.sqlite_operator import SqliteOperatorViews
from tests.store.test_views import NOW, _attach, _identity, _send, _workspace

MISSING = "agt_0000000000000000"


@pytest.fixture
def conn(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    yield connection
    close_database(connection)


@pytest.fixture
async def port(tmp_path: Path, conn: sqlite3.Connection) -> AsyncIterator[OperatorViews]:
    reads = ReadViews(tmp_path / "pager.db")
    yield SqliteOperatorViews(reads)
    await reads.aclose()


async def test_operator_port_snapshot_with_and_without_agents(
    port: OperatorViews, conn: sqlite3.Connection
) -> None:
    """The whole state as the views build it, `broker` as given; without agents, the same
    totals and seq and no workspaces."""
    api = _workspace(conn, "api")
    alice, bob = _identity(conn, api, "alice"), _identity(conn, api, "bob")
    _attach(conn, alice)
    _send(conn, bob, alice)
    ms.record_event(conn, NOW, "test.marker", {})
    broker = {"ok": True, "pid": 7}

    whole = await port.snapshot(broker, agents=True)
    cheap = await port.snapshot(broker, agents=False)

    assert whole == views.snapshot(conn, broker)
    assert whole.broker == broker
    assert [a.alias for a in whole.workspaces[0].agents] == ["alice", "bob"]
    assert (cheap.workspaces, cheap.totals, cheap.seq) == ((), whole.totals, whole.seq)
    assert (whole.totals.attached, whole.totals.queued) == (1, 1)


async def test_operator_port_agents_pages_by_last_agent_id(
    port: OperatorViews, conn: sqlite3.Connection
) -> None:
    """Pages in agent-id order, each keyed by its last id while more follow, cover every
    agent once; workspace and archived filter."""
    api, web = _workspace(conn, "api"), _workspace(conn, "web")
    made = [_identity(conn, api, f"a{n}", archived=n % 2 == 0) for n in range(5)]
    made += [_identity(conn, web, f"w{n}") for n in range(2)]

    seen: list[str] = []
    after = None
    while True:
        page = await port.agents(workspace=None, archived=None, limit=3, after=after)
        assert isinstance(page, Slice)
        assert len(page.rows) <= 3
        seen += [agent.agent_id for agent in page.rows]
        if page.last is None:
            break
        assert page.last == page.rows[-1].agent_id
        after = page.last
    assert seen == sorted(made)

    archived = await port.agents(workspace="api-0a1b2c", archived=True, limit=50, after=None)
    assert {a.alias for a in archived.rows} == {"a0", "a2", "a4"}
    assert archived.last is None
    kept = await port.agents(workspace="api-0a1b2c", archived=False, limit=50, after=None)
    assert {a.alias for a in kept.rows} == {"a1", "a3"}
    nowhere = await port.agents(workspace="nope", archived=None, limit=50, after=None)
    assert nowhere == Slice((), None)


async def test_operator_port_agent_and_missing(
    port: OperatorViews, conn: sqlite3.Connection
) -> None:
    agent_id = _identity(conn, _workspace(conn, "api"), "solo")
    found = await port.agent(agent_id)
    assert found == views.get_agent(conn, agent_id)
    assert found is not None
    assert found.address == "solo@api-0a1b2c"
    assert await port.agent(MISSING) is None


async def test_operator_port_messages_pages_by_seq_with_filters(
    port: OperatorViews, conn: sqlite3.Connection
) -> None:
    """Newest first, keyed by the last seq while more follow; direction and state narrow
    it; an agent that does not exist is None, not an empty page."""
    ws = _workspace(conn, "api")
    me, other = _identity(conn, ws, "me"), _identity(conn, ws, "other")
    sent = [
        _send(conn, me, other, body=f"out {n}")
        if n % 2
        else _send(conn, other, me, MessageState.DEAD, body=f"in {n}")
        for n in range(7)
    ]

    seen: list[str] = []
    before = None
    while True:
        page = await port.messages(me, state=None, direction="both", limit=3, before=before)
        assert page is not None
        seen += [m.message_id for m in page.rows]
        if page.last is None:
            break
        assert isinstance(page.last, int)
        before = page.last
    assert seen == list(reversed(sent))

    inbound = await port.messages(me, state=None, direction="in", limit=50, before=None)
    assert inbound is not None
    assert inbound.last is None
    assert [m.body for m in inbound.rows] == ["in 6", "in 4", "in 2", "in 0"]
    assert {m.direction for m in inbound.rows} == {"in"}
    queued = await port.messages(
        me, state=MessageState.QUEUED, direction="both", limit=50, before=None
    )
    assert queued is not None
    assert [m.body for m in queued.rows] == ["out 5", "out 3", "out 1"]
    assert await port.messages(MISSING, state=None, direction="both", limit=5, before=None) is None
    # A known agent with no mail is an empty page.
    quiet = _identity(conn, ws, "quiet")
    assert await port.messages(quiet, state=None, direction="both", limit=5, before=None) == (
        Slice((), None)
    )


async def test_operator_port_reads_beside_an_open_write(
    port: OperatorViews, conn: sqlite3.Connection
) -> None:
    """The port reads on the read side: while the writer holds an uncommitted write, every
    call answers at once with the last committed state; after the commit it sees the change."""
    agent_id = _identity(conn, _workspace(conn, "api"), "early")
    conn.execute("BEGIN IMMEDIATE")
    late = _identity(conn, _workspace(conn, "web"), "late")
    try:
        with trio.fail_after(5):  # far below the 5 s busy timeout a blocked read would wait
            snap = await port.snapshot({}, agents=True)
            assert snap.totals.agents == 1
            page = await port.agents(workspace=None, archived=None, limit=10, after=None)
            assert [a.agent_id for a in page.rows] == [agent_id]
            assert await port.agent(late) is None
            assert (
                await port.messages(late, state=None, direction="both", limit=5, before=None)
                is None
            )
    finally:
        conn.execute("COMMIT")
    assert (await port.snapshot({}, agents=False)).totals.agents == 2
    assert await port.agent(late) is not None


def test_exports_port_reads_one_instant_a_batch_at_a_time(
    tmp_path: Path, conn: sqlite3.Connection
) -> None:
    """An export is every identity, then every message in send order, pulled in batches of
    the size asked; what is written after it began is not in it; `since` keeps later
    messages only."""
    api = _workspace(conn, "api")
    alice, bob = _identity(conn, api, "alice"), _identity(conn, api, "bob")
    sent = [_send(conn, alice, bob, body=f"m{n}") for n in range(3)]
    exports = SqliteExports(tmp_path / "pager.db")

    reader = exports.open(since=None)
    try:
        first = reader.batch(2)
        _send(conn, bob, alice, body="after the export began")  # committed meanwhile
        rest: list[dict[str, object]] = []
        while batch := reader.batch(2):
            assert len(batch) <= 2
            rest += batch
    finally:
        reader.close()
    records = first + rest
    assert [r["kind"] for r in records] == ["identity"] * 2 + ["message"] * 3
    assert {r["alias"] for r in records[:2]} == {"alice", "bob"}
    assert [r["message_id"] for r in records[2:]] == sent
    assert all(r["v"] == 1 for r in records)

    later = exports.open(since=NOW + 3600)  # every message here was sent at NOW
    try:
        assert [r["kind"] for r in later.batch(100)] == ["identity", "identity"]
    finally:
        later.close()
