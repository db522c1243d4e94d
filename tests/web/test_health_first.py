"""`GET /health` answered before Quart (pager/web/health_first.py), over real HTTP on
127.0.0.1: the same bytes as the Quart route, Quart never reached for the plain forms, and
every other form still refused by the route as before."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import pager.web.app as web_app
from pager.health import STORE, HealthBoard
from pager.launch.proof import health_proof, new_challenge
from pager.web.guard import ASGIApp, Receive, Scope, Send
from pager.web.server import bind_listener, run_web_server

HEALTH = {"instance_id": "i1", "pid": 1, "version": "0", "schema_version": 2, "started_at": "t"}
SECRET = "s3cret-for-the-test"


class Counted:
    """An ASGI app that counts the requests it is given."""

    def __init__(self, app: ASGIApp) -> None:
        self.app, self.calls = app, 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.calls += scope["type"] == "http"
        await self.app(scope, receive, send)


class PassThrough:
    """`HealthFirst` taken out: every request goes on to Quart, as before it existed."""

    def __init__(self, app: ASGIApp, answer: Any) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)


@asynccontextmanager
async def serving(board: HealthBoard, sock: socket.socket | None = None) -> AsyncIterator[int]:
    """The web server with a secret and `board` (on `sock`, else a port of its own); yields
    its port, stops gracefully."""
    own = sock is None
    sock = bind_listener("127.0.0.1", None, None) if sock is None else sock
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:

            async def serve(*, task_status: trio.TaskStatus[str]) -> None:
                await run_web_server(
                    host="127.0.0.1",
                    sock=sock,
                    health=HEALTH,
                    request_cap=1024,
                    shutdown_trigger=stop.wait,
                    secret=SECRET,
                    board=board,
                    task_status=task_status,
                )

            await nursery.start(serve)
            try:
                yield sock.getsockname()[1]
            finally:
                stop.set()
    finally:
        if own:
            sock.close()


async def fetch(port: int, target: str) -> bytes:
    """The whole answer to `GET target` (the connection closes after it), its Date removed."""
    request = f"GET {target} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(request.encode())
            data = b""
            while chunk := await stream.receive_some(65536):
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    kept = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"date:")]
    return b"\r\n".join(kept) + b"\r\n\r\n" + body


def _degraded_board() -> HealthBoard:
    board = HealthBoard(lambda: 1_800_000_000.0)
    board.degrade(STORE, "the disk is full: free space, then retry")
    return board


@pytest.mark.parametrize("degraded", [False, True])
async def test_health_first_answers_the_bytes_the_quart_route_did(
    monkeypatch: pytest.MonkeyPatch, degraded: bool
) -> None:
    """The plain `/health` and a proof request get, byte for byte (but the Date), the answer
    the Quart route gives: status line, headers in order, body."""
    board = _degraded_board() if degraded else HealthBoard()
    challenge = new_challenge()
    targets = ["/health", f"/health?challenge={challenge}"]
    with bind_listener("127.0.0.1", None, None) as sock:  # one address: the same proof
        async with serving(board, sock) as port:
            first = [await fetch(port, target) for target in targets]
        with monkeypatch.context() as patched:
            patched.setattr(web_app, "HealthFirst", PassThrough)
            async with serving(board, sock) as port:
                quart = [await fetch(port, target) for target in targets]
    assert first == quart
    proof = health_proof(SECRET, challenge, "i1", f"127.0.0.1:{port}").encode()
    assert b'"ok":true' in first[0]
    assert proof not in first[0]  # the plain form carries no proof
    assert proof in first[1]
    assert (b'"status":"degraded"' in first[0]) is degraded


async def test_health_first_keeps_the_proof_out_of_quart(monkeypatch: pytest.MonkeyPatch) -> None:
    """The plain forms never reach Quart; a malformed challenge (or any other query, or
    another method) still does, and is refused there as before."""
    counted: list[Counted] = []
    create = web_app.create_quart_app

    def counting(*args: Any, **kwargs: Any) -> Counted:
        counted.append(Counted(create(*args, **kwargs)))  # type: ignore[arg-type]
        return counted[-1]

    monkeypatch.setattr(web_app, "create_quart_app", counting)
    async with serving(HealthBoard()) as port:
        answer = await fetch(port, f"/health?challenge={new_challenge()}")
        assert answer.startswith(b"HTTP/1.1 200 ")
        assert (await fetch(port, "/health")).startswith(b"HTTP/1.1 200 ")
        [quart] = counted
        assert quart.calls == 0
        for target in (
            "/health?challenge=" + "A" * 32,  # upper case: not a challenge
            "/health?challenge=" + "0" * 31,
            "/health?challenge=" + "g" * 32,
        ):
            refused = await fetch(port, target)
            assert refused.startswith(b"HTTP/1.1 400 "), refused
            assert b'"validation_failed"' in refused
        assert quart.calls == 3
        for target in (  # Quart reads these queries as before
            f"/health?x=1&challenge={new_challenge()}",
            f"/health?challenge={new_challenge()}&challenge={new_challenge()}",
        ):
            assert (await fetch(port, target)).startswith(b"HTTP/1.1 200 ")
        assert quart.calls == 5
