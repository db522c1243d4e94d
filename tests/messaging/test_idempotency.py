"""`idempotency_key` (SPEC §8 guarantee 6): an unchanged repeat answers the original; a key
reused for a different send within the window is refused with `conflict`, never dropped."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from trio.testing import MockClock

from pager.domain.errors import ErrorCode, PagerError
from tests.messaging.conftest import WINDOWS, Harness


async def test_idempotency_repeat_answers_original_with_its_recipient(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """An unchanged repeat is the original message, to its own recipient, sent once."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob")
        args: dict[str, Any] = {"body": "once", "thread": "t1", "idempotency_key": "k1"}
        first = await harness.service.send(alice, to="bob", **args)
        second = await harness.service.send(alice, to="bob", **args)
        assert (second["message_id"], second["duplicate"]) == (first["message_id"], True)
        assert second["recipient"] == {
            "agent_id": bob_info["agent_id"],
            "address": bob_info["address"],
            "implementation": "shell",
            "waits_to_be_read": True,  # a shell is never shown mail at its turns
        }
        assert len((await harness.service.fetch(bob))["claims"]) == 1


async def test_idempotency_key_reused_for_another_recipient_is_refused(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """The same key to carol after bob is a conflict naming bob's message; carol gets none."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        bob_info, bob = await harness.register("bob")
        _, carol = await harness.register("carol")
        first = await harness.service.send(alice, to="bob", body="hi", idempotency_key="k1")
        with pytest.raises(PagerError) as refused:
            await harness.service.send(alice, to="carol", body="hi", idempotency_key="k1")
        error = refused.value
        assert error.code is ErrorCode.CONFLICT
        assert first["message_id"] in error.message
        assert bob_info["address"] in error.message
        assert "recipient" in error.message
        assert "new idempotency_key" in error.message
        assert error.details["message_id"] == first["message_id"]
        assert error.details["differs"] == ["recipient"]
        assert (await harness.service.fetch(carol))["claims"] == []
        assert len((await harness.service.fetch(bob))["claims"]) == 1


@pytest.mark.parametrize(
    ("changed", "field"),
    [
        ({"body": "something else"}, "body"),
        ({"thread": "t2"}, "thread"),
        ({"reply_to": "msg_other"}, "reply_to"),
    ],
)
async def test_idempotency_key_reused_with_other_content_is_refused(
    harness: Harness, autojump_clock: MockClock, changed: dict[str, str], field: str
) -> None:
    """Same key and recipient but another body, thread or reply_to: `conflict` says what
    differs, and only the original is in bob's inbox."""
    with trio.fail_after(30):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        args: dict[str, Any] = {
            "body": "the plan",
            "thread": "t1",
            "reply_to": None,
            "idempotency_key": "k1",
        }
        first = await harness.service.send(alice, to="bob", **args)
        with pytest.raises(PagerError) as refused:
            await harness.service.send(alice, to="bob", **{**args, **changed})
        assert refused.value.code is ErrorCode.CONFLICT
        assert first["message_id"] in refused.value.message
        assert refused.value.details["differs"] == [field]
        [claim] = (await harness.service.fetch(bob))["claims"]
        assert claim["message"]["body"] == "the plan"


async def test_idempotency_key_is_per_sender_and_free_after_the_window(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """Another sender may use the same key; after the idempotency window the key names a new
    message whatever it holds."""
    with trio.fail_after(3 * WINDOWS.idempotency):
        _, alice = await harness.register("alice", conversation_key="a")
        await harness.register("bob", conversation_key="b")
        _, carol = await harness.register("carol", conversation_key="c")
        first = await harness.service.send(alice, to="bob", body="one", idempotency_key="k1")
        other = await harness.service.send(carol, to="bob", body="two", idempotency_key="k1")
        assert other["duplicate"] is False
        await trio.sleep(WINDOWS.idempotency + 1)
        _, alice = await harness.register("alice", conversation_key="a")
        later = await harness.service.send(alice, to="carol", body="new", idempotency_key="k1")
        assert later["duplicate"] is False
        assert later["message_id"] != first["message_id"]
