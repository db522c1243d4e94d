"""The edge guard in front of every route (SPEC §6, §12).

Refuses requests whose `Host` or `Origin` is not the broker's own loopback address
(DNS-rebinding protection) and bodies over the request cap with 413 before reading them.

It also ends every response so that Hypercorn (0.18, HTTP/1.1) can reuse or close the
connection, whatever the app behind it did (docs/decisions.md, "HTTP edges"):

- When an app answers before the request body is in (a 401 or 405 never reads it), Hypercorn
  closes the connection from inside the app's last `send`, and hands the app an
  `http.disconnect` first. Quart cancels its request task on that disconnect, which cancelled
  the close half-way: the connection stayed open, never read again, and its descriptor leaked
  (CLOSE-WAIT) once the client left. The guard therefore reads and discards the rest of such a
  body before the last `send` (so the connection is reused, not closed), and holds that
  disconnect back from the app until the `send` is done (so a close, when one is due, completes).
- Hypercorn's connection task shuts the socket down (`send_eof`) outside the lock its sends
  take, so a client hanging up while a response is being sent made that `send` raise
  `trio.BusyResourceError` out of the app. The guard takes that as the client having gone.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from typing import Any

import trio

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

#: How long the end of a response waits for the rest of a request body nobody read (the
#: client still sending it) before letting Hypercorn close the connection instead.
DRAIN_S = 5.0
#: A refused body is read and discarded up to this many bytes (or this many times the request
#: cap, if more), so that a client that sends all of it before reading the answer (curl, a
#: script's `sendall`) gets its 413 rather than a reset: closing a socket with unread data
#: resets the connection, and the client's send fails before it reads the answer. A body
#: declared longer than that gets its answer and a closed connection at once.
DISCARD_BYTES = 64 * 1024 * 1024
DISCARD_FACTOR = 8


def allowed_hosts(host: str, port: int) -> frozenset[str]:
    """`Host` values that name this broker: its bind address and the loopback names."""
    names = {host if ":" not in host else f"[{host}]", *LOOPBACK_NAMES}
    return frozenset(f"{name}:{port}" for name in names)


async def send_error(
    send: Send,
    status: int,
    code: str,
    message: str,
    *,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
    **details: Any,
) -> None:
    body = json.dumps({"error": {"code": code, "message": message, **details}}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *extra_headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class EdgeGuard:
    """ASGI middleware: host/origin check, the request-size cap, and the end of every
    response (see the module docstring)."""

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
        length = headers.get("content-length")
        declared = int(length) if length is not None and length.isdigit() else None
        exchange = _Exchange(receive, send, cap=self.request_cap, declared=declared)
        host = headers.get("host", b"").decode("latin-1").lower()
        if host not in self.hosts:
            await send_error(
                exchange.forward,
                421,
                "unauthenticated",
                f"Host {host!r} is not this broker's address; connect to "
                f"{sorted(self.hosts)[0]} directly",
            )
            return
        origin = headers.get("origin")
        if origin is not None and origin.decode("latin-1").lower() not in self.origins:
            await send_error(
                exchange.forward,
                403,
                "unauthenticated",
                "cross-origin requests are refused; call the broker from a local program, "
                "not a web page",
            )
            return
        if length is not None and declared is None:
            await send_error(
                exchange.forward,
                400,
                "validation_failed",
                "the Content-Length header is not a number of bytes",
                extra_headers=[(b"connection", b"close")],
            )
            return
        if declared is not None and declared > self.request_cap:
            await exchange.refuse_oversized()
            return
        await self.app(scope, exchange.receive, exchange.send)
        if exchange.over and not exchange.started:
            await exchange.refuse_oversized()


class _Exchange:
    """One request and its response through the guard.

    Counts a streamed (chunked) body: past the cap the app sees a disconnect and the client
    gets 413, unless the app already started answering. Ends the response as the module
    docstring says."""

    def __init__(self, receive: Receive, send: Send, *, cap: int, declared: int | None) -> None:
        self.upstream_receive, self.upstream_send = receive, send
        self.cap = cap
        self.declared = declared  # Content-Length; None for a chunked (or malformed) one
        self.received = 0
        self.over = False  # the body is past the cap: 413
        self.started = False  # the app began its response
        self.request_done = False  # the body's last message (or a disconnect) was received
        self.gone = False  # the client hung up: nothing more can reach it
        self._request_ended: trio.Event | None = None  # set with request_done, while draining
        self._ending = False  # the last send is under way: the app must not see a disconnect
        self._ended: trio.Event | None = None  # set when it is over, if the app waits for it

    async def receive(self) -> Message:
        """What the app receives."""
        if self.over:
            return {"type": "http.disconnect"}
        message = await self.upstream_receive()
        self._note(message)
        if self.over:
            return {"type": "http.disconnect"}
        if self._ending and message["type"] == "http.disconnect":
            # Hypercorn queues it inside the last send, before it recycles or closes the
            # connection; Quart would cancel that send on seeing it (module docstring).
            if self._ended is None:
                self._ended = trio.Event()
            await self._ended.wait()
        return message

    async def send(self, message: Message) -> None:
        """What the app sends; nothing once its body went over the cap (the 413 answers)."""
        if not self.over:
            await self.forward(message)

    async def refuse_oversized(self) -> None:
        self.over = True
        # The rest of the body is read and discarded (`_drain`, bounded), then the connection
        # closes: the client must not send on it again.
        size = (
            f"is {self.declared} bytes"
            if self.declared is not None
            else f"is over {self.cap} bytes"
        )
        await send_error(
            self.forward,
            413,
            "oversized_content",
            f"the request body {size}; the limit is {self.cap}. Send less, or split it",
            extra_headers=[(b"connection", b"close")],
            limit=self.cap,
            **({} if self.declared is None else {"size": self.declared}),
        )

    async def forward(self, message: Message) -> None:
        """Pass a response message on; the last one through `_end`."""
        kind = message["type"]
        if kind == "http.response.start":
            self.started = True
        elif kind == "http.response.body" and not message.get("more_body", False):
            await self._end(message.get("body", b""))
            return
        await self._upstream(message)

    def _note(self, message: Message) -> None:
        kind = message["type"]
        if kind == "http.request":
            self.received += len(message.get("body", b""))
            if self.received > self.cap:
                self.over = True
            if message.get("more_body", False):
                return
        elif kind == "http.disconnect":
            self.gone = True
        else:
            return
        self.request_done = True
        if self._request_ended is not None:
            self._request_ended.set()

    async def _upstream(self, message: Message) -> None:
        if self.gone:
            return
        try:
            await self.upstream_send(message)
        except trio.BusyResourceError:
            # Only Hypercorn's `send_eof` sends outside its send lock, and it runs when the
            # connection closes (the client hung up): this response cannot arrive anyway.
            self.gone = True

    async def _end(self, body: bytes) -> None:
        """Send the response's last message so that Hypercorn can reuse or close the
        connection (module docstring). The client has the whole answer before any waiting:
        only the empty end-of-message is held back."""
        if not self.request_done:
            if body:
                await self._upstream(
                    {"type": "http.response.body", "body": body, "more_body": True}
                )
                body = b""
            await self._drain()
        last: Message = {"type": "http.response.body", "body": body, "more_body": False}
        self._ending = True
        try:
            if self.request_done:
                await self._upstream(last)
                return
            async with trio.open_nursery() as nursery:
                # Hypercorn queues the disconnect behind the body chunks nobody read: keep its
                # queue moving, or the send would wait on it for ever.
                nursery.start_soon(self._discard_all)
                await self._upstream(last)
                nursery.cancel_scope.cancel()
        finally:
            self._ending = False
            if self._ended is not None:
                self._ended.set()

    async def _drain(self) -> None:
        """Read and discard the rest of the request body, up to the discard limit and for at
        most DRAIN_S. The app may be reading too (Quart reads every body): whichever task
        receives the body's end, `_note` tells the other."""
        limit = max(DISCARD_BYTES, self.cap * DISCARD_FACTOR)
        if self.declared is not None and self.declared > limit:
            return
        self._request_ended = ended = trio.Event()
        with trio.move_on_after(DRAIN_S):
            async with trio.open_nursery() as nursery:

                async def discard() -> None:
                    while not self.request_done and self.received <= limit:
                        self._note(await self.upstream_receive())
                    nursery.cancel_scope.cancel()

                nursery.start_soon(discard)
                await ended.wait()
                nursery.cancel_scope.cancel()

    async def _discard_all(self) -> None:
        while True:
            await self.upstream_receive()
