"""At-least-once delivery in process, on the mock clock: claims, acks, redelivery, pushes."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from actors.identity_delivery import PUSH_TIMEOUT, WAKE_EVERY
from pager.domain.errors import ErrorCode, PagerError
from tests.messaging.conftest import WINDOWS, Harness, http_delivery


async def test_send_fetch_ack_round_trip(harness: Harness, autojump_clock: MockClock) -> None:
    """alice sends, bob fetches and acks; the sender sees `acknowledged`."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob")
        sent = await harness.service.send(alice, to="bob", body="hello")
        assert sent["recipient"]["address"] == bob_info["address"]
        assert sent["wake"] == "queued"
        fetched = await harness.service.fetch(bob)
        [claim] = fetched["claims"]
        assert claim["message"]["body"] == "hello"
        assert claim["message"]["from"].startswith("alice@")
        assert claim["message"]["attempt"] == 1
        acked = await harness.service.ack(bob, tokens=[claim["token"]])
        assert acked == {"applied": [claim["token"]], "not_applied": []}
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "acknowledged"
        assert (await harness.service.fetch(bob))["claims"] == []


async def test_unacked_claim_returns_after_ack_wait(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """No ack: after the ack wait the message is offered again with attempt 2; the stale token
    is refused with a reason, the fresh one applied."""
    with trio.fail_after(300):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        sent = await harness.service.send(alice, to="bob", body="ping")
        [first] = (await harness.service.fetch(bob))["claims"]
        assert (await harness.service.fetch(bob))["claims"] == []  # claimed, not offered twice
        await trio.sleep(61)  # virtual: past the 60 s ack wait
        [second] = (await harness.service.fetch(bob))["claims"]
        assert second["message"]["id"] == sent["message_id"]
        assert second["message"]["attempt"] == 2
        acked = await harness.service.ack(bob, tokens=[first["token"], second["token"]])
        assert acked["applied"] == [second["token"]]
        [(stale)] = acked["not_applied"]
        assert stale["reason"] in ("expired", "superseded")
        again = await harness.service.ack(bob, tokens=[second["token"]])
        assert again["not_applied"] == [
            {"token": second["token"], "reason": "already_acknowledged"}
        ]
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "acknowledged"
        assert status["attempts"] == 2


async def test_ack_reasons_unknown_and_not_yours(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """Tokens of others and unknown tokens are listed with their reasons, nothing applied."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        await harness.service.send(alice, to="bob", body="x")
        [claim] = (await harness.service.fetch(bob))["claims"]
        result = await harness.service.ack(alice, tokens=[claim["token"], "clm_nope"])
        assert result["applied"] == []
        assert {r["reason"] for r in result["not_applied"]} == {"not_yours", "unknown_token"}


async def test_long_poll_answered_by_a_send(harness: Harness, autojump_clock: MockClock) -> None:
    """A fetch with wait_s returns as soon as a message arrives, not at its deadline."""
    with trio.fail_after(60):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        results: list[dict[str, Any]] = []

        async def poll() -> None:
            results.append(await harness.service.fetch(bob, wait_s=30))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(5)
            started = trio.current_time()
            sent = await harness.service.send(alice, to="bob", body="wake up")
        assert sent["wake"] == "delivered"
        assert trio.current_time() - started < 1
        [claim] = results[0]["claims"]
        assert claim["message"]["body"] == "wake up"


async def test_long_poll_times_out_empty(harness: Harness, autojump_clock: MockClock) -> None:
    """A long poll with nothing to deliver ends empty at its deadline."""
    with trio.fail_after(60):
        _, bob = await harness.register("bob")
        start = trio.current_time()
        assert (await harness.service.fetch(bob, wait_s=20))["claims"] == []
        assert trio.current_time() - start >= 20


async def test_send_order_per_pair(harness: Harness, autojump_clock: MockClock) -> None:
    """First deliveries follow send order for one sender→recipient pair."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        for n in range(15):
            await harness.service.send(alice, to="bob", body=f"m{n}")
        bodies = [
            c["message"]["body"] for c in (await harness.service.fetch(bob, limit=100))["claims"]
        ]
        assert bodies == [f"m{n}" for n in range(15)]


async def test_idempotency_key_returns_original(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """A repeated send with the same key returns the original message."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        first = await harness.service.send(alice, to="bob", body="once", idempotency_key="k1")
        second = await harness.service.send(alice, to="bob", body="once", idempotency_key="k1")
        assert second["message_id"] == first["message_id"]
        assert second["duplicate"] is True
        assert len((await harness.service.fetch(bob))["claims"]) == 1


async def test_max_attempts_dead_letters(harness: Harness, autojump_clock: MockClock) -> None:
    """A message never acknowledged dies after max_attempts with the reason."""
    with trio.fail_after(3000):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        sent = await harness.service.send(alice, to="bob", body="doomed")
        for _ in range(5):
            assert len((await harness.service.fetch(bob))["claims"]) == 1
            await trio.sleep(61)
        assert (await harness.service.fetch(bob))["claims"] == []
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "dead"
        assert status["dead_reason"] == "max_attempts"


async def test_message_expiry_dead_letters(harness: Harness, autojump_clock: MockClock) -> None:
    """An unsettled message older than message_expiry dies with `expired`."""
    with trio.fail_after(30 * 86400):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        sent = await harness.service.send(alice, to="bob", body="stale")
        await trio.sleep(8 * 86400)
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "dead"
        assert status["dead_reason"] == "expired"
        assert (await harness.service.fetch(bob))["claims"] == []


async def test_push_to_delivery_address_delivered(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """With a delivery address, the claim is pushed inside the notification."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", delivery=http_delivery())
        sent = await harness.service.send(alice, to="bob", body="pushed")
        assert sent["wake"] == "delivered"
        [push] = await harness.inbox.pushed(1)
        assert [v.claim.message.body for v in push.claims] == ["pushed"]
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "delivered"
        await harness.service.ack(bob, tokens=[push.claims[0].claim.token])
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "acknowledged"


async def test_refused_push_comes_again_on_schedule(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """A refused delivery is requeued and pushed again after the redelivery delay."""
    with trio.fail_after(300):
        _, alice = await harness.register("alice")
        await harness.register("bob", delivery=http_delivery())
        harness.inbox.answer = lambda tokens: ([], tokens)
        sent = await harness.service.send(alice, to="bob", body="retry me")
        # The sender is answered at the commit, when the message went to bob's delivery
        # address; the refusal that follows puts it back in the queue.
        assert sent["wake"] == "delivered"
        await harness.inbox.pushed(1)
        harness.inbox.answer = lambda tokens: (tokens, [])
        # Mock time, before the 2 s redelivery delay: the refusal is back in the queue, and
        # nothing was pushed again.
        await trio.sleep(1.5)
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "queued"
        assert len(harness.inbox.pushes) == 1
        await trio.sleep(1)
        assert len(harness.inbox.pushes) == 2
        assert harness.inbox.pushes[1].claims[0].claim.attempt == 2


async def test_a_hung_delivery_address_never_holds_the_sender(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The sender is answered at the commit: an inbox that never answers costs the sender
    nothing, and its claim comes back to the queue when the push times out."""
    with trio.fail_after(300):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", delivery=http_delivery())
        harness.inbox.answer = lambda tokens: None
        started = trio.current_time()
        sent = await harness.service.send(alice, to="bob", body="anyone there?")
        assert trio.current_time() == started  # not one (mock) tick waited on bob's inbox
        assert sent["wake"] == "delivered"
        await trio.sleep(PUSH_TIMEOUT - 1)  # mock time: the push is still out
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "delivered"
        await trio.sleep(2)  # past the push timeout: the claim is back in the queue
        status = await harness.service.message_status(alice, message_id=sent["message_id"])
        assert status["state"] == "queued"
        await harness.service.detach(bob)  # no address now: the mail waits for a fetch
        _, bob = await harness.register("bob")
        [claim] = (await harness.service.fetch(bob, wait_s=30))["claims"]  # after the delay
        assert claim["message"]["id"] == sent["message_id"]


async def test_unknown_recipient_and_oversized_body(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """Sends to nobody, bodies over the cap and empty bodies are refused with their codes."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        with pytest.raises(PagerError) as unknown:
            await harness.service.send(alice, to="nobody", body="x")
        assert unknown.value.code is ErrorCode.UNKNOWN_RECIPIENT
        with pytest.raises(PagerError) as big:
            await harness.service.send(alice, to="alice", body="x" * (32 * 1024 + 1))
        assert big.value.code is ErrorCode.OVERSIZED_CONTENT
        for blank in ("", "   ", "\n\t"):
            with pytest.raises(PagerError) as empty:
                await harness.service.send(alice, to="alice", body=blank)
            assert empty.value.code is ErrorCode.VALIDATION_FAILED


async def test_attached_session_without_address_gets_a_debounced_wake(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """New mail for an attached session with no delivery address asks its provider to run
    the wake helper, at most once per WAKE_EVERY for a burst."""
    with trio.fail_after(60):
        _, alice = await harness.register("alice")
        await harness.register("bob", conversation_key="conv-b")
        for n in range(3):
            await harness.service.send(alice, to="bob", body=f"burst {n}")
        await wait_all_tasks_blocked()  # the wake is asked for after the send is answered
        [wake] = harness.inbox.wakes
        assert wake.values["conversation_key"] == "conv-b"
        await trio.sleep(3)
        await harness.service.send(alice, to="bob", body="later")
        await wait_all_tasks_blocked()
        assert len(harness.inbox.wakes) == 2


async def test_mail_after_the_woken_turn_is_woken_when_the_window_ends(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The woken turn came and took its mail at once; mail sent right after it, within
    WAKE_EVERY of that wake, is no longer that turn's: it gets a wake of its own when the
    window ends (before, it waited unwoken until the next prompt). Mail the session took
    before the window ended is owed nothing."""
    with trio.fail_after(60):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", conversation_key="conv-b")
        await harness.service.send(alice, to="bob", body="first")
        await wait_all_tasks_blocked()
        assert len(harness.inbox.wakes) == 1
        [claim] = (await harness.service.fetch(bob))["claims"]  # the woken turn
        await harness.service.ack(bob, tokens=[claim["token"]])
        await harness.service.send(alice, to="bob", body="after the turn")
        await wait_all_tasks_blocked()
        assert len(harness.inbox.wakes) == 1  # within the window: not yet
        await trio.sleep(WAKE_EVERY + 0.5)  # the mock clock: past the wake window
        assert len(harness.inbox.wakes) == 2
        # Again, but the session takes the mail before the window ends: no wake for it.
        [claim] = (await harness.service.fetch(bob))["claims"]
        await harness.service.ack(bob, tokens=[claim["token"]])
        await harness.service.send(alice, to="bob", body="taken in time")
        await wait_all_tasks_blocked()
        [claim] = (await harness.service.fetch(bob))["claims"]
        await harness.service.ack(bob, tokens=[claim["token"]])
        await trio.sleep(WAKE_EVERY + 0.5)  # the mock clock: past the wake window
        assert len(harness.inbox.wakes) == 2


async def test_mail_of_a_lapsed_claim_is_woken_again(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """A turn claimed the mail and never acknowledged it (its harness died mid-turn, say):
    when the ack wait lapses the mail waits again, and the session is woken for it as for
    new mail, not left waiting for the next prompt."""
    with trio.fail_after(600):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob", conversation_key="conv-b")
        await harness.service.send(alice, to="bob", body="claimed, never acked")
        await wait_all_tasks_blocked()
        assert len(harness.inbox.wakes) == 1
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["attempt"] == 1
        await trio.sleep(WINDOWS.ack_wait + 1)
        assert len(harness.inbox.wakes) == 2
        [again] = (await harness.service.fetch(bob))["claims"]
        assert again["message"]["attempt"] == 2
