"""The web server over real HTTP on 127.0.0.1: /health, the edge guard, JSON errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import pytest
import trio

from pager.web.guard import EdgeGuard, Message, Receive, Scope, Send, allowed_hosts
from pager.web.server import bind_listener, run_web_server

HEALTH = {"instance_id": "i1", "pid": 1, "version": "0", "schema_version": 2, "started_at": "t"}
CAP = 1024


@pytest.fixture
async def port() -> AsyncIterator[int]:
    sock = bind_listener("127.0.0.1", None, None)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:

        async def serve(*, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
            await run_web_server(
                host="127.0.0.1",
                sock=sock,
                health=HEALTH,
                request_cap=CAP,
                shutdown_trigger=stop.wait,
                task_status=task_status,
            )

        await nursery.start(serve)
        yield sock.getsockname()[1]
        stop.set()
    sock.close()


async def _exchange(port: int, raw: bytes) -> tuple[int, dict[str, object]]:
    """Send raw bytes, read the whole response; (status, JSON body)."""
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(raw)
            data = b""
            while b"\r\n\r\n" not in data or not _complete(data):
                chunk = await stream.receive_some(65536)
                if not chunk:
                    break
                data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    status = int(head.split(b" ", 2)[1])
    return status, json.loads(body) if body else {}


def _complete(data: bytes) -> bool:
    head, _, body = data.partition(b"\r\n\r\n")
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


def _get(port: int, path: str, *, host: str | None = None, extra: str = "") -> bytes:
    host = f"127.0.0.1:{port}" if host is None else host
    return f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n{extra}\r\n".encode()


async def test_health_reports_identity(port: int) -> None:
    """GET /health answers ok with the broker's identity, no credential needed."""
    status, body = await _exchange(port, _get(port, "/health"))
    assert status == 200
    assert body == {"ok": True, **HEALTH, "status": "ok"}


async def test_health_accepts_localhost_name(port: int) -> None:
    """`localhost:<port>` is the broker's own address too."""
    status, _ = await _exchange(port, _get(port, "/health", host=f"localhost:{port}"))
    assert status == 200


@pytest.mark.parametrize("host", ["evil.example:80", "127.0.0.1", "127.0.0.1:1", ""])
async def test_guard_foreign_host_refused(port: int, host: str) -> None:
    """A Host that is not this broker's address (DNS rebinding) gets 421 and a JSON error."""
    status, body = await _exchange(port, _get(port, "/health", host=host))
    assert status == 421
    assert body["error"]["code"] == "unauthenticated"  # type: ignore[index]


async def test_guard_foreign_origin_refused(port: int) -> None:
    """A browser page's Origin gets 403."""
    raw = _get(port, "/health", extra="Origin: http://evil.example\r\n")
    status, body = await _exchange(port, raw)
    assert status == 403
    assert "cross-origin" in body["error"]["message"]  # type: ignore[index]


async def test_guard_own_origin_allowed(port: int) -> None:
    """The broker's own origin is not cross-origin."""
    raw = _get(port, "/health", extra=f"Origin: http://127.0.0.1:{port}\r\n")
    assert (await _exchange(port, raw))[0] == 200


async def test_guard_oversized_content_length_refused_before_reading(port: int) -> None:
    """A declared body over the cap gets 413 without the body ever being sent."""
    raw = (
        f"POST /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: {CAP + 1}\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    status, body = await _exchange(port, raw)
    assert status == 413
    assert body["error"]["code"] == "oversized_content"  # type: ignore[index]


async def test_guard_oversized_streamed_body_refused() -> None:
    """A body without Content-Length that streams past the cap: the app sees a disconnect and
    the client gets 413 (the guard driven directly, with an app that reads its body)."""
    seen: list[str] = []

    async def reading_app(scope: Scope, receive: Receive, send: Send) -> None:
        while True:
            message = await receive()
            seen.append(message["type"])
            if message["type"] == "http.disconnect" or not message.get("more_body"):
                return

    chunks = [{"type": "http.request", "body": b"x" * 512, "more_body": True}] * 4
    inbound = iter(chunks)
    sent: list[Message] = []

    async def receive() -> Message:
        # Then the client hangs up, as Hypercorn reports it.
        return next(inbound, {"type": "http.disconnect"})

    async def send(message: Message) -> None:
        sent.append(message)

    guard = EdgeGuard(reading_app, hosts=allowed_hosts("127.0.0.1", 80), request_cap=CAP)
    scope = {"type": "http", "headers": [(b"host", b"127.0.0.1:80")]}
    await guard(scope, receive, send)
    assert seen == ["http.request", "http.request", "http.disconnect"]
    assert sent[0]["status"] == 413


async def test_guard_malformed_content_length_refused(port: int) -> None:
    """A Content-Length that is not a number is refused, not guessed at."""
    raw = (
        f"POST /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: -5\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    assert (await _exchange(port, raw))[0] in (400, 413)


async def test_unknown_route_is_json_404(port: int) -> None:
    """Unknown paths get a JSON error body, not HTML."""
    status, body = await _exchange(port, _get(port, "/nope"))
    assert status == 404
    assert body["error"]["code"] == "not_found"  # type: ignore[index]


async def test_wrong_method_is_json_405(port: int) -> None:
    """POST to /health is refused with 405 and a JSON error."""
    raw = (
        f"POST /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Length: 0\r\n"
        "Connection: close\r\n\r\n"
    ).encode()
    status, body = await _exchange(port, raw)
    assert status == 405
    assert body["error"]["code"] == "method_not_allowed"  # type: ignore[index]


async def test_guard_closes_the_connection_when_the_request_asks(port: int) -> None:
    """`Connection: close` (as HTTP/1.0 means) gets the answer, then the connection closed."""
    with trio.fail_after(10):
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        async with stream:
            await stream.send_all(_get(port, "/health"))
            data = b""
            while chunk := await stream.receive_some(65536):
                data += chunk
    assert data.startswith(b"HTTP/1.1 200 ")
