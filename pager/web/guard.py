"""The edge guard in front of every route (SPEC §6, §12).

Refuses requests whose `Host` or `Origin` is not the broker's own loopback address
(DNS-rebinding protection) and bodies over the request cap with 413 before reading them.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """`Host` values that name this broker: its bind address and the loopback names."""
    names = {host if ":" not in host else f"[{host}]", *LOOPBACK_NAMES}
    return frozenset(f"{name}:{port}" for name in names)


async def send_error(send: Send, status: int, code: str, message: str) -> None:
    body = json.dumps({"error": {"code": code, "message": message}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class EdgeGuard:
    """ASGI middleware: host/origin check and the request-size cap."""

    def __init__(self, app: ASGIApp, *, hosts: frozenset[str], request_cap: int) -> None:
        self.app = app
        self.hosts = hosts
        self.origins = frozenset(f"http://{host}" for host in hosts)
        self.request_cap = request_cap

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {key.decode("latin-1").lower(): value for key, value in scope["headers"]}
        host = headers.get("host", b"").decode("latin-1").lower()
        if host not in self.hosts:
            await send_error(
                send,
                421,
                "unauthenticated",
                f"Host {host!r} is not this broker's address; connect to "
                f"{sorted(self.hosts)[0]} directly",
            )
            return
        origin = headers.get("origin")
        if origin is not None and origin.decode("latin-1").lower() not in self.origins:
            await send_error(
                send,
                403,
                "unauthenticated",
                "cross-origin requests are refused; call the broker from a local program, "
                "not a web page",
            )
            return
        length = headers.get("content-length")
        if length is not None and (not length.isdigit() or int(length) > self.request_cap):
            await send_error(
                send,
                413,
                "oversized_content",
                f"the request body exceeds {self.request_cap} bytes; send less",
            )
            return
        if length is not None:  # the HTTP parser reads exactly that much: nothing to count
            await self.app(scope, receive, send)
            return
        await _CappedRequest(self.app, self.request_cap, scope, receive, send).run()


class _CappedRequest:
    """Counts a streamed (chunked) body; past the cap the app sees a disconnect and the
    client gets 413, unless the app already started answering."""

    def __init__(self, app: ASGIApp, cap: int, scope: Scope, receive: Receive, send: Send):
        self.app, self.cap, self.scope = app, cap, scope
        self.upstream_receive, self.upstream_send = receive, send
        self.received = 0
        self.over = False
        self.started = False

    async def run(self) -> None:
        await self.app(self.scope, self.receive, self.send)
        if self.over and not self.started:
            await send_error(
                self.upstream_send,
                413,
                "oversized_content",
                f"the request body exceeds {self.cap} bytes; send less",
            )

    async def receive(self) -> Message:
        if self.over:
            return {"type": "http.disconnect"}
        message = await self.upstream_receive()
        if message["type"] == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.cap:
                self.over = True
                return {"type": "http.disconnect"}
        return message

    async def send(self, message: Message) -> None:
        if self.over:
            return  # the 413 answers instead
        if message["type"] == "http.response.start":
            self.started = True
        await self.upstream_send(message)
