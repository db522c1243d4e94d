"""The operator's ports (pager/store/operator_ports.py): the views (`OperatorViews`) and the
export (`Exports`), run against each backend unchanged (SQLite today; PostgreSQL adds itself to
BACKENDS): what each call answers, its pages' keys, and that it reads on the read side (never
waiting for an open write).

The ports observe; the state they show is made through the other ports where they exist (the
inbox port sends, claims, dead-letters and records an event, the directory port archives, the
event log answers the seq) and otherwise through `Backend`'s seeding, which goes through the
backend's writer (workspaces, identities, attached sessions, a write held open).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import AsyncIterator
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors._runtime import start_actor
from actors.store_writer import Checkpoint, CheckpointActor
from pager.domain.clock import iso
from pager.domain.delivery import Via
from pager.domain.exports import Exports
from pager.domain.records import MessageState
from pager.domain.retention import Action
from pager.domain.views import AgentView, Correspondent, InboxCounts, SessionView, Totals
from pager.domain.workspace import Workspace
from pager.store import messaging as ms
from pager.store.events import open_event_log
from pager.store.operator_ports import OperatorViews, Slice
from pager.store.pg._export import PgExports
from pager.store.ports import Directory, EventLog, Inbox, NewMessage
from pager.store.read_views import ReadViews
from pager.store.sql_directory import SqlDirectory
from pager.store.sql_operator import SqlOperatorViews
from pager.store.sql_ports import SqlInbox, Writer
from pager.store.sqlite_export import SqliteExports
from pager.store.sqlite_writer import QuickReads, SqliteWriter
from tests.store import test_ports_contract as contract

NOW, POLICY, LIMITS = contract.NOW, contract.POLICY, contract.LIMITS
API = Workspace(key="/src/api", slug="api-0a1b2c", path="/src/api")
WEB = Workspace(key="/src/web", slug="web-0a1b2c", path="/src/web")
MISSING = "agt_0000000000000000"
#: How long a write held open waits to be let go before it gives up (and rolls back).
HOLD_LIMIT = 30.0


@attrs.define
class Backend:
    """The operator's ports of one backend, the ports that make the state they show, and the
    seeding those ports do not offer (through the backend's writer)."""

    views: OperatorViews
    exports: Exports
    inbox: Inbox
    directory: Directory
    events: EventLog
    checkpoint: Writer

    async def identity(
        self, alias: str, workspace: Workspace = API, *, archived: bool = False
    ) -> str:
        """A durable shell identity, made at NOW (its workspace too); `archived` by the
        operator at NOW, through the directory port."""
        agent_id, op = contract.new_identity(alias, workspace)
        await self.checkpoint.write(op)
        if archived:
            await self.directory.retire(agent_id, Action.ARCHIVE, "operator", now=NOW)
        return agent_id

    @contextlib.asynccontextmanager
    async def uncommitted_identity(self, alias: str, workspace: Workspace) -> AsyncIterator[str]:
        """An identity (its workspace too) written by the backend's writer, whose transaction
        stays open, uncommitted, while the block runs; committed when the block ends."""
        agent_id, op = contract.new_identity(alias, workspace)
        token = trio.lowlevel.current_trio_token()
        begun, let_go = trio.Event(), threading.Event()

        def held(conn: Any) -> None:  # in the writer's worker thread (`heavy`)
            try:
                op(conn)
            finally:
                token.run_sync_soon(begun.set)
            if not let_go.wait(HOLD_LIMIT):
                raise TimeoutError("the held write was never let go")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(self.checkpoint.write, held, heavy=True))
            try:
                with trio.fail_after(HOLD_LIMIT):
                    await begun.wait()
                yield agent_id
            finally:
                let_go.set()

    async def attach(self, identity_id: str) -> str:
        """An attached session of the identity (epoch 1, made at NOW); its id."""
        session = contract.new_session(identity_id)
        await self.checkpoint.write(lambda conn: ms.insert_session(conn, session))
        return session.id

    async def send(self, sender: str, to: str, body: str = "hello") -> str:
        """A message sent at NOW, queued for `to`: its id."""
        send = NewMessage(sender, body, thread=None, reply_to=None, idempotency_key=None)
        changed = await self.inbox.enqueue(
            to, send, now=NOW, idempotent_since=NOW - 600, limits=LIMITS, policy=POLICY
        )
        return changed.value.message.id

    async def claim(self, who: str, limit: int) -> list[str]:
        """The ids of the oldest `limit` messages waiting for `who`, claimed just after NOW."""
        changed = await self.inbox.claim(
            who, session_id=None, limit=limit, via=Via.FETCH, now=NOW + 1, policy=POLICY
        )
        return [view.claim.message.id for view in changed.value]

    async def expire(self, who: str) -> int:
        """Every message waiting for `who` (sent at NOW) dies of its age: how many."""
        changed = await self.inbox.lapse(who, now=NOW + POLICY.message_expiry, policy=POLICY)
        return changed.value


@contextlib.asynccontextmanager
async def sqlite_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    """The writer, its quick reads and the read side as the store ports' contract builds them
    (tests/store/test_ports_contract.py), but not inline: the writer runs a `heavy` write in a
    worker thread, so a write can be held open while the read side answers."""
    database = tmp_path / "pager.db"
    async with trio.open_nursery() as nursery:
        ref = await start_actor(
            nursery, CheckpointActor(SqliteWriter(database, None, lambda: "now")), name="store"
        )
        quick = QuickReads(database)
        checkpoint = Checkpoint(ref, quick)
        reads = ReadViews(database)
        events = open_event_log(database, inline=True)
        try:
            yield Backend(
                SqlOperatorViews(reads),
                SqliteExports(database),
                SqlInbox(checkpoint),
                SqlDirectory(checkpoint),
                events,
                checkpoint,
            )
        finally:
            with trio.CancelScope(shield=True):
                await reads.aclose()
                await events.close()
            quick.close()
            nursery.cancel_scope.cancel()


@contextlib.asynccontextmanager
async def postgresql_backend(tmp_path: Path, dsn: str) -> AsyncIterator[Backend]:
    """The same ports on PostgreSQL, the writer not inline (a held write runs in its worker
    thread while the views answer)."""
    with contract.postgresql_parts(tmp_path, dsn, inline=False) as (store, writer, events):
        yield Backend(
            SqlOperatorViews(writer),
            PgExports(store),
            SqlInbox(writer),
            SqlDirectory(writer),
            events,
            writer,
        )


@pytest.fixture(params=contract.BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with contract.backend_of(request, tmp_path, sqlite_backend, postgresql_backend) as it:
        yield it


def _at(seconds: float) -> str:
    """A time as the views show it."""
    text = iso(seconds)
    assert text is not None
    return text


# -- OperatorViews ---------------------------------------------------------------------------


async def test_operator_port_snapshot_with_and_without_agents(backend: Backend) -> None:
    """The whole state: workspaces by slug with their agents by alias (archived ones too),
    live sessions, inbox counts, totals that add up, the latest event seq, `broker` as given;
    without agents, the same totals and seq and no workspaces."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    old = await backend.identity("old", WEB, archived=True)
    session = await backend.attach(alice)
    taken = await backend.send(bob, alice, "taken")
    await backend.send(bob, alice, "waiting")
    assert await backend.claim(alice, limit=1) == [taken]
    await backend.send(alice, bob, "too late")
    assert await backend.expire(bob) == 1
    before = await backend.events.latest_seq()
    await backend.inbox.record(NOW, "test.marker", {})
    [(marker, _, kind, _)] = await backend.events.rows_after(before, 10)
    assert kind == "test.marker"
    broker = {"ok": True, "pid": 7}

    whole = await backend.views.snapshot(broker, agents=True)
    cheap = await backend.views.snapshot(broker, agents=False)

    assert whole.broker == broker
    assert [(w.slug, w.path, [a.alias for a in w.agents]) for w in whole.workspaces] == [
        ("api-0a1b2c", "/src/api", ["alice", "bob"]),
        ("web-0a1b2c", "/src/web", ["old"]),
    ]
    [[a, b], [o]] = [w.agents for w in whole.workspaces]
    assert [a.agent_id, b.agent_id, o.agent_id] == [alice, bob, old]
    assert (a.attached, b.attached, o.attached) == (True, False, False)
    assert a.sessions == (SessionView(session, 1, _at(NOW), _at(NOW + 90)),)
    assert (a.inbox, b.inbox, o.inbox) == (
        InboxCounts(queued=1, claimed=1),
        InboxCounts(dead=1),
        InboxCounts(),
    )
    assert (a.archived, o.archived, o.archived_at) == (False, True, _at(NOW))
    assert whole.totals == Totals(
        workspaces=2, agents=3, attached=1, archived=1, queued=1, claimed=1, dead=1
    )
    assert whole.seq == marker
    assert (cheap.broker, cheap.workspaces, cheap.totals, cheap.seq) == (
        broker,
        (),
        whole.totals,
        marker,
    )


async def test_operator_port_agents_pages_by_last_agent_id(backend: Backend) -> None:
    """Pages in agent-id order, each keyed by its last id while more follow, cover every
    agent once; workspace and archived filter."""
    made = [await backend.identity(f"a{n}", API, archived=n % 2 == 0) for n in range(5)]
    made += [await backend.identity(f"w{n}", WEB) for n in range(2)]

    seen: list[str] = []
    after = None
    while True:
        page = await backend.views.agents(workspace=None, archived=None, limit=3, after=after)
        assert isinstance(page, Slice)
        assert len(page.rows) <= 3
        seen += [agent.agent_id for agent in page.rows]
        if page.last is None:
            break
        assert page.last == page.rows[-1].agent_id
        after = page.last
    assert seen == sorted(made)

    views = backend.views
    archived = await views.agents(workspace="api-0a1b2c", archived=True, limit=50, after=None)
    assert {a.alias for a in archived.rows} == {"a0", "a2", "a4"}
    assert all(a.archived for a in archived.rows)
    assert archived.last is None
    kept = await views.agents(workspace="api-0a1b2c", archived=False, limit=50, after=None)
    assert {a.alias for a in kept.rows} == {"a1", "a3"}
    web = await views.agents(workspace="web-0a1b2c", archived=None, limit=50, after=None)
    assert [a.agent_id for a in web.rows] == sorted(made[5:])
    nowhere = await views.agents(workspace="nope", archived=None, limit=50, after=None)
    assert nowhere == Slice((), None)


async def test_operator_port_agent_and_missing(backend: Backend) -> None:
    agent_id = await backend.identity("solo")
    assert await backend.views.agent(agent_id) == AgentView(
        agent_id=agent_id,
        alias="solo",
        address="solo@api-0a1b2c",
        workspace="api-0a1b2c",
        implementation="shell",
        durable=True,
        archived=False,
        attached=False,
        sessions=(),
        inbox=InboxCounts(),
        last_seen=_at(NOW),
        created_at=_at(NOW),
        archived_at=None,
    )
    assert await backend.views.agent(MISSING) is None


async def test_operator_port_messages_pages_by_seq_with_filters(backend: Backend) -> None:
    """Newest first, keyed by the last seq while more follow; direction and state narrow
    it; an agent that does not exist is None, not an empty page."""
    me, other = await backend.identity("me"), await backend.identity("other")
    sent = [
        await backend.send(me, other, f"out {n}")
        if n % 2
        else await backend.send(other, me, f"in {n}")
        for n in range(7)
    ]
    assert await backend.expire(me) == 4  # what came in is dead; what went out waits
    views = backend.views

    seen: list[str] = []
    before = None
    while True:
        page = await views.messages(me, state=None, direction="both", limit=3, before=before)
        assert page is not None
        assert len(page.rows) <= 3
        seen += [m.message_id for m in page.rows]
        if page.last is None:
            break
        assert isinstance(page.last, int)
        before = page.last
    assert seen == list(reversed(sent))

    inbound = await views.messages(me, state=None, direction="in", limit=50, before=None)
    assert inbound is not None
    assert inbound.last is None
    assert [m.body for m in inbound.rows] == ["in 6", "in 4", "in 2", "in 0"]
    assert {(m.direction, m.state, m.dead_reason) for m in inbound.rows} == {
        ("in", "dead", "expired")
    }
    assert inbound.rows[0].sender == Correspondent(other, "other", "other@api-0a1b2c")
    assert inbound.rows[0].recipient == Correspondent(me, "me", "me@api-0a1b2c")
    queued = await views.messages(
        me, state=MessageState.QUEUED, direction="both", limit=50, before=None
    )
    assert queued is not None
    assert [m.body for m in queued.rows] == ["out 5", "out 3", "out 1"]
    assert {m.direction for m in queued.rows} == {"out"}
    dead_out = await views.messages(
        me, state=MessageState.DEAD, direction="out", limit=50, before=None
    )
    assert dead_out == Slice((), None)
    assert await views.messages(MISSING, state=None, direction="both", limit=5, before=None) is None
    # A known agent with no mail is an empty page.
    quiet = await backend.identity("quiet")
    assert await views.messages(quiet, state=None, direction="both", limit=5, before=None) == (
        Slice((), None)
    )


async def test_operator_port_reads_beside_an_open_write(backend: Backend) -> None:
    """The port reads on the read side: while the writer holds an uncommitted write, every
    call answers at once with the last committed state; after the commit it sees the change."""
    views = backend.views
    early = await backend.identity("early")
    async with backend.uncommitted_identity("late", WEB) as late:
        with trio.fail_after(4):  # below the 5 s busy timeout a blocked read would wait
            snap = await views.snapshot({}, agents=True)
            assert (snap.totals.workspaces, snap.totals.agents) == (1, 1)
            page = await views.agents(workspace=None, archived=None, limit=10, after=None)
            assert [a.agent_id for a in page.rows] == [early]
            assert await views.agent(late) is None
            assert (
                await views.messages(late, state=None, direction="both", limit=5, before=None)
                is None
            )
    assert (await views.snapshot({}, agents=False)).totals.agents == 2
    found = await views.agent(late)
    assert found is not None
    assert found.address == "late@web-0a1b2c"


# -- Exports ---------------------------------------------------------------------------------


async def test_exports_port_reads_one_instant_a_batch_at_a_time(backend: Backend) -> None:
    """An export is every identity, then every message in send order, pulled in batches of
    the size asked; what is written after it began is not in it; `since` keeps later
    messages only."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    sent = [await backend.send(alice, bob, f"m{n}") for n in range(3)]

    reader = await backend.exports.open(since=None)
    try:
        first = await reader.batch(2)
        # Committed meanwhile:
        await backend.send(bob, alice, "after the export began")
        await backend.identity("carol")
        rest: list[dict[str, object]] = []
        while batch := await reader.batch(2):
            assert len(batch) <= 2
            rest += batch
    finally:
        await reader.close()
    records = first + rest
    assert [r["kind"] for r in records] == ["identity"] * 2 + ["message"] * 3
    assert {r["alias"] for r in records[:2]} == {"alice", "bob"}
    assert [r["message_id"] for r in records[2:]] == sent
    assert all(r["v"] == 1 for r in records)

    later = await backend.exports.open(since=NOW + 3600)  # every message here was sent at NOW
    try:
        assert [r["kind"] for r in await later.batch(100)] == ["identity"] * 3
    finally:
        await later.close()
