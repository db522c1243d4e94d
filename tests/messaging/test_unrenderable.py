"""A message that cannot be rendered costs only itself, in process (mock clock): it dies once
(`unrenderable`) at the claim that meets it, by `fetch`, the hook or a push, and the rest of
its batch is delivered; listings show it as a placeholder. Planted below the edge: through the
service with a page the edge would refuse, or straight into the store."""

from __future__ import annotations

import json
from typing import Any

import trio
from trio.testing import MockClock, wait_all_tasks_blocked

from pager.domain.api import Caller
from pager.domain.pages import Page
from tests.messaging.conftest import Harness, http_delivery


def deep(levels: int) -> Any:
    value: Any = "bottom"
    for _ in range(levels):
        value = [value]
    return value


async def poison(harness: Harness, sender: Caller, to: str) -> str:
    """A page whose field nests 400 levels: the edge refuses it, the service does not."""
    page = Page(text="poison", job_id=None, fields=(("x", deep(400)),))
    sent = await harness.service.notify(sender, to=to, page=page, run=False)
    return str(sent["message_id"])


async def corrupt_fields(harness: Harness, message_id: str, text: str) -> None:
    """A stored message's fields overwritten, as a broken row would hold them."""

    def write(conn: Any) -> None:
        conn.execute("UPDATE messages SET fields = ? WHERE id = ?", (text, message_id))

    await harness.checkpoint.write(write)


def dead_events(harness: Harness, message_id: str) -> list[dict[str, Any]]:
    return [e for e in harness.events_of("message.dead") if e["message_id"] == message_id]


async def test_fetch_delivers_the_batch_and_kills_the_poison_once(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """A 400-level page ahead of three messages: the listings show a placeholder, `fetch`
    gets the three, the page dies once with its one attempt, and stays dead after every ack
    wait (no attempt is burned)."""
    with trio.fail_after(900):
        _, alice = await harness.register("alice")
        _, bob = await harness.register("bob")
        bad = await poison(harness, alice, "bob")
        for n in range(3):
            await harness.service.send(alice, to="bob", body=f"innocent {n}")
        waiting = await harness.service.inbox(bob)
        assert waiting["messages"][0]["body"].endswith("cannot be shown: unrenderable")
        assert waiting["messages"][0]["fields"] is None
        claims = (await harness.service.fetch(bob))["claims"]
        assert [c["message"]["body"] for c in claims] == [f"innocent {n}" for n in range(3)]
        await trio.sleep(600)  # virtual: past every ack wait and redelivery
        status = await harness.service.message_status(alice, message_id=bad)
        assert (status["state"], status["dead_reason"], status["attempts"]) == (
            "dead",
            "unrenderable",
            1,
        )
        [event] = dead_events(harness, bad)
        assert event["reason"] == "unrenderable"
        sent = await harness.service.sent(alice)
        assert [m["dead_reason"] for m in sent["messages"] if m["id"] == bad] == ["unrenderable"]


async def test_a_hook_shows_the_rest_when_fields_are_not_json(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """Stored fields that are not JSON at all: the hook shows the innocent message only."""
    with trio.fail_after(60):
        _, alice = await harness.register("alice")
        bob_info, _ = await harness.register("bob")
        page = Page(text="will break", job_id=None, fields=(("k", "v"),))
        bad = (await harness.service.notify(alice, to="bob", page=page, run=False))["message_id"]
        await corrupt_fields(harness, bad, "{not json")
        await harness.service.send(alice, to="bob", body="innocent")
        hooked = await harness.service.hook_claim(
            implementation="shell",
            conversation_key="conv-1",
            max_chars=9000,
            session_token=bob_info["token"],
        )
        assert len(hooked["tokens"]) == 1
        assert "innocent" in hooked["text"]
        assert "will break" not in hooked["text"]
        assert (await harness.message(bad)).dead_reason == "unrenderable"
        history = await harness.service.history(alice)
        assert all(json.dumps(m) for m in history["messages"])


async def test_a_push_leaves_out_what_cannot_be_rendered(
    harness: Harness, autojump_clock: MockClock
) -> None:
    """To a delivery address: the poison is never written there and dies once; the message
    after it is delivered."""
    with trio.fail_after(900):
        _, alice = await harness.register("alice")
        await harness.register("bob", delivery=http_delivery())
        bad = await poison(harness, alice, "bob")
        good = (await harness.service.send(alice, to="bob", body="innocent"))["message_id"]
        await harness.inbox.pushed(2)
        await wait_all_tasks_blocked()  # the second push answered and committed
        assert (await harness.message(good)).state == "delivered"
        assert (await harness.message(bad)).dead_reason == "unrenderable"
        await trio.sleep(600)
        assert len(dead_events(harness, bad)) == 1
