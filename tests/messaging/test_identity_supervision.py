"""Identity actors own their binding and run under a dynamic supervisor. A store fault in one's
write answers its caller `unavailable` and the actor goes on; one that crashes (a broken
invariant) comes back bound to its session and delivering, its caller's call fails (`internal`
at the edges); others never notice either."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from actors._runtime import ActorCrashed
from pager.domain.errors import ErrorCode
from pager.store import StoreIOError
from pager.store import messaging as ms
from pager.web.store_trouble import unavailable_cause
from tests.messaging.conftest import Harness, crash_on_mail_to, http_delivery


async def test_identity_store_fault_answers_unavailable_and_the_actor_lives_on(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A disk I/O error inside one identity's write is the store's fault, not the actor's: the
    send that hit it is answered `unavailable` naming the disk, the same actor goes on bound to
    its session (no restart), its next write succeeds and is pushed, and another identity's
    mail flows throughout."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", delivery=http_delivery())
        _, carol = await harness.register("carol", delivery=http_delivery())
        await harness.service.send(alice, to="bob", body="before")
        identities = harness.service.identities
        first_ref = identities.get(bob.agent_id)
        assert first_ref is not None

        insert = ms.add_message  # what a send inserts its message with

        def failing_for_bob(conn: sqlite3.Connection, **kwargs: Any) -> Any:
            if kwargs["recipient_id"] == bob.agent_id:
                error = sqlite3.OperationalError("disk I/O error")  # what a failing disk says
                error.sqlite_errorcode = sqlite3.SQLITE_IOERR
                raise error
            return insert(conn, **kwargs)

        monkeypatch.setattr(ms, "add_message", failing_for_bob)
        with pytest.raises(StoreIOError) as caught:
            await harness.service.send(alice, to="bob", body="lost to the fault")
        answer = unavailable_cause(caught.value)  # what every edge answers
        assert answer is not None
        assert answer.code is ErrorCode.UNAVAILABLE
        assert "disk" in answer.message
        sent = await harness.service.send(alice, to="carol", body="meanwhile")
        assert sent["wake"] == "delivered"  # the neighbour never noticed
        monkeypatch.setattr(ms, "add_message", insert)

        await wait_all_tasks_blocked()
        assert identities.get(bob.agent_id) is first_ref  # the same incarnation, running
        assert bob.agent_id in identities.index.attached_ids()
        after = await harness.service.send(alice, to="bob", body="after")
        assert after["wake"] == "delivered"
        await harness.inbox.pushed(3)
        assert harness.inbox.bodies_pushed_to(bob.session_id) == ["before", "after"]
        assert harness.inbox.bodies_pushed_to(carol.session_id) == ["meanwhile"]
        whoami = await harness.service.whoami(bob)
        assert whoami["agent_id"] == bob.agent_id


async def test_identity_crash_restarts_it_bound_and_delivering(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A bug inside one identity's handling (a broken invariant, not the store's fault)
    crashes that actor: the send that hit it fails (ActorCrashed: `internal` at the edges), the
    supervisor starts it again bound to its session (pushes resume), and another identity's
    mail flows throughout."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", delivery=http_delivery())
        _, carol = await harness.register("carol", delivery=http_delivery())
        await harness.service.send(alice, to="bob", body="before")
        identities = harness.service.identities
        first_ref = identities.get(bob.agent_id)
        assert first_ref is not None

        crash_on_mail_to(monkeypatch, bob.agent_id)
        with pytest.raises(ActorCrashed) as caught:  # the edges answer `internal`
            await harness.service.send(alice, to="bob", body="lost to the fault")
        assert isinstance(caught.value.reason, RuntimeError)
        sent = await harness.service.send(alice, to="carol", body="meanwhile")
        assert sent["wake"] == "delivered"  # the neighbour never noticed

        await wait_all_tasks_blocked()
        again = identities.get(bob.agent_id)
        assert again is not None
        assert again is not first_ref  # a new incarnation, not the crashed one
        assert bob.agent_id in identities.index.attached_ids()
        after = await harness.service.send(alice, to="bob", body="after")
        assert after["wake"] == "delivered"
        await harness.inbox.pushed(3)
        assert harness.inbox.bodies_pushed_to(bob.session_id) == ["before", "after"]
        assert harness.inbox.bodies_pushed_to(carol.session_id) == ["meanwhile"]
        # Its session's token still authenticates: the binding came back with it.
        whoami = await harness.service.whoami(bob)
        assert whoami["agent_id"] == bob.agent_id


async def test_identity_crash_keeps_its_session_stream_open(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An event stream of the session holds on across its identity actor's crash: the
    binding (lease, streams, ended event) belongs to the session, not to one incarnation."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        registered, bob = await harness.register("bob")
        ended = await harness.service.stream_opened(bob)
        crash_on_mail_to(monkeypatch, bob.agent_id)  # a bug crashes it; a store fault would not
        with pytest.raises(ActorCrashed):
            await harness.service.send(alice, to="bob", body="lost")
        await wait_all_tasks_blocked()
        assert not ended.is_set()
        caller = await harness.service.authenticate(registered["token"])
        assert caller.session_id == bob.session_id
        await harness.service.detach(bob)
        assert ended.is_set()


async def test_identity_whose_load_meets_a_store_fault_answers_unavailable_then_starts(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An identity whose actor cannot load (the disk fails its read) answers `unavailable`,
    not `internal`, and nothing is left of the attempt: the next request starts it."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        identities = harness.service.identities
        await identities.stop(bob.agent_id)  # not running: the next request activates it
        next_due = ms.next_due_of

        def failing(conn: sqlite3.Connection, identity_id: str) -> Any:
            error = sqlite3.OperationalError("disk I/O error")
            error.sqlite_errorcode = sqlite3.SQLITE_IOERR_READ
            raise error

        monkeypatch.setattr(ms, "next_due_of", failing)
        with pytest.raises(StoreIOError):
            await harness.service.send(alice, to="bob", body="not yet")
        assert identities.get(bob.agent_id) is None
        monkeypatch.setattr(ms, "next_due_of", next_due)
        sent = await harness.service.send(alice, to="bob", body="now")
        assert sent["message_id"]
        assert identities.get(bob.agent_id) is not None
