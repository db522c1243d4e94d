"""A lapsed claim returns to the queue at its deadline, whether or not its recipient is
attached, however many restarts happened, and even if its identity actor stopped meanwhile."""

from __future__ import annotations

from pathlib import Path
from typing import Any, cast

import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from pager.domain.clock import TrioWallClock
from pager.domain.views import MessageView
from tests.messaging.conftest import WINDOWS, Harness, open_harness

#: Virtual seconds past the ack wait by which the claim must be back in the queue.
SLACK = 5.0


async def _inbox(harness: Harness, agent_id: str) -> list[MessageView]:
    """The recipient's messages as the operator views (`/v1/agents/{id}/messages`) show them."""
    return await harness.messages(agent_id, "in")


async def test_restart_requeues_detached_claim_at_its_deadline(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """bob fetches without acking and detaches, the broker restarts before the ack wait ends:
    at the deadline the message is queued again though nobody attached or asked."""
    clock = TrioWallClock()
    with trio.fail_after(600):
        async with open_harness(tmp_path, clock=clock) as first:
            _, alice = await first.register("alice", conversation_key="a")
            _, bob = await first.register("bob", conversation_key="b")
            sent = await first.service.send(alice, to="bob", body="requeue me")
            [claim] = (await first.service.fetch(bob))["claims"]
            await first.service.detach(bob)
        async with open_harness(tmp_path, clock=clock) as second:
            [held] = await _inbox(second, bob.agent_id)
            assert (held.message_id, held.state) == (sent["message_id"], "claimed")
            await trio.sleep(WINDOWS.ack_wait + SLACK)
            [back] = await _inbox(second, bob.agent_id)
            assert (back.state, back.attempts) == ("queued", 1)
            _, bob = await second.register("bob", conversation_key="b")
            [again] = (await second.service.fetch(bob))["claims"]
            assert again["message"]["attempt"] == 2
            acked = await second.service.ack(bob, tokens=[claim["token"]])
            assert acked["not_applied"][0]["reason"] in ("expired", "superseded")


async def test_restart_twice_still_requeues_detached_claim(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """Two restarts inside the ack wait do not lose the deadline of a detached claim."""
    clock = TrioWallClock()
    with trio.fail_after(600):
        async with open_harness(tmp_path, clock=clock) as first:
            _, alice = await first.register("alice", conversation_key="a")
            _, bob = await first.register("bob", conversation_key="b")
            await first.service.send(alice, to="bob", body="requeue me")
            await first.service.fetch(bob)
            await first.service.detach(bob)
        async with open_harness(tmp_path, clock=clock):
            await trio.sleep(WINDOWS.ack_wait / 3)
        async with open_harness(tmp_path, clock=clock) as third:
            await trio.sleep(WINDOWS.ack_wait)
            [back] = await _inbox(third, bob.agent_id)
            assert (back.state, back.attempts) == ("queued", 1)


async def test_stopped_identity_with_open_claim_is_woken_at_its_deadline(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """An identity actor that stops with a claim open (here: it crashes) is activated again by
    the directory when the claim's ack wait ends, and the message is queued again."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        await harness.service.send(alice, to="bob", body="requeue me")
        await harness.service.fetch(bob)
        await harness.service.detach(bob)
        identities = harness.service.identities
        ref = await identities.activate(bob.agent_id)
        ref.try_cast(cast(Any, "not a message"))  # an unknown message crashes the actor
        await wait_all_tasks_blocked()
        assert not ref.alive
        await trio.sleep(WINDOWS.ack_wait + SLACK)
        [back] = await _inbox(harness, bob.agent_id)
        assert (back.state, back.attempts) == ("queued", 1)
        assert bob.agent_id in identities.active_ids()
