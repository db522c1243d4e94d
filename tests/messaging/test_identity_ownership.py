"""The identity actor owns its session (ARCHITECTURE.md, Ownership): its lease is renewed by
casts from authentication (a lookup, no mailbox hop) and held by streams that say so to the
actor; an actor crashed by a broken invariant comes back from the store bound to its session,
delivering by push and by long poll, its callers answered `internal`, its neighbours never
noticing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel
from trio.testing import MockClock, wait_all_tasks_blocked

from actors._runtime import ActorCrashed
from actors.directory import PurgeIdentity
from pager.domain.errors import ErrorCode, PagerError
from tests.messaging.conftest import (
    WINDOWS,
    Harness,
    crash_on_mail_to,
    http_delivery,
    open_harness,
)


async def test_crashed_identity_comes_back_bound_and_delivering_by_push_and_long_poll(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """bob's actor crashes while a long poll of his waits: the send and the poll are answered
    `internal` (ActorCrashed), nothing else. His next incarnation is bound to the same session
    (no registration): his token authenticates, a long poll gets the next mail, a push the
    one after. Meanwhile dave sends to carol (pushed) and frank (long-polling) without one
    error."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob", delivery=http_delivery())
        _, carol = await harness.register("carol", delivery=http_delivery())
        _, dave = await harness.register("dave")
        _, frank = await harness.register("frank")
        identities = harness.service.identities
        first = identities.get(bob.agent_id)
        neighbour_errors: list[BaseException] = []
        neighbour_mail: list[str] = []
        crashed_poll: list[BaseException] = []
        stop = trio.Event()

        async def neighbours() -> None:
            n = 0
            while not stop.is_set():
                try:
                    await harness.service.send(dave, to="carol", body=f"c{n}")
                    await harness.service.send(dave, to="frank", body=f"f{n}")
                    answer = await harness.service.fetch(frank, wait_s=5)
                    neighbour_mail.extend(c["message"]["body"] for c in answer["claims"])
                    tokens = [c["token"] for c in answer["claims"]]
                    await harness.service.ack(frank, tokens=tokens)
                except Exception as exc:  # counted: none is expected
                    neighbour_errors.append(exc)
                n += 1
                await trio.sleep(1)

        async def bob_polls() -> None:
            try:
                await harness.service.fetch(bob, wait_s=60)
            except ActorCrashed as exc:
                crashed_poll.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(neighbours)
            nursery.start_soon(bob_polls)
            await trio.sleep(3)
            await wait_all_tasks_blocked()
            crash_on_mail_to(monkeypatch, bob.agent_id)
            with pytest.raises(ActorCrashed) as caught:  # the edges answer `internal`
                await harness.service.send(alice, to="bob", body="lost to the bug")
            assert isinstance(caught.value.reason, RuntimeError)
            await wait_all_tasks_blocked()
            assert len(crashed_poll) == 1  # the poll waiting on the crashed actor: `internal`

            again = identities.get(bob.agent_id)
            assert again is not None
            assert again is not first
            # The same session, from its token, without registering again.
            assert (await harness.service.authenticate(bob_info["token"])) == bob
            assert bob.agent_id in identities.index.attached_ids()

            async with trio.open_nursery() as polling:
                polled: list[Any] = []

                async def poll() -> None:
                    polled.append(await harness.service.fetch(bob, wait_s=60))

                polling.start_soon(poll)
                await wait_all_tasks_blocked()
                sent = await harness.service.send(alice, to="bob", body="by long poll")
                assert sent["wake"] == "delivered"
            [answer] = polled
            assert [c["message"]["body"] for c in answer["claims"]] == ["by long poll"]
            sent = await harness.service.send(alice, to="bob", body="by push")
            assert sent["wake"] == "delivered"
            await wait_all_tasks_blocked()
            assert harness.inbox.bodies_pushed_to(bob.session_id) == ["by push"]
            await trio.sleep(5)
            stop.set()

        assert neighbour_errors == []
        assert len(neighbour_mail) >= 5
        assert len(harness.inbox.bodies_pushed_to(carol.session_id)) >= 5


async def test_lease_renewed_by_requests_stays_and_one_left_alone_lapses(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """Each request renews its session's lease by telling the identity actor, which alone
    ends a lease that lapsed: alice, who keeps making requests, stays attached for three
    leases; bob, silent, is expired by his actor after one."""
    with trio.fail_after(600):
        alice_info, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob")
        for _ in range(9):
            await trio.sleep(WINDOWS.lease_ttl / 3)
            await harness.service.whoami(await harness.service.authenticate(alice_info["token"]))
        attached = harness.service.identities.index.attached_ids()
        assert alice.agent_id in attached
        assert bob.agent_id not in attached
        with pytest.raises(PagerError) as caught:
            await harness.service.authenticate(bob_info["token"])
        assert caught.value.code is ErrorCode.EXPIRED
        assert (await harness.service.authenticate(alice_info["token"])) == alice


async def test_restarted_identity_takes_renewals_and_its_open_stream_again(
    harness: Harness, autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a crash the lease is the new incarnation's, rebuilt from the store: a stream
    that stays open says so again (as the event stream does at each heartbeat) and holds it
    past many leases; once it closes, the lease lapses after the stream grace."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob")
        stream = object()
        ended = await harness.service.stream_opened(bob, stream)
        crash_on_mail_to(monkeypatch, bob.agent_id)
        with pytest.raises(ActorCrashed):
            await harness.service.send(alice, to="bob", body="lost to the bug")
        await wait_all_tasks_blocked()
        for _ in range(12):  # no request of bob's: only the open stream holds his lease
            await trio.sleep(15)
            await harness.service.stream_opened(bob, stream)
        assert not ended.is_set()
        assert bob.agent_id in harness.service.identities.index.attached_ids()
        await harness.service.stream_closed(bob, stream)
        await trio.sleep(WINDOWS.lease_ttl + WINDOWS.stream_grace + 1)
        assert ended.is_set()
        with pytest.raises(PagerError) as caught:
            await harness.service.authenticate(bob_info["token"])
        assert caught.value.code is ErrorCode.EXPIRED


async def test_sends_racing_a_purge_are_dead_lettered_or_refused(harness: Harness) -> None:
    """Retention acts on an inbox through its actor: sends to bob racing the operator's purge
    of bob (waiting in his actor's mailbox when it begins) are each answered either sent, and
    then dead-lettered `purged` with the rest of his inbox, or `unknown_recipient` (he is
    gone); none is left queued for an identity that no longer exists, none is `internal`."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        bob_info, _ = await harness.register("bob")
        sent: list[str] = []
        refused: list[ErrorCode] = []

        async def send(n: int) -> None:
            try:
                answer = await harness.service.send(alice, to="bob", body=f"m{n}")
            except PagerError as exc:
                refused.append(exc.code)
            else:
                sent.append(answer["message_id"])

        async with trio.open_nursery() as nursery:
            for n in range(40):
                nursery.start_soon(send, n)
            for _ in range(3):
                await trio.lowlevel.checkpoint()  # the sends wait in bob's mailbox
            await harness.service.directory.call(PurgeIdentity(bob_info["agent_id"], "operator"))
        assert set(refused) <= {ErrorCode.UNKNOWN_RECIPIENT}
        assert len(sent) + len(refused) == 40
        for message_id in sent:
            status = await harness.service.message_status(alice, message_id=message_id)
            assert (status["state"], status["dead_reason"]) == ("dead", "purged"), status


async def test_a_stream_closing_while_the_broker_stops_is_dropped_quietly(tmp_path: Path) -> None:
    """A stream (an SSE client, a wake run) that ends after the identities' nursery closed has
    no actor left to tell: its close is dropped, it never raises into the stream's cleanup."""
    async with open_harness(tmp_path) as harness:
        _, bob = await harness.register("bob")
        stream = object()
        await harness.service.stream_opened(bob, stream)
        identities = harness.service.identities
    assert bob.session_id is not None
    assert identities.index.by_session(bob.session_id) is not None  # still to be told
    identities.stream_closed(bob.session_id, stream)  # the broker has stopped: no error
