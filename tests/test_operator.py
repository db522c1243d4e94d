"""The operator service (pager/operator.py) over its views port, and the read side behind
that port's SQLite backend.

The service against a fake `OperatorViews`: cursors in and out, and what it says when an agent
is not there. The read-only connection (pager/store/read_views.py `ReadViews`) on real SQLite:
it cannot write, and it reads while the writer holds its write lock, without waiting for it."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
import trio

from actors._runtime import ActorRef
from actors.directory import DirectoryMessage
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.records import MessageState
from pager.domain.views import (
    AgentView,
    MessageView,
    Snapshot,
    Totals,
    decode_cursor,
    encode_cursor,
)
from pager.operator import OperatorService
from pager.store import close_database, open_database
from pager.store.operator_ports import OperatorViews, Slice
from pager.store.read_views import ReadViews

AGENT = "agt_1111111111111111"


@attrs.define
class FakeViews:
    """An `OperatorViews` that answers what it is given and records what it was asked."""

    agents_page: Slice[AgentView, str] = attrs.field(factory=lambda: Slice((), None))
    messages_page: Slice[MessageView, int] | None = attrs.field(factory=lambda: Slice((), None))
    asked: list[tuple[str, dict[str, Any]]] = attrs.field(factory=list)

    async def snapshot(self, broker: dict[str, Any], *, agents: bool) -> Snapshot:
        self.asked.append(("snapshot", {"broker": broker, "agents": agents}))
        return Snapshot(broker=broker, workspaces=(), totals=Totals(0, 0, 0, 0, 0, 0, 0), seq=3)

    async def agents(
        self, *, workspace: str | None, archived: bool | None, limit: int, after: str | None
    ) -> Slice[AgentView, str]:
        self.asked.append(
            (
                "agents",
                {"workspace": workspace, "archived": archived, "limit": limit, "after": after},
            )
        )
        return self.agents_page

    async def agent(self, agent_id: str) -> AgentView | None:
        self.asked.append(("agent", {"agent_id": agent_id}))
        return None

    async def messages(
        self,
        agent_id: str,
        *,
        state: MessageState | None,
        direction: str,
        limit: int,
        before: int | None,
    ) -> Slice[MessageView, int] | None:
        self.asked.append(
            (
                "messages",
                {"state": state, "direction": direction, "limit": limit, "before": before},
            )
        )
        return self.messages_page


def _service(views: OperatorViews) -> OperatorService:
    directory = cast("ActorRef[DirectoryMessage]", None)  # reads never reach the directory
    return OperatorService(directory, views, {"pid": 42})


async def test_operator_snapshot_passes_the_broker_part() -> None:
    views = FakeViews()
    service = _service(views)

    snap = await service.snapshot(agents=False)

    healthy = {"ok": True, "pid": 42, "status": "ok"}
    assert snap.broker == healthy
    assert views.asked == [("snapshot", {"broker": healthy, "agents": False})]
    snap.broker["pid"] = 0  # a copy: the service's own stays as it was
    assert (await service.snapshot()).broker == healthy
    assert views.asked[-1][1]["agents"] is True
    # A degradation shows at the next snapshot, as on /health.
    service.board.degrade("store", "the disk is full")
    broker = (await service.snapshot()).broker
    assert broker["status"] == "degraded"
    assert [d["kind"] for d in broker["degraded"]] == ["store"]


async def test_operator_pages_turn_keys_into_cursors_and_back() -> None:
    """A page's last key comes back as an opaque cursor; that cursor, passed in, reaches the
    port as the key again; the last page has no cursor."""
    views = FakeViews(agents_page=Slice((), AGENT), messages_page=Slice((), 17))
    service = _service(views)

    agents = await service.agents(workspace="api-0a1b2c", limit=2)
    assert agents.next_cursor is not None
    assert decode_cursor("agents", agents.next_cursor, str) == AGENT
    await service.agents(archived=True, limit=2, cursor=agents.next_cursor)
    assert views.asked[-1] == (
        "agents",
        {"workspace": None, "archived": True, "limit": 2, "after": AGENT},
    )

    messages = await service.messages(AGENT, limit=5)
    assert messages.next_cursor == encode_cursor("messages", 17)
    await service.messages(
        AGENT, state=MessageState.DEAD, direction="in", limit=5, cursor=messages.next_cursor
    )
    assert views.asked[-1] == (
        "messages",
        {"state": MessageState.DEAD, "direction": "in", "limit": 5, "before": 17},
    )

    views.agents_page, views.messages_page = Slice((), None), Slice((), None)
    assert (await service.agents(limit=2)).next_cursor is None
    assert (await service.messages(AGENT, limit=5)).next_cursor is None


async def test_operator_refuses_a_foreign_cursor_before_reading() -> None:
    views = FakeViews()
    service = _service(views)
    with pytest.raises(PagerError) as agents:
        await service.agents(limit=2, cursor=encode_cursor("messages", 17))
    with pytest.raises(PagerError) as messages:
        await service.messages(AGENT, limit=2, cursor=encode_cursor("agents", AGENT))
    assert agents.value.code is messages.value.code is ErrorCode.VALIDATION_FAILED
    assert agents.value.details == {"parameter": "cursor"}
    assert views.asked == []


async def test_operator_says_an_agent_is_not_there() -> None:
    """An agent the port does not know, or whose messages it has no page for, is
    `not_found`, naming it and where to look."""
    views = FakeViews(messages_page=None)
    service = _service(views)
    for call in (service.agent(AGENT), service.messages(AGENT, limit=5)):
        with pytest.raises(PagerError) as missing:
            await call
        assert missing.value.code is ErrorCode.NOT_FOUND
        assert missing.value.details == {"agent_id": AGENT}
        assert missing.value.message == (
            f"no agent {AGENT!r} (it never existed, or was purged or reaped);"
            " GET /v1/agents lists the agents there are"
        )


@pytest.fixture
def writer(tmp_path: Path) -> Iterator[sqlite3.Connection]:
    connection = open_database(tmp_path / "pager.db")
    connection.execute("INSERT INTO meta (key, value) VALUES ('colour', 'blue')")
    yield connection
    close_database(connection)


@pytest.fixture
async def reads(tmp_path: Path, writer: sqlite3.Connection) -> AsyncIterator[ReadViews]:
    views = ReadViews(tmp_path / "pager.db")
    yield views
    await views.aclose()


def _colour(conn: sqlite3.Connection) -> str:
    row = conn.execute("SELECT value FROM meta WHERE key = 'colour'").fetchone()
    return str(row[0])


async def test_read_views_refuse_to_write(reads: ReadViews, writer: sqlite3.Connection) -> None:
    """A write through the read connection fails and changes nothing."""
    with pytest.raises(sqlite3.OperationalError):
        await reads.read(lambda c: c.execute("UPDATE meta SET value = 'red'"))
    assert _colour(writer) == "blue"
    assert await reads.read(_colour) == "blue"  # the connection is still usable


async def test_read_views_read_beside_an_open_write(
    reads: ReadViews, writer: sqlite3.Connection
) -> None:
    """While the writer holds an uncommitted write, a read answers at once with the last
    committed state; after the commit the next read sees the change."""
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("UPDATE meta SET value = 'red' WHERE key = 'colour'")
    try:
        with trio.fail_after(5):  # far below the 5 s busy timeout a blocked read would wait
            assert await reads.read(_colour) == "blue"
    finally:
        writer.execute("COMMIT")
    assert await reads.read(_colour) == "red"


async def test_read_views_one_transaction_per_read(
    reads: ReadViews, writer: sqlite3.Connection
) -> None:
    """Everything one read does sees one instant: a commit landing in the middle of it is not
    seen until the next read."""

    def twice(conn: sqlite3.Connection) -> tuple[str, str]:
        first = _colour(conn)
        writer.execute("UPDATE meta SET value = 'green' WHERE key = 'colour'")  # autocommit
        return first, _colour(conn)

    assert await reads.read(twice) == ("blue", "blue")
    assert await reads.read(_colour) == "green"
