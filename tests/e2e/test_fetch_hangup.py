"""A long-polling `fetch` whose client hangs up leaves later mail queued for the next fetch,
instead of claiming it for nobody (it would return only after the ack wait)."""

from __future__ import annotations

import json
from urllib.parse import urlsplit

import trio

from tests.e2e.conftest import Broker, mcp_session, structured

#: Long enough for the request to reach the recipient's inbox actor and park there; if it
#: were not parked yet, the test could only pass without showing anything, never fail.
PARK = 0.5


async def test_fetch_long_poll_abandoned_by_its_client_claims_nothing(broker: Broker) -> None:
    """bob's long poll is parked; bob hangs up; alice sends: bob's next fetch gets the message
    at once, as its first attempt."""
    with trio.fail_after(60):
        alice = await broker.register("alice")
        bob = await broker.register("bob")
        address = urlsplit(broker.url)
        assert address.hostname is not None
        assert address.port is not None
        call = {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "fetch", "arguments": {"wait_s": 30}},
        }
        body = json.dumps(call).encode()
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: {address.netloc}\r\n"
            f"Authorization: Bearer {bob['token']}\r\nContent-Type: application/json\r\n"
            f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n"
        ).encode() + body
        stream = await trio.open_tcp_stream(address.hostname, address.port)
        await stream.send_all(request)
        await trio.sleep(PARK)
        await stream.aclose()
        async with mcp_session(broker.url, alice["token"]) as a:
            structured(await a.call_tool("send", {"to": "bob", "body": "still for you"}))
        async with mcp_session(broker.url, bob["token"]) as b:
            fetched = structured(await b.call_tool("fetch", {"wait_s": 5}))
        [claim] = fetched["claims"]
        assert claim["message"]["body"] == "still for you"
        assert claim["message"]["attempt"] == 1
