"""Register, detach and the session stream over real HTTP, hostile input that must change
nothing in the store, and connections that must end cleanly whatever the client does."""

from __future__ import annotations

import contextlib
import json
import os
import resource
import socket
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import Broker, Counts, mcp_session, structured


def _raw(broker: Broker, request: bytes) -> tuple[int, dict[str, Any]]:
    """Send raw bytes (so nothing in between can fix them) and read the JSON answer."""
    host, port = broker.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=10) as sock:
        sock.sendall(request)
        data = b""
        while not _complete(data) and (chunk := sock.recv(65536)):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    return int(head.split()[1]), json.loads(body) if body.startswith(b"{") else {}


def _complete(data: bytes) -> bool:
    head, sep, body = data.partition(b"\r\n\r\n")
    if not sep:
        return False
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            return len(body) >= int(line.split(b":")[1])
    return False


@pytest.mark.parametrize(
    ("token", "body", "status", "code"),
    [
        (None, {"workspace": "/", "implementation": "shell"}, 401, "unauthenticated"),
        ("wrong", {"workspace": "/", "implementation": "shell"}, 401, "unauthenticated"),
        ("SECRET", ["not", "an", "object"], 400, "validation_failed"),
        ("SECRET", {"workspace": "/", "implementation": "shell", "x": 1}, 400, "validation_failed"),
        ("SECRET", {"workspace": "/", "implementation": 7}, 400, "validation_failed"),
        ("SECRET", {"workspace": "rel/dir", "implementation": "shell"}, 400, "validation_failed"),
        (
            "SECRET",
            {"workspace": "/nonexistent-dir", "implementation": "shell"},
            400,
            "validation_failed",
        ),
        (
            "SECRET",
            {"workspace": "/", "implementation": "shell", "session_name": "-x"},
            400,
            "validation_failed",
        ),
        (
            "SECRET",
            {
                "workspace": "/",
                "implementation": "shell",
                "delivery": {"kind": "http", "url": "http://10.0.0.1:80/"},
            },
            400,
            "validation_failed",
        ),
        (
            "SECRET",
            {"workspace": "/", "implementation": "shell", "delivery": {"kind": "ftp"}},
            400,
            "validation_failed",
        ),
    ],
)
async def test_register_refuses_bad_requests(
    broker: Broker, token: str | None, body: object, status: int, code: str
) -> None:
    """Each bad registration gets its status and code; no identity or session appears."""
    secret = broker.secret if token == "SECRET" else token
    got_status, answer = await broker.post("/v1/register", body, token=secret)
    assert (got_status, answer["error"]["code"]) == (status, code), answer
    assert await broker.counts() == Counts()


async def test_register_malformed_json_and_oversized(broker: Broker) -> None:
    """Malformed JSON is 400; a body over 1 MiB is 413 before it is read."""
    port = broker.url.rsplit(":", 1)[1]
    head = (
        f"POST /v1/register HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Authorization: Bearer {broker.secret}\r\nContent-Type: application/json\r\n"
        "Connection: close\r\n"
    )
    body = b"{not json"
    status, answer = await trio.to_thread.run_sync(
        _raw, broker, (head + f"Content-Length: {len(body)}\r\n\r\n").encode() + body
    )
    assert (status, answer["error"]["code"]) == (400, "validation_failed")
    status, _ = await trio.to_thread.run_sync(
        _raw, broker, (head + f"Content-Length: {2 * 1024 * 1024}\r\n\r\n").encode()
    )
    assert status == 413
    assert await broker.counts() == Counts()


async def test_mcp_refuses_missing_forged_and_ended_tokens(broker: Broker) -> None:
    """No token, a forged token and a detached session's token are 401 with their codes."""
    bob = await broker.register("bob")
    status, answer = await broker.post("/v1/sessions/current/detach", {}, token=bob["token"])
    assert status == 200, answer
    rpc = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    async with httpx2.AsyncClient(timeout=10) as http:
        for token, code in (
            (None, "unauthenticated"),
            ("pst_" + "A" * 43, "unauthenticated"),
            ("garbage token", "unauthenticated"),
            (bob["token"], "ended"),
        ):
            headers = {"Accept": "application/json, text/event-stream"}
            if token:
                headers["Authorization"] = f"Bearer {token}"
            response = await http.post(f"{broker.url}/mcp", json=rpc, headers=headers)
            assert response.status_code == 401
            assert response.json()["error"]["code"] == code
            assert "resource_metadata" not in response.headers.get("www-authenticate", "")


async def test_mcp_refuses_foreign_host_origin_and_bad_json_rpc(broker: Broker) -> None:
    """DNS-rebinding Host/Origin and malformed JSON-RPC are refused; nothing is sent."""
    alice = await broker.register("alice")
    before = await broker.counts()
    port = broker.url.rsplit(":", 1)[1]
    auth = f"Authorization: Bearer {alice['token']}\r\n"
    accept = "Accept: application/json, text/event-stream\r\nContent-Type: application/json\r\n"

    def post(host: str, extra: str, body: bytes) -> int:
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: {host}\r\n{auth}{accept}{extra}"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
        ).encode() + body
        return _raw(broker, request)[0]

    send = json.dumps(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "send", "arguments": {"to": "alice", "body": "x"}},
        }
    ).encode()
    assert await trio.to_thread.run_sync(post, "evil.example", "", send) == 421
    assert (
        await trio.to_thread.run_sync(
            post, f"127.0.0.1:{port}", "Origin: http://evil.example\r\n", send
        )
        == 403
    )
    for bad in (b"{not json", b'{"hello": "world"}', b"[]", b'"string"'):
        status = await trio.to_thread.run_sync(post, f"127.0.0.1:{port}", "", bad)
        assert 400 <= status < 500, bad
    assert await broker.counts() == before


async def test_session_stream_tells_of_takeover(broker: Broker) -> None:
    """The session event stream says `ready`, then `ended` when another registration takes
    the identity over."""
    bob = await broker.register("bob")
    events: list[str] = []
    with trio.fail_after(30):
        async with (
            httpx2.AsyncClient(timeout=30) as http,
            http.stream(
                "GET",
                f"{broker.url}/v1/sessions/current/events",
                headers={"Authorization": f"Bearer {bob['token']}"},
            ) as response,
        ):
            assert response.status_code == 200
            async for line in response.aiter_lines():
                if line.startswith("event: "):
                    events.append(line.removeprefix("event: "))
                    if events == ["ready"]:
                        await broker.register("bob", force=True)
                    elif len(events) == 2:
                        break
    assert events == ["ready", "ended"]


async def test_detach_keeps_mail_and_name_rejoins(broker: Broker) -> None:
    """A detached identity keeps its waiting mail; the same name rejoins and reads it."""
    alice = await broker.register("alice")
    bob = await broker.register("bob")
    with trio.fail_after(60):
        async with mcp_session(broker.url, alice["token"]) as a:
            structured(await a.call_tool("send", {"to": "bob", "body": "while you were out"}))
        status, _ = await broker.post("/v1/sessions/current/detach", {}, token=bob["token"])
        assert status == 200
        again = await broker.register("bob")
        assert again["agent_id"] == bob["agent_id"]
        async with mcp_session(broker.url, again["token"]) as b:
            [claim] = structured(await b.call_tool("fetch", {}))["claims"]
            assert claim["message"]["body"] == "while you were out"


async def test_v1_refuses_lone_surrogates_and_names_allowed_methods(broker: Broker) -> None:
    """A JSON body escaping a lone UTF-16 surrogate is 400 (not a 500 when the store meets
    it); a wrong method is 405 with an `Allow` header."""
    body = b'{"implementation": "shell", "conversation_key": "\\ud800"}'
    headers = {"Authorization": f"Bearer {broker.secret}"}
    async with httpx2.AsyncClient(timeout=10) as http:
        for path in ("/v1/hook/claim", "/v1/register"):
            response = await http.post(broker.url + path, content=body, headers=headers)
            assert response.status_code == 400, (path, response.text)
            assert response.json()["error"]["code"] == "validation_failed"
        response = await http.delete(broker.url + "/v1/snapshot", headers=headers)
    assert response.status_code == 405
    assert "GET" in response.headers["allow"]
    assert await broker.counts() == Counts()


class _Connection:
    """One raw HTTP/1.1 connection: bytes out exactly as written, responses read one by one."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""

    async def response(self) -> tuple[int, dict[str, Any]]:
        """The next response: (status, JSON body); EOFError if the broker closed instead."""
        while b"\r\n\r\n" not in self.buffer:
            await self._more()
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        while len(self.buffer) < length:
            await self._more()
        body, self.buffer = self.buffer[:length], self.buffer[length:]
        return int(head.split()[1]), json.loads(body) if body else {}

    async def _more(self) -> None:
        chunk = await self.stream.receive_some(65536)
        if not chunk:
            raise EOFError("the broker closed the connection")
        self.buffer += chunk


async def _connect(broker: Broker) -> _Connection:
    host, port = broker.url.removeprefix("http://").split(":")
    return _Connection(await trio.open_tcp_stream(host, int(port)))


def _head(broker: Broker, method: str, path: str, token: str | None, length: int) -> bytes:
    port = broker.url.rsplit(":", 1)[1]
    auth = f"Authorization: Bearer {token}\r\n" if token else ""
    return (
        f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}"
        f"Content-Type: application/json\r\nContent-Length: {length}\r\n\r\n"
    ).encode()


#: Requests answered without reading their body: a missing credential (a Quart route, and
#: the /mcp dispatcher) and a wrong method.
EARLY_ANSWERS = (
    ("POST", "/v1/register", 401),
    ("DELETE", "/v1/snapshot", 405),
    ("POST", "/mcp", 401),
)


async def _answer_before_body(
    connection: _Connection, broker: Broker, method: str, path: str
) -> int:
    """Headers, the broker's whole answer, only then the body (the attack: the answer goes out
    before the body is in)."""
    body = json.dumps({"workspace": "/", "implementation": "shell"}).encode()
    await connection.stream.send_all(_head(broker, method, path, None, len(body)))
    status = (await connection.response())[0]
    await connection.stream.send_all(body)
    return status


@pytest.mark.parametrize(("method", "path", "status"), EARLY_ANSWERS)
async def test_guard_keeps_the_connection_serving_after_an_early_answer(
    broker: Broker, method: str, path: str, status: int
) -> None:
    """A request answered before its body arrived leaves its keep-alive connection usable."""
    port = broker.url.rsplit(":", 1)[1]
    with trio.fail_after(30):
        connection = await _connect(broker)
        async with connection.stream:
            assert await _answer_before_body(connection, broker, method, path) == status
            health = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
            await connection.stream.send_all(health.encode())
            answered, body = await connection.response()
    assert (answered, body["ok"]) == (200, True)


def _broker_connections(pid: int, port: int) -> int:
    """The broker's descriptors of TCP connections on its port, in any state (a leaked one
    sits in CLOSE-WAIT); its listening sockets are not counted."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target.removeprefix("socket:[").removesuffix("]"))
    count = 0
    for table in ("tcp", "tcp6"):
        for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
            fields = line.split()
            local, state, inode = fields[1], fields[3], fields[9]
            listening = state == "0A"
            if inode in inodes and not listening and int(local.rsplit(":", 1)[1], 16) == port:
                count += 1
    return count


async def test_guard_leaves_no_descriptor_after_early_answers(broker: Broker) -> None:
    """50 early-answered connections, reused once and then closed, leave the broker none."""
    [pid] = broker.home.broker_pids()
    port = int(broker.url.rsplit(":", 1)[1])
    health = f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n".encode()
    with trio.fail_after(60):
        for n in range(50):
            method, path, status = EARLY_ANSWERS[n % len(EARLY_ANSWERS)]
            connection = await _connect(broker)
            async with connection.stream:
                assert await _answer_before_body(connection, broker, method, path) == status
                # Reused, then given up on (a broker that closed instead leaks nothing).
                with contextlib.suppress(trio.BrokenResourceError):
                    await connection.stream.send_all(health)
        left = _broker_connections(pid, port)
        with trio.move_on_after(20):  # polls until the broker has seen every close
            while left:
                await trio.sleep(0.05)
                left = _broker_connections(pid, port)
        assert left == 0, f"the broker still holds {left} of the 50 connections"
        status, _ = await broker.post("/v1/register", {}, token=broker.secret)
    assert status == 400  # and it answers as before


async def test_guard_answers_each_oversized_body_413_without_send_errors(broker: Broker) -> None:
    """Every 2 MiB request gets its 413, however the client goes on; no send fails in the log."""
    two_mib = 2 * 1024 * 1024
    statuses = []
    with trio.fail_after(120):
        for _ in range(40):  # answered on the headers; the client reads it and leaves at once
            connection = await _connect(broker)
            async with connection.stream:
                await connection.stream.send_all(
                    _head(broker, "POST", "/v1/register", broker.secret, two_mib)
                )
                statuses.append((await connection.response())[0])

        def pooled() -> None:  # an ordinary client: the body first, then the answer
            with httpx2.Client(timeout=30) as http:
                for _ in range(10):
                    response = http.post(f"{broker.url}/v1/register", content=b"x" * two_mib)
                    statuses.append(response.status_code)

        await trio.to_thread.run_sync(pooled)
        assert (await broker.post("/v1/register", {}, token=broker.secret))[0] == 400
    assert statuses == [413] * 50
    log = (broker.home.root / "logs" / "broker.log").read_text()
    assert "BusyResourceError" not in log
    assert "Error in ASGI Framework" not in log


@contextlib.contextmanager
def disk_full(broker: Broker) -> Iterator[None]:
    """No file of the broker may grow past its write-ahead log's size: its next log frame
    fails as on a full disk (Python ignores SIGXFSZ, so the write fails instead of killing
    it)."""
    [pid] = broker.home.broker_pids()
    wal = broker.home.root / "pager.db-wal"
    soft, hard = resource.prlimit(pid, resource.RLIMIT_FSIZE)
    resource.prlimit(pid, resource.RLIMIT_FSIZE, (wal.stat().st_size, hard))
    try:
        yield
    finally:
        resource.prlimit(pid, resource.RLIMIT_FSIZE, (soft, hard))


async def test_register_on_a_full_disk_is_unavailable_naming_the_disk(broker: Broker) -> None:
    """A full disk answers 503 `unavailable` naming the disk, registers nothing, then recovers."""
    with disk_full(broker), trio.fail_after(30):
        status, answer = await broker.post(
            "/v1/register",
            {"workspace": str(broker.workspace), "implementation": "shell"},
            token=broker.secret,
        )
    assert status == 503, answer
    assert answer["error"]["code"] == "unavailable"
    assert "disk" in answer["error"]["message"]
    assert await broker.counts() == Counts()
    with trio.fail_after(30):
        await broker.register("alice")


async def test_mcp_send_on_a_full_disk_is_unavailable_naming_the_disk(broker: Broker) -> None:
    """The MCP tools answer a full disk as /v1 does: a tool error `unavailable` naming the
    disk, nothing sent; the same send goes through once there is room again."""
    alice = await broker.register("alice")
    await broker.register("bob")
    with trio.fail_after(60):
        async with mcp_session(broker.url, alice["token"]) as client:
            with disk_full(broker):
                refused = await client.call_tool("send", {"to": "bob", "body": "hello"})
            assert refused.is_error
            error = json.loads(refused.content[0].text)  # type: ignore[union-attr]
            assert error["code"] == "unavailable", error
            assert "disk" in error["message"]
            assert await broker.messages() == []
            sent = structured(await client.call_tool("send", {"to": "bob", "body": "hello"}))
    assert sent["recipient"]["address"].startswith("bob@")


async def test_a_request_failing_200_times_grows_the_log_by_under_10_kb(broker: Broker) -> None:
    """An operator-secret holder repeats a request that fails inside the broker (JSON nested
    10,000 deep): the log grows by at most one bounded traceback and a summary, not 200
    tracebacks (~1.5 KB each; ~130 KB each for a RecursionError deep in the code)."""
    log_dir = broker.home.root / "logs"
    [log] = log_dir.iterdir()
    assert log.name == "broker.log"
    assert stat.S_IMODE(log.stat().st_mode) == 0o600
    before = log.stat().st_size
    body = b'{"workspace": "/tmp", "x": ' + b"[" * 10_000 + b"]" * 10_000 + b"}"
    headers = {"Authorization": f"Bearer {broker.secret}", "Content-Type": "application/json"}
    with trio.fail_after(60):
        async with httpx2.AsyncClient(timeout=10) as http:
            for _ in range(200):
                response = await http.post(
                    f"{broker.url}/v1/register", content=body, headers=headers
                )
                # 500 while the edge lets such depth through to the parser, 400 once it does
                # not; either way nothing is registered, and the log stays small.
                assert response.status_code in (400, 500)
    grown = sum(path.stat().st_size for path in log_dir.iterdir()) - before
    assert grown < 10_000
    assert (await broker.counts()).identities == 0
