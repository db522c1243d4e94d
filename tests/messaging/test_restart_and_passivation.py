"""State comes back from the store: a restart requeues lapsed claims; idle identities stop and
come back on demand."""

from __future__ import annotations

from pathlib import Path

import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from actors.identity import IDLE_AFTER
from pager.domain.clock import TrioWallClock
from tests.messaging.conftest import Harness, open_harness


async def test_restart_requeues_claims_whose_ack_wait_passed(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """A claim open when the broker stopped, whose ack wait passed while it was down, is
    offered again at once after the restart."""
    clock = TrioWallClock()
    with trio.fail_after(600):
        async with open_harness(tmp_path, clock=clock) as first:
            _, alice = await first.register("alice", conversation_key="a")
            _, bob = await first.register("bob", conversation_key="b")
            sent = await first.service.send(alice, to="bob", body="survive me")
            [claim] = (await first.service.fetch(bob))["claims"]
        autojump_clock.jump(120)  # the broker is down past the 60 s ack wait
        async with open_harness(tmp_path, clock=clock) as second:
            _, bob = await second.register("bob", conversation_key="b")
            [again] = (await second.service.fetch(bob))["claims"]
            assert again["message"]["id"] == sent["message_id"]
            assert again["message"]["attempt"] == 2
            acked = await second.service.ack(bob, tokens=[claim["token"], again["token"]])
            assert acked["applied"] == [again["token"]]


async def test_a_claim_whose_ack_wait_passed_while_no_actor_ran_is_requeued_when_a_send_starts_it(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """bob's actor stopped with a claim open; its ack wait passes while none runs. The send
    that starts the actor again catches up first: the claim lapses (its message offered
    again) before the send that started it is written."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        first = await harness.service.send(alice, to="bob", body="claimed, never acked")
        await harness.service.fetch(bob)
        await harness.service.identities.stop(bob.agent_id)
        autojump_clock.jump(120)  # past the 60 s ack wait, with no actor of bob's running
        second = await harness.service.send(alice, to="bob", body="after the lapse")
        mail = ("message.queued", "message.requeued")
        assert [(kind, data["message_id"]) for kind, data in harness.events() if kind in mail] == [
            ("message.queued", first["message_id"]),
            ("message.requeued", first["message_id"]),
            ("message.queued", second["message_id"]),
        ]


async def test_restart_keeps_attachments_with_a_fresh_lease(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """Sessions attached when the broker stopped are still attached after it restarts."""
    clock = TrioWallClock()
    with trio.fail_after(600):
        async with open_harness(tmp_path, clock=clock) as first:
            info, _ = await first.register("bob")
        autojump_clock.jump(80)  # nobody could renew while it was down
        async with open_harness(tmp_path, clock=clock) as second:
            caller = await second.service.authenticate(info["token"])
            assert caller.agent_id == info["agent_id"]


async def test_idle_identity_passivates_and_reactivates(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """An identity with nothing pending stops after the idle window; mail brings it back."""
    with trio.fail_after(3 * IDLE_AFTER):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        await harness.service.detach(bob)
        identities = harness.service.identities
        assert bob.agent_id in identities.active_ids()
        await trio.sleep(IDLE_AFTER + 10)
        assert bob.agent_id not in identities.active_ids()
        await harness.service.send(alice, to="bob", body="wake the inbox")
        assert bob.agent_id in identities.active_ids()
        _, bob = await harness.register("bob")
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["body"] == "wake the inbox"


async def test_mail_reaches_an_identity_that_passivated_after_earlier_mail(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The service keeps refs of identity actors it called; one that passivated since is
    asked of the directory again, and the mail still arrives."""
    with trio.fail_after(3 * IDLE_AFTER):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        await harness.service.send(alice, to="bob", body="first")
        [claim] = (await harness.service.fetch(bob))["claims"]
        await harness.service.ack(bob, tokens=[claim["token"]])
        await harness.service.detach(bob)
        identities = harness.service.identities
        await trio.sleep(IDLE_AFTER + 10)
        assert bob.agent_id not in identities.active_ids()
        await harness.service.send(alice, to="bob", body="second")
        assert bob.agent_id in identities.active_ids()
        _, bob = await harness.register("bob")
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["body"] == "second"


async def test_identity_with_waiting_mail_passivates_and_the_scheduler_wakes_it_when_due(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """Virtual whatever mail waits: a detached identity holding a message stops when idle (its
    next due time, the message's expiry, is in the store) and the scheduler starts it again
    when that time comes, which dead-letters the message."""
    expiry = harness.service.config.windows.message_expiry
    with trio.fail_after(2 * expiry):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        await harness.service.detach(bob)
        sent = await harness.service.send(alice, to="bob", body="expire in the store")
        identities = harness.service.identities
        await trio.sleep(IDLE_AFTER + 10)
        assert bob.agent_id not in identities.active_ids()
        await trio.sleep(expiry)
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert (status["state"], status["dead_reason"]) == ("dead", "expired")


async def test_start_activates_only_attached_and_due_identities(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """After a restart, the identities with an attached session and those already due run;
    one whose mail merely waits stays in the store."""
    clock = TrioWallClock()
    with trio.fail_after(600):
        async with open_harness(tmp_path, clock=clock) as first:
            _, alice = await first.register("alice")
            _, bob = await first.register("bob")
            _, carol = await first.register("carol")
            await first.service.send(alice, to="bob", body="waits a week")
            await first.service.send(alice, to="carol", body="claimed, never acked")
            await first.service.fetch(carol)
            await first.service.detach(bob)
            await first.service.detach(carol)
        autojump_clock.jump(120)  # carol's ack wait (60 s) ends while the broker is down
        async with open_harness(tmp_path, clock=clock) as second:
            await wait_all_tasks_blocked()
            active = second.service.identities.active_ids()
            assert active == {alice.agent_id, carol.agent_id}
