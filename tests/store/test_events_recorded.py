"""Every state change records exactly its operator event, in its own transaction; a change
that is rolled back or refused records nothing (real SQLite)."""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from pager.domain import ids
from pager.domain.delivery import AckResult, ClaimPolicy, RedeliverySchedule, Via
from pager.domain.errors import PagerError
from pager.domain.identity_rules import Found
from pager.domain.names import alias_key
from pager.domain.records import Claim, Session, SessionState
from pager.domain.registration import Registration
from pager.domain.workspace import Workspace, resolve_workspace
from pager.store import close_database, immediate_transaction, open_database
from pager.store import messaging as ms
from pager.store._registration import RegisterPlan, claim_alias, take_over_by_alias

T = TypeVar("T")
NOW = 1_800_000_000.0
POLICY = ClaimPolicy(ack_wait=60.0, max_attempts=2, message_expiry=3600.0)


class Store:
    """A database and the sync functions the actors run, each in its own transaction."""

    def __init__(self, conn: sqlite3.Connection, workspace: Workspace) -> None:
        self.conn = conn
        self.workspace = workspace
        self.seen = 0

    def write(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        with immediate_transaction(self.conn):
            return fn(self.conn)

    def new_events(self) -> list[tuple[str, dict[str, Any]]]:
        """Events recorded since the last call, as (type, data)."""
        found = ms.events_after(self.conn, self.seen, 10_000)
        if found:
            self.seen = found[-1].seq
        return [(event.type, event.data) for event in found]

    def types(self) -> list[str]:
        return [kind for kind, _ in self.new_events()]

    def register(
        self,
        name: str | None,
        *,
        force: bool = False,
        workspace: Workspace | None = None,
        now: float = NOW,
    ) -> Session:
        command = Registration(
            workspace=workspace or self.workspace,
            implementation="shell",
            session_name=name,
            conversation_key=None,
            delivery=None,
            force=force,
        )
        plan = RegisterPlan(
            command,
            now,
            90.0,
            ids.new_token(ids.Kind.SESSION_TOKEN),
            ids.new_token(ids.Kind.RESUME_TOKEN),
        )
        return self.write(plan.apply).registered.session

    def send(self, sender: str, recipient: str, now: float = NOW) -> str:
        message_id = ids.new_message_id()
        self.write(
            lambda c: ms.insert_message(
                c,
                message_id=message_id,
                sender_id=sender,
                recipient_id=recipient,
                body="hello",
                thread=None,
                reply_to=None,
                now=now,
            )
        )
        return message_id

    def claim(self, recipient: str, via: str = "fetch", now: float = NOW) -> list[Claim]:
        return self.write(
            lambda c: ms.claim_waiting(
                c,
                recipient_id=recipient,
                session_id=None,
                limit=100,
                now=now,
                policy=POLICY,
                via=Via(via),
                new_token=lambda: ids.new_token(ids.Kind.CLAIM_TOKEN),
                hash_token=ids.hash_token,
            )
        )


@pytest.fixture
def store(tmp_path: Path) -> Iterator[Store]:
    repo = tmp_path / "api"
    repo.mkdir()
    conn = open_database(tmp_path / "pager.db")
    try:
        yield Store(conn, resolve_workspace(str(repo)))
    finally:
        close_database(conn)


@pytest.fixture
def pair(store: Store) -> tuple[str, str]:
    """Two registered identities (alice sends, bob receives); their events already read."""
    alice = store.register("alice").identity_id
    bob = store.register("bob").identity_id
    store.new_events()
    return alice, bob


# -- agents ------------------------------------------------------------------------------------


def test_register_records_created_then_attached(store: Store) -> None:
    """A first registration records agent.created and agent.attached, naming the identity by
    id, alias, address and workspace slug."""
    session = store.register("alice")
    events = store.new_events()
    slug = store.workspace.slug
    assert [kind for kind, _ in events] == ["agent.created", "agent.attached"]
    created, attached = events[0][1], events[1][1]
    assert created == {
        "agent_id": session.identity_id,
        "alias": "alice",
        "address": f"alice@{slug}",
        "workspace": slug,
        "durable": True,
        "implementation": "shell",
    }
    assert attached == {
        "agent_id": session.identity_id,
        "alias": "alice",
        "address": f"alice@{slug}",
        "workspace": slug,
        "session_id": session.id,
        "epoch": 1,
    }


def test_rejoin_records_attached_only(store: Store) -> None:
    """Rejoining a detached identity by name records agent.attached with the next epoch, and
    no agent.created."""
    first = store.register("alice")
    store.write(lambda c: ms.end_session(c, first.id, SessionState.DETACHED, "detached", NOW))
    store.new_events()
    again = store.register("alice")
    events = store.new_events()
    assert [kind for kind, _ in events] == ["agent.attached"]
    assert events[0][1]["epoch"] == 2
    assert again.identity_id == first.identity_id


def test_end_session_records_detached_with_state_and_reason(store: Store) -> None:
    """Graceful detach and lease expiry record agent.detached with the state and reason."""
    alice = store.register("alice")
    bob = store.register("bob")
    store.new_events()
    store.write(lambda c: ms.end_session(c, alice.id, SessionState.DETACHED, "detached", NOW))
    store.write(lambda c: ms.end_session(c, bob.id, SessionState.EXPIRED, "lease lapsed", NOW))
    events = store.new_events()
    assert [(kind, data["session_id"], data["state"], data["reason"]) for kind, data in events] == [
        ("agent.detached", alice.id, "detached", "detached"),
        ("agent.detached", bob.id, "expired", "expired"),
    ]


def test_end_session_of_ended_session_records_nothing(store: Store) -> None:
    """Ending a session that is no longer attached changes nothing and records nothing."""
    alice = store.register("alice")
    store.write(lambda c: ms.end_session(c, alice.id, SessionState.DETACHED, "detached", NOW))
    store.new_events()
    store.write(lambda c: ms.end_session(c, alice.id, SessionState.EXPIRED, "lease lapsed", NOW))
    assert store.new_events() == []


def test_forced_takeover_records_every_change(store: Store) -> None:
    """A forced takeover of an attached name records: the identity's old session ended
    (detached, taken_over), the holder's token handed to a fresh identity (created,
    attached), the new session (attached), and the takeover with both sessions."""
    holder = store.register("alice")
    store.new_events()
    taker = store.register("alice", force=True)
    events = store.new_events()
    kinds = [kind for kind, _ in events]
    assert kinds == [
        "agent.detached",
        "agent.created",
        "agent.attached",
        "agent.attached",
        "agent.taken_over",
    ]
    detached = events[0][1]
    assert (detached["agent_id"], detached["session_id"]) == (holder.identity_id, holder.id)
    assert (detached["state"], detached["reason"]) == ("ended", "taken_over")
    fresh = events[1][1]["agent_id"]
    assert fresh != holder.identity_id
    assert events[2][1]["agent_id"] == fresh
    assert events[3][1]["session_id"] == taker.id
    taken = events[4][1]
    assert taken["agent_id"] == holder.identity_id
    assert (taken["via"], taken["session_id"], taken["ended_session_id"]) == (
        "register",
        taker.id,
        holder.id,
    )
    assert taken["holder_agent_id"] == fresh
    assert taken["previous_agent_id"] is None


def test_refused_registration_records_nothing(store: Store) -> None:
    """A registration refused with alias_conflict (the name is attached) rolls back and
    records nothing."""
    store.register("alice")
    store.new_events()
    with pytest.raises(PagerError):
        store.register("alice")
    assert store.new_events() == []


def test_rename_records_renamed_with_old_alias(store: Store) -> None:
    """A rename records agent.renamed with the old alias and address."""
    me = store.register("alice").identity_id
    store.new_events()
    slug = store.workspace.slug

    def rename(conn: sqlite3.Connection) -> None:
        claim_alias(conn, store.workspace.key, "carol", me, force=False)
        ms.set_alias(conn, me, store.workspace.key, "carol", "carol", durable=True, now=NOW)

    store.write(rename)
    assert store.new_events() == [
        (
            "agent.renamed",
            {
                "agent_id": me,
                "alias": "carol",
                "address": f"carol@{slug}",
                "workspace": slug,
                "old_alias": "alice",
                "old_address": f"alice@{slug}",
                "durable": True,
            },
        )
    ]


def test_rename_to_same_alias_records_nothing(store: Store) -> None:
    """Setting the alias an identity already has changes nothing and records nothing."""
    me = store.register("alice").identity_id
    store.new_events()
    store.write(
        lambda c: ms.set_alias(c, me, store.workspace.key, "alice", "alice", durable=True, now=NOW)
    )
    assert store.new_events() == []


def test_claim_alias_never_renames_a_holder_even_forced(store: Store) -> None:
    """`force` does not free an alias another identity holds (a forced rename takes that
    identity over instead): alias_conflict, and nothing is recorded."""
    store.register("alice")
    me = store.register("bob").identity_id
    store.new_events()
    with pytest.raises(PagerError):
        store.write(lambda c: claim_alias(c, store.workspace.key, "alice", me, force=True))
    assert store.new_events() == []


def test_forced_alias_takeover_of_detached_holder_records_both_sessions(store: Store) -> None:
    """Taking a detached holder's alias by force moves the caller's session onto that
    identity: the caller's old session detached (took_over), the identity attached, and
    agent.taken_over naming the new session and the one the caller left; the holder is
    never renamed."""
    holder = store.register("alice")
    store.write(lambda c: ms.end_session(c, holder.id, SessionState.DETACHED, "detached", NOW))
    mine = store.register("bob")
    store.new_events()

    def take(conn: sqlite3.Connection) -> str:
        identity = ms.get_identity(conn, holder.identity_id)
        assert identity is not None
        done = take_over_by_alias(
            conn, Found(identity), mine, "alice", lease_expires_at=NOW + 90, now=NOW, lease_ttl=90
        )
        return done.session.id

    session_id = store.write(take)
    events = store.new_events()
    assert [(kind, data["agent_id"]) for kind, data in events] == [
        ("agent.detached", mine.identity_id),
        ("agent.attached", holder.identity_id),
        ("agent.taken_over", holder.identity_id),
    ]
    assert (events[0][1]["state"], events[0][1]["reason"]) == ("detached", "took_over")
    assert events[1][1] == {**events[1][1], "session_id": session_id, "epoch": 2}
    taken = events[2][1]
    assert taken["alias"] == "alice"
    assert (taken["via"], taken["session_id"], taken["ended_session_id"]) == (
        "update_agent_alias",
        session_id,
        None,
    )
    assert (taken["previous_agent_id"], taken["previous_session_id"]) == (
        mine.identity_id,
        mine.id,
    )


def test_move_records_moved_with_old_workspace(store: Store, tmp_path: Path) -> None:
    """A move records agent.moved with the old workspace slug and address."""
    me = store.register("alice").identity_id
    store.new_events()
    other_dir = tmp_path / "web"
    other_dir.mkdir()
    web = resolve_workspace(str(other_dir))

    def move(conn: sqlite3.Connection) -> None:
        ms.ensure_workspace(conn, web, NOW)
        ms.set_alias(conn, me, web.key, "alice", alias_key("alice"), durable=True, now=NOW)

    store.write(move)
    [(kind, data)] = store.new_events()
    assert kind == "agent.moved"
    assert data["workspace"] == web.slug
    assert data["address"] == f"alice@{web.slug}"
    assert data["old_workspace"] == store.workspace.slug
    assert data["old_address"] == f"alice@{store.workspace.slug}"


# -- messages ----------------------------------------------------------------------------------


def test_send_records_queued(store: Store, pair: tuple[str, str]) -> None:
    """A send records message.queued with the message, sender and recipient ids, and the
    message's origin and hop (SPEC §8.1)."""
    alice, bob = pair
    message_id = store.send(alice, bob)
    assert store.new_events() == [
        (
            "message.queued",
            {
                "message_id": message_id,
                "sender_id": alice,
                "recipient_id": bob,
                "origin": "agent",
                "hop": 0,
            },
        )
    ]


def test_rolled_back_send_records_nothing(store: Store, pair: tuple[str, str]) -> None:
    """A send whose transaction rolls back leaves no event behind."""
    alice, bob = pair

    def send_then_fail(conn: sqlite3.Connection) -> None:
        ms.insert_message(
            conn,
            message_id=ids.new_message_id(),
            sender_id=alice,
            recipient_id=bob,
            body="never",
            thread=None,
            reply_to=None,
            now=NOW,
        )
        raise RuntimeError("the commit fails")

    with pytest.raises(RuntimeError):
        store.write(send_then_fail)
    assert store.new_events() == []


def test_claim_records_claimed_or_delivered_per_message(
    store: Store, pair: tuple[str, str]
) -> None:
    """A fetch records message.claimed, a push message.delivered: one per message, with the
    attempt and how it went out."""
    alice, bob = pair
    first, second = store.send(alice, bob), store.send(alice, bob)
    store.new_events()
    store.claim(bob, via="fetch")
    events = store.new_events()
    assert [(kind, data["message_id"], data["attempt"], data["via"]) for kind, data in events] == [
        ("message.claimed", first, 1, "fetch"),
        ("message.claimed", second, 1, "fetch"),
    ]
    third = store.send(alice, bob)
    store.new_events()
    store.claim(bob, via="delivery")
    assert store.new_events() == [
        (
            "message.delivered",
            {
                "message_id": third,
                "sender_id": alice,
                "recipient_id": bob,
                "attempt": 1,
                "via": "delivery",
            },
        )
    ]


def test_empty_claim_records_nothing(store: Store, pair: tuple[str, str]) -> None:
    """A fetch of an empty inbox records nothing."""
    _, bob = pair
    assert store.claim(bob) == []
    assert store.new_events() == []


def test_ack_records_acknowledged_and_refused_tokens_nothing(
    store: Store, pair: tuple[str, str]
) -> None:
    """An applied ack records message.acknowledged; tokens not applied record nothing."""
    alice, bob = pair
    message_id = store.send(alice, bob)
    [claim] = store.claim(bob)
    store.new_events()

    def ack(tokens: list[str]) -> AckResult:
        return store.write(
            lambda c: ms.acknowledge(
                c, identity_id=bob, tokens=tokens, now=NOW, hash_token=ids.hash_token
            )
        )

    result = ack([claim.token, "clm_unknown"])
    assert result.applied == [claim.token]
    assert store.new_events() == [
        (
            "message.acknowledged",
            {"message_id": message_id, "sender_id": alice, "recipient_id": bob, "attempt": 1},
        )
    ]
    again = ack([claim.token])
    assert again.not_applied == [(claim.token, "already_acknowledged")]
    assert store.new_events() == []


def test_lapsed_claim_records_requeued_then_dead_at_max_attempts(
    store: Store, pair: tuple[str, str]
) -> None:
    """A claim past its ack wait records message.requeued (ack_wait); the lapse of the last
    allowed attempt records message.dead (max_attempts) instead."""
    alice, bob = pair
    message_id = store.send(alice, bob)
    store.claim(bob, now=NOW)
    store.new_events()
    later = NOW + POLICY.ack_wait
    store.write(lambda c: ms.expire_claims(c, bob, later, POLICY.max_attempts))
    assert store.new_events() == [
        (
            "message.requeued",
            {
                "message_id": message_id,
                "sender_id": alice,
                "recipient_id": bob,
                "attempt": 1,
                "reason": "ack_wait",
            },
        )
    ]
    store.claim(bob, now=later)
    store.new_events()
    end = later + POLICY.ack_wait
    store.write(lambda c: ms.expire_claims(c, bob, end, POLICY.max_attempts))
    assert store.new_events() == [
        (
            "message.dead",
            {
                "message_id": message_id,
                "sender_id": alice,
                "recipient_id": bob,
                "attempt": 2,
                "reason": "max_attempts",
            },
        )
    ]


def test_bulk_requeue_records_one_event_per_message(store: Store, pair: tuple[str, str]) -> None:
    """A hundred claims lapsing in one tick record a hundred message.requeued, in order."""
    alice, bob = pair
    sent = [store.send(alice, bob) for _ in range(100)]
    store.claim(bob)
    store.new_events()
    store.write(lambda c: ms.expire_claims(c, bob, NOW + POLICY.ack_wait, POLICY.max_attempts))
    events = store.new_events()
    assert {kind for kind, _ in events} == {"message.requeued"}
    assert sorted(data["message_id"] for _, data in events) == sorted(sent)


def test_refused_delivery_records_refused_with_retry_time(
    store: Store, pair: tuple[str, str]
) -> None:
    """A push the inbox refused records message.refused with the retry time; refusing a
    claim that is no longer open records nothing."""
    alice, bob = pair
    message_id = store.send(alice, bob)
    [claim] = store.claim(bob, via="delivery")
    store.new_events()

    def refuse() -> int:
        return store.write(
            lambda c: ms.refuse_claims(
                c,
                [ids.hash_token(claim.token)],
                now=NOW,
                schedule=RedeliverySchedule((2.0,)),
                max_attempts=POLICY.max_attempts,
            )
        )

    assert refuse() == 1
    [(kind, data)] = store.new_events()
    assert kind == "message.refused"
    assert (data["message_id"], data["attempt"]) == (message_id, 1)
    assert data["retry_at"].startswith("2027-01-15T08:00:02")
    assert refuse() == 0
    assert store.new_events() == []


def test_released_claim_records_requeued(store: Store, pair: tuple[str, str]) -> None:
    """A claim handed back unshown records message.requeued (released)."""
    alice, bob = pair
    message_id = store.send(alice, bob)
    [claim] = store.claim(bob, via="hook")
    store.new_events()
    store.write(lambda c: ms.release_claims(c, bob, [ids.hash_token(claim.token)], NOW))
    assert store.new_events() == [
        (
            "message.requeued",
            {
                "message_id": message_id,
                "sender_id": alice,
                "recipient_id": bob,
                "reason": "released",
            },
        )
    ]


def test_expired_message_records_dead(store: Store, pair: tuple[str, str]) -> None:
    """An unsettled message past its expiry records message.dead (expired)."""
    alice, bob = pair
    message_id = store.send(alice, bob)
    store.new_events()
    later = NOW + POLICY.message_expiry
    assert store.write(lambda c: ms.dead_letter_expired(c, bob, later, POLICY.message_expiry)) == 1
    [(kind, data)] = store.new_events()
    assert (kind, data["message_id"], data["reason"]) == ("message.dead", message_id, "expired")


def test_dead_letter_inbox_records_dead_per_message(store: Store, pair: tuple[str, str]) -> None:
    """Dead-lettering an inbox (reap, purge) records message.dead with that reason for each
    unsettled message, and nothing for settled ones."""
    alice, bob = pair
    settled = store.send(alice, bob)
    [claim] = store.claim(bob)
    store.write(
        lambda c: ms.acknowledge(
            c, identity_id=bob, tokens=[claim.token], now=NOW, hash_token=ids.hash_token
        )
    )
    waiting = [store.send(alice, bob), store.send(alice, bob)]
    store.new_events()
    assert store.write(lambda c: ms.dead_letter_inbox(c, bob, NOW, "purged")) == 2
    events = store.new_events()
    assert sorted((kind, data["message_id"], data["reason"]) for kind, data in events) == sorted(
        ("message.dead", m, "purged") for m in waiting
    )
    assert settled not in {data["message_id"] for _, data in events}


def test_reap_records_dead_letters_then_reaped(store: Store, pair: tuple[str, str]) -> None:
    """Reaping an identity records message.dead (reaped) for each waiting message, then
    agent.reaped, in one transaction."""
    alice, bob = pair
    waiting = store.send(alice, bob)
    store.new_events()
    store.write(lambda c: ms.reap_identity(c, bob, now=NOW, reason="archive_retention"))
    events = store.new_events()
    assert [(kind, data.get("message_id"), data.get("reason")) for kind, data in events] == [
        ("message.dead", waiting, "reaped"),
        ("agent.reaped", None, "archive_retention"),
    ]
