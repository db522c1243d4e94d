"""A stand-in for the wrapped launch's session (pager/session_client.py) and a stand-in
broker on 127.0.0.1, for the relay's and the lease holder's tests."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial

import trio

from pager.launch.wrapper import TerminalNotices

Handler = Callable[[trio.SocketStream], Awaitable[None]]


async def serve(nursery: trio.Nursery, handler: Handler) -> str:
    """Serves `handler` on an ephemeral loopback port; its URL."""
    listeners = await nursery.start(partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    port = listeners[0].socket.getsockname()[1]
    return f"http://127.0.0.1:{port}"


class FakeSession:
    """Answers `urls` in turn (then the last for ever); each rejoin takes the next of
    `tokens` (False once there is none)."""

    def __init__(self, *urls: str | None, tokens: tuple[str, ...] = ("tok_test",)) -> None:
        self.urls = list(urls)
        self.tokens = list(tokens)
        self.token = self.tokens.pop(0)
        self.rejoins: list[str] = []
        self.starts = 0
        self.ended: str | None = None
        self.changed = trio.Event()  # the lease holder's tests change no token under it
        self.notices = TerminalNotices()  # what the wrapper prints

    async def url(self, *, start: bool = False) -> str | None:
        self.starts += start
        return self.urls.pop(0) if len(self.urls) > 1 else self.urls[0]

    async def rejoin(self, stale: str) -> bool:
        self.rejoins.append(stale)
        if self.token != stale:
            return True
        if not self.tokens:
            return False
        self.token = self.tokens.pop(0)
        return True

    def end(self, reason: str) -> None:
        self.ended = reason


async def read_request(stream: trio.SocketStream) -> bytes:
    """A whole request as the relay sends it (a Content-Length body, if any)."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = await stream.receive_some(65536)
        if not chunk:
            return data
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            while len(body) < int(value):
                body += await stream.receive_some(65536)
    return head + b"\r\n\r\n" + body


def json_answer(status: int, body: bytes) -> bytes:
    reason = {200: "OK", 401: "Unauthorized"}.get(status, "X")
    return (
        f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
        f"content-length: {len(body)}\r\nconnection: close\r\n\r\n"
    ).encode() + body
