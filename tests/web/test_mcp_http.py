"""/mcp at the HTTP level (a plain HTTP client): credentials, the edge guard, bad bodies, and
the routes that must keep working beside the MCP mount."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
import trio

from tests.fakes.fake_messaging import ALICE, FakeMessagingApi
from tests.web.test_mcp import CAP, HEALTH, serving

LIST_TOOLS = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
MCP_HEADERS = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}


@pytest.fixture
def fake() -> FakeMessagingApi:
    return FakeMessagingApi()


@pytest.fixture
async def http(fake: FakeMessagingApi) -> AsyncIterator[httpx2.AsyncClient]:
    async with (
        serving(fake) as port,
        httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client,
    ):
        yield client


async def post_mcp(
    http: httpx2.AsyncClient,
    body: bytes | dict[str, Any] | list[Any],
    *,
    token: str | None = "alice-token",
    path: str = "/mcp",
    headers: dict[str, str] | None = None,
) -> httpx2.Response:
    content = body if isinstance(body, bytes) else json.dumps(body).encode()
    all_headers = dict(MCP_HEADERS)
    if token is not None:
        all_headers["Authorization"] = f"Bearer {token}"
    all_headers.update(headers or {})
    with trio.fail_after(10):
        return await http.post(path, content=content, headers=all_headers)


async def test_mcp_without_credential_is_401_saying_how_to_register(
    fake: FakeMessagingApi, http: httpx2.AsyncClient
) -> None:
    """No Authorization: 401 `unauthenticated` naming how to get a token; no OAuth metadata."""
    response = await post_mcp(http, LIST_TOOLS, token=None)
    assert response.status_code == 401
    error = response.json()["error"]
    assert error["code"] == "unauthenticated"
    assert "POST /v1/register" in error["message"]
    assert "resource_metadata" not in response.headers.get("www-authenticate", "")
    assert fake.authenticated == []


@pytest.mark.parametrize(
    "value", ["Basic YWxpY2U6eA==", "Bearer", "Token alice-token", "Bearer a b", "alice-token"]
)
async def test_mcp_malformed_authorization_is_401(
    fake: FakeMessagingApi, http: httpx2.AsyncClient, value: str
) -> None:
    """A header that is not exactly one bearer token is refused without asking the API."""
    response = await post_mcp(http, LIST_TOOLS, token=None, headers={"Authorization": value})
    assert response.status_code == 401
    assert response.json()["error"]["code"] == "unauthenticated"
    assert fake.authenticated == []


async def test_mcp_two_authorization_headers_are_401(
    fake: FakeMessagingApi, http: httpx2.AsyncClient
) -> None:
    """Two credentials are one too many: which session would the call run as?"""
    headers = [
        *MCP_HEADERS.items(),
        ("Authorization", "Bearer alice-token"),
        ("Authorization", "Bearer bob-token"),
    ]
    with trio.fail_after(10):
        response = await http.post("/mcp", content=json.dumps(LIST_TOOLS), headers=headers)
    assert response.status_code == 401
    assert fake.authenticated == []


@pytest.mark.parametrize(
    ("token", "code"),
    [("forged", "unauthenticated"), ("expired-token", "expired"), ("ended-token", "ended")],
)
async def test_mcp_refused_token_is_401_with_the_api_code(
    fake: FakeMessagingApi, http: httpx2.AsyncClient, token: str, code: str
) -> None:
    """A token the API refuses: its status and `{error: {code, message}}`; no tool runs."""
    response = await post_mcp(http, LIST_TOOLS, token=token)
    assert response.status_code == 401
    assert response.json()["error"]["code"] == code
    assert "resource_metadata" not in response.headers.get("www-authenticate", "")
    assert fake.calls == []


@pytest.mark.parametrize("path", ["/mcp", "/mcp/"])
async def test_mcp_serves_json_rpc_on_both_paths(
    fake: FakeMessagingApi, http: httpx2.AsyncClient, path: str
) -> None:
    """A plain JSON-RPC POST with a valid token gets a JSON answer, with or without the slash."""
    response = await post_mcp(http, LIST_TOOLS, path=path)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("application/json")
    assert len(response.json()["result"]["tools"]) == 12
    assert fake.authenticated == [ALICE]


async def test_mcp_foreign_host_is_421(fake: FakeMessagingApi, http: httpx2.AsyncClient) -> None:
    """DNS rebinding: a foreign Host is refused before the credential is even looked at."""
    response = await post_mcp(http, LIST_TOOLS, headers={"Host": "evil.example:80"})
    assert response.status_code == 421
    assert fake.authenticated == []


async def test_mcp_foreign_origin_is_403(fake: FakeMessagingApi, http: httpx2.AsyncClient) -> None:
    """A web page's Origin is refused on /mcp too."""
    response = await post_mcp(http, LIST_TOOLS, headers={"Origin": "http://evil.example"})
    assert response.status_code == 403
    assert fake.authenticated == []


@pytest.mark.parametrize(
    "body",
    [
        b"{not json",
        {"hello": "world"},
        {"jsonrpc": "2.0", "id": 1},
        [LIST_TOOLS, {**LIST_TOOLS, "id": 2}],
    ],
    ids=["not-json", "not-json-rpc", "no-method", "batch"],
)
async def test_mcp_malformed_body_is_a_json_rpc_4xx(
    fake: FakeMessagingApi, http: httpx2.AsyncClient, body: bytes | dict[str, Any] | list[Any]
) -> None:
    """Bodies that are not one JSON-RPC message get a 4xx JSON-RPC error; nothing runs."""
    response = await post_mcp(http, body)
    assert 400 <= response.status_code < 500
    assert "error" in response.json()
    assert fake.calls == []


@pytest.mark.parametrize(
    ("arguments", "says"),
    [
        ("[" * 10_000 + "]" * 10_000, "nested 10002 levels deep; the limit is 32"),
        ('{"to": "bob", "body": "x", "ratio": NaN}', "$.params.arguments.ratio is NaN"),
    ],
    ids=["10000-levels", "nan"],
)
async def test_mcp_unbounded_json_is_a_json_rpc_400_before_the_sdk(
    fake: FakeMessagingApi, http: httpx2.AsyncClient, arguments: str, says: str
) -> None:
    """A session's call nested past the bound, or carrying NaN, is refused by the bounded
    reader with a JSON-RPC parse error (HTTP 400) naming the bound; no tool runs."""
    head = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "send", '
    response = await post_mcp(http, (head + '"arguments": ' + arguments + "}}").encode())
    assert response.status_code == 400
    answer = response.json()
    assert (answer["id"], answer["error"]["code"], answer["error"]["data"]) == (
        None, -32700, {"code": "validation_failed"}
    )  # fmt: skip
    assert says in answer["error"]["message"]
    assert fake.calls == []


async def test_mcp_body_over_cap_is_413(fake: FakeMessagingApi, http: httpx2.AsyncClient) -> None:
    """A body over the request cap is refused with 413 before it is read."""
    response = await post_mcp(http, b"x" * (CAP + 1))
    assert response.status_code == 413
    assert response.json()["error"]["code"] == "oversized_content"
    assert fake.calls == []


@pytest.mark.parametrize("method", ["GET", "DELETE"])
async def test_mcp_other_methods_are_405(http: httpx2.AsyncClient, method: str) -> None:
    """Stateless JSON mode has no standalone stream and no session to delete: 405, Allow: POST."""
    headers = {"Authorization": "Bearer alice-token", "Accept": "text/event-stream"}
    with trio.fail_after(10):
        response = await http.request(method, "/mcp", headers=headers)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"


@pytest.mark.parametrize(
    "path",
    [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
        "/.well-known/oauth-authorization-server",
        "/register",
        "/authorize",
    ],
)
async def test_no_oauth_routes_beside_mcp(http: httpx2.AsyncClient, path: str) -> None:
    """The MCP mount adds no OAuth discovery or flow routes (SPEC §6)."""
    with trio.fail_after(10):
        response = await http.get(path)
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "not_found"


async def test_health_and_404_still_served_beside_mcp(http: httpx2.AsyncClient) -> None:
    """/health and JSON 404s behave as without the MCP mount."""
    with trio.fail_after(10):
        health = await http.get("/health")
        missing = await http.get("/mcpx")
    assert health.status_code == 200
    assert health.json() == {"ok": True, **HEALTH, "status": "ok"}
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "not_found"
