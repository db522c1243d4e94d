"""The session event stream's `mail` hint (docs/protocol.md): said when mail waits that nobody
took at once, to that session's stream only, and it claims nothing.

What `pager <implementation>` builds on it (an idle harness knocked through its input file) is
tested with a FAKE Qwen Code in tests/e2e/test_wrapper_qwen.py.
"""

from __future__ import annotations

import httpx2
import pytest
import trio

from tests.e2e.conftest import Broker, mcp_session, structured

BOUND = 20.0


async def follow(broker: Broker, token: str, events: trio.MemorySendChannel[str]) -> None:
    """Each event type of the session's stream, into `events`."""
    async with (
        httpx2.AsyncClient(timeout=30) as http,
        http.stream(
            "GET",
            f"{broker.url}/v1/sessions/current/events",
            headers={"Authorization": f"Bearer {token}"},
        ) as response,
    ):
        async for line in response.aiter_lines():
            if line.startswith("event: "):
                await events.send(line.removeprefix("event: "))


async def test_mail_hint_reaches_only_its_session_and_claims_nothing(broker: Broker) -> None:
    """x and y each hold their event stream (as a launch does). Mail for y is hinted on y's
    stream, not on x's (another session's); mail for x is hinted on x's and stays `queued`:
    the hint claims nothing, so a waiter that acts on it never takes mail before the
    harness's own turn shows it."""
    x, y, alice = await broker.register("x"), await broker.register("y"), await broker.register()
    x_send, x_events = trio.open_memory_channel[str](10)
    y_send, y_events = trio.open_memory_channel[str](10)
    with trio.fail_after(BOUND):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, broker, x["token"], x_send)
            nursery.start_soon(follow, broker, y["token"], y_send)
            assert await x_events.receive() == "ready"
            assert await y_events.receive() == "ready"
            async with mcp_session(broker.url, alice["token"]) as a:
                structured(await a.call_tool("send", {"to": "y", "body": "waits for y"}))
                assert await y_events.receive() == "mail"
                sent = structured(await a.call_tool("send", {"to": "x", "body": "waits for x"}))
                assert await x_events.receive() == "mail"
                status = structured(
                    await a.call_tool("message_status", {"message_id": sent["message_id"]})
                )
                assert status["state"] == "queued"  # hinted, not claimed
                # One hint each: x's stream said nothing of y's mail (it came first).
                with pytest.raises(trio.WouldBlock):
                    x_events.receive_nowait()
            nursery.cancel_scope.cancel()
