"""Identity actors own their binding and run under a dynamic supervisor: one that crashes comes
back bound to its session and delivering, its caller's call fails (`internal` at the edges),
others never notice."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from actors._runtime import ActorCrashed
from pager.store import messaging as ms
from tests.messaging.conftest import Harness, http_delivery


def _pushed_bodies(harness: Harness, session_id: str) -> list[str]:
    return [
        view.claim.message.body
        for push in harness.inbox.pushes
        if push.session_id == session_id
        for view in push.claims
    ]


async def test_identity_store_failure_restarts_it_bound_and_delivering(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store failure inside one identity's write crashes that actor: the send that hit it
    fails (ActorCrashed: `internal` at the edges), the supervisor starts it again bound to its
    session (pushes resume), and another identity's mail flows throughout."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", delivery=http_delivery())
        _, carol = await harness.register("carol", delivery=http_delivery())
        await harness.service.send(alice, to="bob", body="before")
        identities = harness.service.identities
        first_ref = identities.get(bob.agent_id)
        assert first_ref is not None

        insert = ms.insert_message

        def failing_for_bob(conn: sqlite3.Connection, **kwargs: Any) -> Any:
            if kwargs["recipient_id"] == bob.agent_id:
                raise sqlite3.OperationalError("disk I/O error")  # what a failing disk says
            return insert(conn, **kwargs)

        monkeypatch.setattr(ms, "insert_message", failing_for_bob)
        with pytest.raises(ActorCrashed) as caught:  # the edges answer `internal`
            await harness.service.send(alice, to="bob", body="lost to the fault")
        assert isinstance(caught.value.reason, sqlite3.OperationalError)
        sent = await harness.service.send(alice, to="carol", body="meanwhile")
        assert sent["wake"] == "delivered"  # the neighbour never noticed
        monkeypatch.setattr(ms, "insert_message", insert)

        await wait_all_tasks_blocked()
        again = identities.get(bob.agent_id)
        assert again is not None
        assert again is not first_ref  # a new incarnation, not the crashed one
        assert bob.agent_id in identities.index.attached_ids()
        after = await harness.service.send(alice, to="bob", body="after")
        assert after["wake"] == "delivered"
        await harness.inbox.pushed(3)
        assert _pushed_bodies(harness, bob.session_id or "") == ["before", "after"]
        assert _pushed_bodies(harness, carol.session_id or "") == ["meanwhile"]
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
        insert = ms.insert_message

        def failing(conn: sqlite3.Connection, **kwargs: Any) -> Any:
            raise sqlite3.OperationalError("disk I/O error")

        monkeypatch.setattr(ms, "insert_message", failing)
        with pytest.raises(ActorCrashed):
            await harness.service.send(alice, to="bob", body="lost")
        monkeypatch.setattr(ms, "insert_message", insert)
        await wait_all_tasks_blocked()
        assert not ended.is_set()
        caller = await harness.service.authenticate(registered["token"])
        assert caller.session_id == bob.session_id
        await harness.service.detach(bob)
        assert ended.is_set()
