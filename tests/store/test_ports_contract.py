"""The store ports' contract (pager/store/ports.py): what every backend must do, run against
each backend unchanged (SQLite today; PostgreSQL adds itself to BACKENDS).

Only the ports are used to act and to observe, except to seed identities and sessions (the
directory port comes later) and to read a message's state, through `Backend`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import attrs
import pytest
import trio

from actors._runtime import start_actor
from actors.store_writer import Checkpoint, CheckpointActor
from pager.config import StoreConfig
from pager.domain import ids
from pager.domain.clock import iso
from pager.domain.delivery import ClaimPolicy, RedeliverySchedule, Via
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.names import alias_key
from pager.domain.records import Identity, MessageState, Session, SessionState
from pager.domain.registration import Registration
from pager.domain.retention import Action
from pager.domain.windows import Windows
from pager.domain.workspace import Workspace
from pager.store import messaging as ms
from pager.store._refusals import refused_sends
from pager.store._sql import sql
from pager.store.events import EventLogReader, open_event_log
from pager.store.off_loop import ThreadedEventLog
from pager.store.pg._conn import PgConn
from pager.store.pg._database import connect, upgrade
from pager.store.pg._writer import PgWriter
from pager.store.ports import (
    ClaimFor,
    Directory,
    EventLog,
    Inbox,
    NewMessage,
    Retention,
    Sessions,
)
from pager.store.read_views import ReadViews
from pager.store.sql_directory import SqlDirectory
from pager.store.sql_ports import SqlInbox, SqlRetention, SqlSessions, Writer
from pager.store.sqlite_writer import QuickReads, SqliteWriter
from tests.store.test_pg_schema import pg_store

#: Before the present: PostgreSQL compares claim deadlines on its own clock, never later.
NOW = 1_728_000_000.0  # a whole day, in the past
POLICY = ClaimPolicy(ack_wait=60.0, max_attempts=2, message_expiry=3600.0)
LIMITS = SendLimits(
    max_hops=0, agent_sends_per_hour=0, pair_sends_per_hour=0, token_sends_per_hour=0
)
WORKSPACE = "/contract/repo"
HERE = Workspace(WORKSPACE, "repo-contract", WORKSPACE)


def new_identity(alias: str, workspace: Workspace = HERE) -> tuple[str, Callable[[Any], None]]:
    """A durable shell identity made at NOW: its id, and the write that makes it (its
    workspace too) on the backend's connection. The seeding every suite shares."""
    agent = Identity(
        id=ids.new_agent_id(),
        workspace_key=workspace.key,
        alias=alias,
        durable=True,
        implementation="shell",
        created_at=NOW,
        last_seen=NOW,
    )

    def op(conn: Any) -> None:  # the backend's connection
        ms.ensure_workspace(conn, workspace, NOW)
        ms.insert_identity(conn, agent, alias_key(alias))

    return agent.id, op


def new_session(identity_id: str) -> Session:
    """An attached session of the identity (epoch 1, made at NOW, leased for 90 s)."""
    return Session(
        id=ids.new_session_id(),
        identity_id=identity_id,
        epoch=1,
        token_hash=ids.hash_token(ids.new_token(ids.Kind.SESSION_TOKEN)),
        resume_hash=ids.hash_token(ids.new_token(ids.Kind.RESUME_TOKEN)),
        state=SessionState.ATTACHED,
        created_at=NOW,
        lease_expires_at=NOW + 90,
    )


@attrs.define
class Backend:
    """The ports of one backend, and the seeding and reading the ports do not offer yet."""

    inbox: Inbox
    sessions: Sessions
    checkpoint: Writer
    directory: Directory
    retention: Retention
    events: EventLog

    async def identity(self, alias: str) -> str:
        agent_id, op = new_identity(alias)
        await self.checkpoint.write(op)
        return agent_id

    async def attach(self, identity_id: str, host: str = "") -> Session:
        session = attrs.evolve(new_session(identity_id), host=host)
        await self.checkpoint.write(lambda conn: ms.insert_session(conn, session))
        return session

    async def state(self, message_id: str) -> tuple[MessageState, str | None]:
        message = await self.checkpoint.lookup(lambda conn: ms.get_message(conn, message_id))
        assert message is not None
        return message.state, message.dead_reason


@contextlib.asynccontextmanager
async def sqlite_backend(tmp_path: Path) -> AsyncIterator[Backend]:
    database = tmp_path / "pager.db"
    async with trio.open_nursery() as nursery:
        ref = await start_actor(
            nursery,
            CheckpointActor(SqliteWriter(database, None, lambda: "now", inline=True)),
            name="store",
        )
        quick = QuickReads(database)
        checkpoint = Checkpoint(ref, quick)
        reads = ReadViews(database, inline=True)
        events = open_event_log(database, inline=True)
        try:
            yield Backend(
                SqlInbox(checkpoint),
                SqlSessions(checkpoint),
                checkpoint,
                SqlDirectory(checkpoint),
                SqlRetention(checkpoint, reads),
                events,
            )
        finally:
            await events.close()
            await reads.aclose()
            quick.close()
            nursery.cancel_scope.cancel()


@contextlib.contextmanager
def postgresql_parts(
    tmp_path: Path, dsn: str, *, inline: bool
) -> Iterator[tuple[StoreConfig, PgWriter, EventLog]]:
    """A fresh database of the tests' cluster, upgraded; its writer and its event log."""
    store = pg_store(dsn, tmp_path)
    with connect(store) as conn:
        upgrade(conn, where="test")
    writer = PgWriter(store, inline=inline)
    reader = EventLogReader(PgConn(connect(store)))
    try:
        yield store, writer, ThreadedEventLog(reader, inline=inline)
    finally:
        reader.close()
        writer.close()


@contextlib.asynccontextmanager
async def postgresql_backend(tmp_path: Path, dsn: str) -> AsyncIterator[Backend]:
    """The same ports on PostgreSQL: the store's statements through pager/store/pg's
    connection adapter and writer, run inline."""
    with postgresql_parts(tmp_path, dsn, inline=True) as (_, writer, events):
        yield Backend(
            SqlInbox(writer),
            SqlSessions(writer),
            writer,
            SqlDirectory(writer),
            SqlRetention(writer, writer),
            events,
        )


#: Each suite's backends: SQLite, and PostgreSQL on a fresh database of the tests' cluster.
BACKENDS = ("sqlite", "postgresql")
B = TypeVar("B")


@contextlib.asynccontextmanager
async def backend_of(
    request: pytest.FixtureRequest,
    tmp_path: Path,
    sqlite: Callable[[Path], AbstractAsyncContextManager[B]],
    postgresql: Callable[[Path, str], AbstractAsyncContextManager[B]],
) -> AsyncIterator[B]:
    """The backend a suite's `backend` fixture is parametrised with (`request.param`)."""
    if request.param == "sqlite":
        async with sqlite(tmp_path) as opened:
            yield opened
    else:
        async with postgresql(tmp_path, request.getfixturevalue("pg_dsn")) as opened:
            yield opened


@pytest.fixture(params=BACKENDS)
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[Backend]:
    async with backend_of(request, tmp_path, sqlite_backend, postgresql_backend) as opened:
        yield opened


def _send(sender: str, body: str, key: str | None = None) -> NewMessage:
    return NewMessage(sender, body, thread=None, reply_to=None, idempotency_key=key)


async def _enqueue(backend: Backend, sender: str, to: str, body: str, now: float = NOW) -> str:
    changed = await backend.inbox.enqueue(
        to, _send(sender, body), now=now, idempotent_since=now - 600, limits=LIMITS, policy=POLICY
    )
    return changed.value.message.id


async def _claim(backend: Backend, who: str, now: float, limit: int = 10) -> list[str]:
    changed = await backend.inbox.claim(
        who, session_id=None, limit=limit, via=Via.FETCH, now=now, policy=POLICY
    )
    return [view.claim.token for view in changed.value]


async def test_ports_claim_in_send_order_and_keep_next_due(backend: Backend) -> None:
    """Claims come in send order with their addresses; the next due time is the ack wait."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    for n in range(3):
        await _enqueue(backend, alice, bob, f"m{n}", now=NOW + n)
    changed = await backend.inbox.claim(
        bob, session_id=None, limit=2, via=Via.FETCH, now=NOW + 10, policy=POLICY
    )
    assert [v.claim.message.body for v in changed.value] == ["m0", "m1"]
    assert changed.value[0].sender_address.startswith("alice@")
    assert changed.value[0].claim.attempt == 1
    assert changed.next_due == NOW + 10 + POLICY.ack_wait
    assert await backend.inbox.next_due(bob) == changed.next_due


async def test_ports_ack_rules(backend: Backend) -> None:
    """SPEC §8: applied once; then already_acknowledged; not_yours; unknown_token; a lapsed
    claim is expired, and superseded once the message was claimed again."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    await _enqueue(backend, alice, bob, "one")
    await _enqueue(backend, alice, bob, "two", now=NOW + 1)
    [first, second] = await _claim(backend, bob, NOW + 2)
    acked = await backend.inbox.ack(bob, [first], now=NOW + 3, policy=POLICY)
    assert acked.value.applied == [first]
    again = await backend.inbox.ack(bob, [first, "clm_unknown"], now=NOW + 4, policy=POLICY)
    assert again.value.not_applied == [
        (first, "already_acknowledged"),
        ("clm_unknown", "unknown_token"),
    ]
    foreign = await backend.inbox.ack(alice, [second], now=NOW + 4, policy=POLICY)
    assert foreign.value.not_applied == [(second, "not_yours")]
    await backend.inbox.lapse(bob, now=NOW + 100, policy=POLICY)
    lapsed = await backend.inbox.ack(bob, [second], now=NOW + 101, policy=POLICY)
    assert lapsed.value.not_applied == [(second, "expired")]
    [third] = await _claim(backend, bob, NOW + 102)
    superseded = await backend.inbox.ack(bob, [second], now=NOW + 103, policy=POLICY)
    assert superseded.value.not_applied == [(second, "superseded")]
    assert (await backend.inbox.ack(bob, [third], now=NOW + 104, policy=POLICY)).value.applied


async def test_ports_lapse_requeues_then_dead_letters_at_max_attempts(backend: Backend) -> None:
    """A claim past its ack wait requeues its message; the last attempt's lapse kills it."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    message = await _enqueue(backend, alice, bob, "flaky reader")
    assert len(await _claim(backend, bob, NOW)) == 1
    assert (await backend.inbox.lapse(bob, now=NOW + 61, policy=POLICY)).value == 1
    assert (await backend.state(message)) == (MessageState.QUEUED, None)
    assert len(await _claim(backend, bob, NOW + 62)) == 1
    await backend.inbox.lapse(bob, now=NOW + 200, policy=POLICY)
    assert (await backend.state(message)) == (MessageState.DEAD, "max_attempts")
    assert await _claim(backend, bob, NOW + 201) == []


async def test_ports_refusal_waits_on_the_schedule(backend: Backend) -> None:
    """A refused delivery is offered again only after the schedule's delay."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    await _enqueue(backend, alice, bob, "retry me")
    pushed = await backend.inbox.claim(
        bob, session_id=None, limit=5, via=Via.DELIVERY, now=NOW, policy=POLICY
    )
    [token] = [v.claim.token for v in pushed.value]
    refused = await backend.inbox.refuse(
        bob,
        [token],
        now=NOW + 1,
        policy=attrs.evolve(POLICY, redelivery=RedeliverySchedule((30.0,))),
    )
    assert refused.value == 1
    assert refused.next_due == NOW + 31
    assert await _claim(backend, bob, NOW + 30) == []
    assert len(await _claim(backend, bob, NOW + 31)) == 1


async def test_ports_release_does_not_count_an_attempt(backend: Backend) -> None:
    """A claim handed back unshown: the message waits again as if never claimed."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    message = await _enqueue(backend, alice, bob, "not shown")
    [token] = await _claim(backend, bob, NOW)
    released = await backend.inbox.release(bob, [token], now=NOW + 1, policy=POLICY)
    assert released.value == 1
    assert (await backend.state(message)) == (MessageState.QUEUED, None)
    again = await backend.inbox.claim(
        bob, session_id=None, limit=5, via=Via.FETCH, now=NOW + 2, policy=POLICY
    )
    assert again.value[0].claim.attempt == 1


async def test_ports_dead_letter_kills_only_its_claims_once(backend: Backend) -> None:
    """A claim whose message cannot be rendered: that message dies (`unrenderable`) with the
    attempt it had, once; the other claims of its batch stay out, and another identity's
    tokens change nothing."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    bad = await _enqueue(backend, alice, bob, "poison")
    good = await _enqueue(backend, alice, bob, "innocent", now=NOW + 1)
    [bad_token, _] = await _claim(backend, bob, NOW + 2)
    foreign = await backend.inbox.dead_letter(
        alice, [bad_token], reason="unrenderable", now=NOW + 3, policy=POLICY
    )
    assert foreign.value == []
    died = await backend.inbox.dead_letter(
        bob, [bad_token], reason="unrenderable", now=NOW + 3, policy=POLICY
    )
    assert died.value == [bad]
    again = await backend.inbox.dead_letter(
        bob, [bad_token], reason="unrenderable", now=NOW + 4, policy=POLICY
    )
    assert again.value == []
    assert (await backend.state(bad)) == (MessageState.DEAD, "unrenderable")
    assert (await backend.state(good)) == (MessageState.CLAIMED, None)
    await backend.inbox.lapse(bob, now=NOW + 500, policy=POLICY)  # past every ack wait
    assert (await backend.state(bad)) == (MessageState.DEAD, "unrenderable")


async def test_ports_expired_mail_dies_at_its_due_time(backend: Backend) -> None:
    """Unsettled mail is due at its expiry, and dies then."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    message = await _enqueue(backend, alice, bob, "too late")
    assert await backend.inbox.next_due(bob) == NOW + POLICY.message_expiry
    lapsed = await backend.inbox.lapse(bob, now=NOW + POLICY.message_expiry, policy=POLICY)
    assert lapsed.next_due is None
    assert (await backend.state(message)) == (MessageState.DEAD, "expired")


async def test_ports_idempotent_repeat_and_conflicting_reuse(backend: Backend) -> None:
    """An unchanged repeat answers the original; a key reused for another body is refused."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")

    async def send(body: str) -> tuple[str, bool]:
        changed = await backend.inbox.enqueue(
            bob, _send(alice, body, key="k1"), now=NOW, idempotent_since=NOW - 600,
            limits=LIMITS, policy=POLICY,
        )  # fmt: skip
        return changed.value.message.id, changed.value.duplicate

    first, duplicate = await send("same")
    assert not duplicate
    assert await send("same") == (first, True)
    with pytest.raises(PagerError) as caught:
        await send("other")
    assert caught.value.code is ErrorCode.CONFLICT


async def test_ports_enqueue_to_a_missing_recipient_is_refused(backend: Backend) -> None:
    """The recipient is checked in the send's own transaction."""
    alice = await backend.identity("alice")
    with pytest.raises(PagerError) as caught:
        await _enqueue(backend, alice, ids.new_agent_id(), "nobody")
    assert caught.value.code is ErrorCode.UNKNOWN_RECIPIENT


async def test_ports_concurrent_claims_never_share_a_message(backend: Backend) -> None:
    """Claimers racing on one inbox get disjoint messages, all of them together."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    sent = {await _enqueue(backend, alice, bob, f"m{n}", now=NOW + n) for n in range(12)}
    taken: list[str] = []

    async def claimer() -> None:
        changed = await backend.inbox.claim(
            bob, session_id=None, limit=5, via=Via.FETCH, now=NOW + 20, policy=POLICY
        )
        taken.extend(v.claim.message.id for v in changed.value)

    async with trio.open_nursery() as nursery:
        for _ in range(3):
            nursery.start_soon(claimer)
    assert len(taken) == len(set(taken))
    assert set(taken) <= sent
    assert len(taken) == 12


async def test_ports_sessions_attach_renew_end(backend: Backend) -> None:
    """The attached session is found with its implementation; a renewal is recorded; an end
    detaches it."""
    bob = await backend.identity("bob")
    assert await backend.sessions.attached(bob) == (None, "shell")
    session = await backend.attach(bob)
    found, implementation = await backend.sessions.attached(bob)
    assert found is not None
    assert (found.id, implementation) == (session.id, "shell")
    await backend.sessions.renew(session.id, bob, NOW + 500, now=NOW + 10)
    renewed, _ = await backend.sessions.attached(bob)
    assert renewed is not None
    assert renewed.lease_expires_at == NOW + 500
    await backend.sessions.end(session, SessionState.DETACHED, "detached", now=NOW + 20)
    assert await backend.sessions.attached(bob) == (None, "shell")


async def test_ports_enqueue_claims_for_a_waiting_reader_in_one_change(backend: Backend) -> None:
    """A send with a reader waiting claims in its own transaction: the waiting mail first (send
    order), then the new message, up to the limit."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    older = await _enqueue(backend, alice, bob, "older")
    changed = await backend.inbox.enqueue(
        bob, _send(alice, "newest"), now=NOW + 1, idempotent_since=NOW - 600, limits=LIMITS,
        policy=POLICY, claim_for=ClaimFor(None, 10, Via.FETCH),
    )  # fmt: skip
    enqueued = changed.value
    assert [v.claim.message.id for v in enqueued.claims] == [older, enqueued.message.id]
    assert changed.next_due == NOW + 1 + POLICY.ack_wait
    assert (await backend.state(enqueued.message.id)) == (MessageState.CLAIMED, None)
    limited = await backend.inbox.enqueue(
        bob, _send(alice, "later"), now=NOW + 2, idempotent_since=NOW - 600, limits=LIMITS,
        policy=POLICY, claim_for=ClaimFor(None, 0, Via.FETCH),
    )  # fmt: skip
    assert limited.value.claims == ()


WINDOWS = Windows(lease_ttl=90.0, named_archive=1000.0, archive_retention=5000.0)


def _registration(name: str | None, *, force: bool = False) -> Registration:
    return Registration(
        workspace=HERE,
        implementation="shell",
        session_name=name,
        conversation_key=None,
        delivery=None,
        force=force,
    )


async def _register(backend: Backend, name: str | None, *, force: bool = False) -> Any:
    return await backend.directory.register(
        _registration(name, force=force),
        now=NOW,
        lease_ttl=WINDOWS.lease_ttl,
        token=ids.new_token(ids.Kind.SESSION_TOKEN),
        resume_token=ids.new_token(ids.Kind.RESUME_TOKEN),
    )


async def test_ports_register_creates_then_refuses_an_attached_name(backend: Backend) -> None:
    """A new name makes an identity with an attached session; the same name again is refused
    while attached, and taken over with force (the holder's session ends)."""
    first = await _register(backend, "api")
    made = first.registered
    assert (made.identity.alias, made.session.state) == ("api", SessionState.ATTACHED)
    assert (await backend.sessions.attached(made.identity.id))[0] == made.session
    with pytest.raises(PagerError) as caught:
        await _register(backend, "api")
    assert caught.value.code is ErrorCode.ALIAS_CONFLICT
    forced = await _register(backend, "api", force=True)
    assert forced.registered.identity.id == made.identity.id
    assert [s.id for s in forced.ended] == [made.session.id]


async def test_ports_retire_rules(backend: Backend) -> None:
    """Archive once (twice is a conflict), unarchive, purge; an unknown identity is not_found."""
    agent = await backend.identity("old")
    done = await backend.directory.retire(agent, Action.ARCHIVE, "operator", now=NOW)
    assert done.action is Action.ARCHIVE
    with pytest.raises(PagerError) as twice:
        await backend.directory.retire(agent, Action.ARCHIVE, "operator", now=NOW)
    assert twice.value.code is ErrorCode.CONFLICT
    await backend.directory.retire(agent, Action.UNARCHIVE, "operator", now=NOW)
    await backend.directory.retire(agent, Action.PURGE, "operator", now=NOW)
    assert not await backend.sessions.exists(agent)
    with pytest.raises(PagerError) as gone:
        await backend.directory.retire(agent, Action.REAP, "operator", now=NOW)
    assert gone.value.code is ErrorCode.NOT_FOUND


async def test_ports_retention_plans_on_a_snapshot_and_applies_what_still_stands(
    backend: Backend,
) -> None:
    """Named identities past the archive window are planned; one attached is left out; a step
    whose identity attached after the plan is not applied."""
    idle, back = await backend.identity("idle"), await backend.identity("back")
    busy = await backend.identity("busy")
    await backend.attach(busy)
    later = NOW + WINDOWS.lease_ttl + WINDOWS.named_archive + 1
    plan = await backend.retention.plan(now=later, windows=WINDOWS, limit=10)
    assert {step.agent_id for step in plan.due} == {idle, back}
    await backend.attach(back)
    done = await backend.retention.apply(plan.due, now=later, windows=WINDOWS)
    assert [(d.agent_id, d.action) for d in done] == [(idle, Action.ARCHIVE)]
    assert plan.next_due is not None


async def test_ports_retention_ends_only_gone_hosts_lapsed_sessions(backend: Backend) -> None:
    """SPEC §13: a session attached through a broker that is gone ends once its lease lapsed
    (its broker cannot end it); one still leased, or of a host not named, stays."""
    lapsed, leased = await backend.identity("lapsed"), await backend.identity("leased")
    other = await backend.identity("other")
    await backend.attach(lapsed, host="gone")
    await backend.attach(leased, host="gone")
    await backend.attach(other, host="alive")
    await backend.checkpoint.write(
        lambda conn: conn.execute(
            sql("UPDATE sessions SET lease_expires_at = {} WHERE identity_id = {}"),
            (NOW - 1, lapsed),
        )
    )
    ended = await backend.retention.expire_sessions_of(["gone"], now=NOW)
    assert ended == [lapsed]
    assert (await backend.sessions.attached(lapsed))[0] is None
    assert (await backend.sessions.attached(leased))[0] is not None
    assert (await backend.sessions.attached(other))[0] is not None
    assert await backend.retention.expire_sessions_of(["gone"], now=NOW) == []


async def test_ports_event_log_reads_changes_in_order(backend: Backend) -> None:
    """Each change's events are in the log after it, in seq order, from any position."""
    alice, bob = await backend.identity("alice"), await backend.identity("bob")
    start = await backend.events.latest_seq()
    message = await _enqueue(backend, alice, bob, "logged")
    rows = await backend.events.rows_after(start, 100)
    assert [kind for _, _, kind, _ in rows] == ["message.queued"]
    assert json.loads(rows[0][3])["message_id"] == message
    assert await backend.events.latest_seq() == rows[-1][0]
    assert await backend.events.rows_after(rows[-1][0], 100) == []
    oldest = await backend.events.oldest_seq()
    assert oldest is not None
    assert oldest <= rows[0][0]


async def test_ports_refusals_are_counted_per_sender_reason_and_minute(backend: Backend) -> None:
    """SPEC §12: a refusal adds to its (sender, reason, minute) count; only the first of each
    is an operator event; the counts are kept as long as events, then pruned."""
    start = await backend.events.latest_seq()
    refusals = [(NOW + n, "rate_limited") for n in range(5)]
    refusals += [(NOW + 2, "hop_limit"), (NOW + 61, "rate_limited")]
    for at, reason in refusals:
        data: dict[str, object] = {"sender_id": "agt_mallory", "reason": reason}
        await backend.inbox.count_refusal(at, "agt_mallory", reason, data)
    rows = await backend.events.rows_after(start, 100)
    assert [(kind, json.loads(data)["reason"]) for _, _, kind, data in rows] == [
        ("send.refused", "rate_limited"), ("send.refused", "hop_limit"),
        ("send.refused", "rate_limited"),
    ]  # fmt: skip
    assert json.loads(rows[-1][3])["minute"] == iso(NOW + 60)

    async def total() -> int:
        return int(await backend.checkpoint.lookup(refused_sends))

    assert await total() == 7
    # The first minute's counts go once event_retention has passed its end; the next stays.
    pruned = await backend.retention.prune(now=NOW + WINDOWS.event_retention + 60, windows=WINDOWS)
    assert pruned.refusals == 2
    assert await total() == 1
