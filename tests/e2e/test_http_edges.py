"""Register, detach and the session stream over real HTTP, and hostile input that must change
nothing in the store."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import Broker, mcp_session, structured

COUNTS = (
    "SELECT (SELECT COUNT(*) FROM identities), (SELECT COUNT(*) FROM messages),"
    " (SELECT COUNT(*) FROM sessions)"
)


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
    assert broker.db_rows(COUNTS) == [(0, 0, 0)]


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
    assert broker.db_rows(COUNTS) == [(0, 0, 0)]


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
    before = broker.db_rows(COUNTS)
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
    assert broker.db_rows(COUNTS) == before


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
    assert broker.db_rows(COUNTS) == [(0, 0, 0)]
