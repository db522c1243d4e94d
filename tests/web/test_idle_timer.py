"""Hypercorn with Pager's `IdleTimer`: a keep-alive connection serves request after request and
is still closed once idle for `keep_alive_timeout` (set to milliseconds). Real sockets."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from functools import partial
from typing import Any

import hypercorn.trio.tcp_server
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

from pager.web import idle_timer

KEEP_ALIVE = 0.05

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def hello(scope: Scope, receive: Receive, send: Send) -> None:
    if scope["type"] == "lifespan":
        while (await receive())["type"] != "lifespan.shutdown":
            await send({"type": "lifespan.startup.complete"})
        await send({"type": "lifespan.shutdown.complete"})
        return
    headers = [(b"content-length", b"5")]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": b"hello"})


async def read_response(stream: trio.SocketStream, buffer: bytearray) -> bytes:
    while b"hello" not in buffer:
        data = await stream.receive_some()
        assert data, "the server closed the connection before answering"
        buffer += data
    end = buffer.index(b"hello") + len(b"hello")
    response = bytes(buffer[:end])
    del buffer[:end]
    return response


async def test_keep_alive_connection_is_reused_then_closed_when_idle() -> None:
    assert idle_timer.install()
    assert vars(hypercorn.trio.tcp_server)["TrioSingleTask"] is idle_timer.IdleTimer
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.keep_alive_timeout = KEEP_ALIVE
    config.accesslog = None
    shutdown = trio.Event()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            binds: list[str] = await nursery.start(
                partial(serve, hello, config, shutdown_trigger=shutdown.wait)  # type: ignore[arg-type]
            )
            port = int(binds[0].rsplit(":", 1)[1])
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            buffer = bytearray()
            for _ in range(5):  # each request stops the idle timer, each answer restarts it
                await stream.send_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
                assert (await read_response(stream, buffer)).startswith(b"HTTP/1.1 200")
            while await stream.receive_some():  # idle now: the server hangs up
                pass
            await stream.aclose()
            shutdown.set()
