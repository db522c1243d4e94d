"""`GET /health` reports the health board over real HTTP on 127.0.0.1, and what marks it from
the web edge: an MCP endpoint that fails to load (`/mcp` answers 503, `/v1` and `/health` go
on), and the store failing under `/mcp` (its authentication, its tools)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import httpx2
import pytest
import trio
import trio.testing

from pager.domain.api import Caller
from pager.domain.results import Me
from pager.health import MCP, STORE, HealthBoard
from pager.store import StoreUnwritable
from pager.web.mcp_lazy import LazyMcp
from pager.web.openapi import openapi_blueprint
from tests.fakes.fake_messaging import FakeMessagingApi
from tests.web.test_mcp import HEALTH
from tests.web.test_mcp import serving as serving_mcp
from tests.web.test_mcp_http import LIST_TOOLS, post_mcp

if TYPE_CHECKING:
    from pager.web.guard import Message, Scope
    from pager.web.mcp import McpEndpoint

WHOAMI = {
    "jsonrpc": "2.0",
    "id": 2,
    "method": "tools/call",
    "params": {"name": "whoami", "arguments": {}},
}
UNWRITABLE = StoreUnwritable(Path("/state/pager.db"), "disk I/O error", fix="free space there")


class StoreFailingApi(FakeMessagingApi):
    """The FAKE API, but "disk-token" fails to authenticate and `whoami` fails as a store
    that cannot write does."""

    async def authenticate(self, token: str) -> Caller:
        if token == "disk-token":
            raise UNWRITABLE
        return await super().authenticate(token)

    async def whoami(self, caller: Caller) -> Me:
        raise UNWRITABLE


@asynccontextmanager
async def serving(
    board: HealthBoard, api: FakeMessagingApi | None = None, secret: str = ""
) -> AsyncIterator[httpx2.AsyncClient]:
    """The web server with `/mcp` over `api` and one `/v1` route (the OpenAPI document);
    yields a client of it, then stops it gracefully (a crashed server fails the test)."""
    api = FakeMessagingApi() if api is None else api
    async with (
        serving_mcp(api, board=board, secret=secret, blueprints=[openapi_blueprint()]) as port,
        httpx2.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=10) as http,
    ):
        yield http


async def _health(http: httpx2.AsyncClient, query: str = "") -> dict[str, Any]:
    with trio.fail_after(10):
        response = await http.get(f"/health{query}")
    assert response.status_code == 200
    answer: dict[str, Any] = response.json()
    return answer


@pytest.fixture
def no_mcp_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """Importing the MCP endpoint (and so the SDK) fails, as with a broken install."""
    monkeypatch.setitem(sys.modules, "pager.web.mcp", None)


async def test_health_without_trouble_is_ok_with_no_degraded_list() -> None:
    """A healthy broker: `ok: true`, its identity, `status: ok` and no `degraded` key."""
    async with serving(HealthBoard()) as http:
        assert await _health(http) == {"ok": True, **HEALTH, "status": "ok"}


async def test_health_reports_the_board_as_it_changes() -> None:
    """What is marked on the board shows on the next `/health`; cleared, it is gone."""
    board = HealthBoard()
    async with serving(board) as http:
        board.degrade("provider:codex", "codex's provider keeps failing; see the log")
        health = await _health(http)
        assert health["ok"] is True
        assert health["status"] == "degraded"
        assert health["degraded"] == board.snapshot()["degraded"]
        assert health["degraded"][0]["kind"] == "provider:codex"
        board.recover("provider:codex")
        assert await _health(http) == {"ok": True, **HEALTH, "status": "ok"}


async def test_health_with_a_challenge_reports_the_board_too() -> None:
    """The proving form of `/health` (what `pager status` and adoption ask) carries the same
    `status` and `degraded` beside its `proof`."""
    board = HealthBoard()
    board.degrade(STORE, "the disk is full: free space, then retry")
    async with serving(board, secret="s3cret") as http:
        health = await _health(http, "?challenge=" + "ab" * 16)
    assert health["proof"]
    assert health["status"] == "degraded"
    assert [entry["kind"] for entry in health["degraded"]] == ["store"]


@pytest.mark.usefixtures("no_mcp_sdk")
async def test_mcp_that_fails_to_load_answers_503_and_the_rest_keeps_serving() -> None:
    """The SDK's import fails on the first `/mcp`: it answers 503 `unavailable` saying what
    to do, `/health` says `mcp` is degraded (still `ok: true`), `/v1` keeps serving, a later
    `/mcp` gets the same answer, and the server still stops gracefully."""
    board = HealthBoard()
    async with serving(board) as http:
        assert (await _health(http))["status"] == "ok"  # lazy: nothing loaded or tried yet
        first = await post_mcp(http, LIST_TOOLS)
        assert first.status_code == 503
        assert first.headers["content-type"] == "application/json"
        error = first.json()["error"]
        assert error["code"] == "unavailable"
        assert "the MCP endpoint failed to load (ModuleNotFoundError" in error["message"]
        assert "logs/broker.log" in error["message"]
        assert "`pager restart`" in error["message"]

        health = await _health(http)
        assert health["ok"] is True
        assert health["status"] == "degraded"
        [entry] = health["degraded"]
        assert (entry["kind"], entry["message"]) == ("mcp", error["message"])

        with trio.fail_after(10):
            openapi = await http.get("/v1/openapi.json")
        assert openapi.status_code == 200
        assert openapi.json()["openapi"].startswith("3.1")

        again = await post_mcp(http, LIST_TOOLS)
        assert (again.status_code, again.json()) == (503, first.json())


@pytest.mark.usefixtures("no_mcp_sdk")
async def test_mcp_that_fails_to_load_still_refuses_a_missing_token_first() -> None:
    """The credential is checked before the endpoint is asked for: no token is 401 as ever."""
    async with serving(HealthBoard()) as http:
        response = await post_mcp(http, LIST_TOOLS, token=None)
        assert response.status_code == 401
        assert (await _health(http))["status"] == "ok"  # nothing asked the SDK to load


async def test_mcp_authentication_on_a_failing_store_marks_the_store_degraded() -> None:
    """The store failing while `/mcp` authenticates: 503 `unavailable` with the store's
    sentence, and `store` degraded on `/health` with that sentence."""
    board = HealthBoard()
    async with serving(board, StoreFailingApi()) as http:
        response = await post_mcp(http, LIST_TOOLS, token="disk-token")
        assert response.status_code == 503
        error = response.json()["error"]
        assert error["code"] == "unavailable"
        assert "free space there" in error["message"]
        health = await _health(http)
    assert [(e["kind"], e["message"]) for e in health["degraded"]] == [("store", error["message"])]


async def test_mcp_tool_on_a_failing_store_marks_the_store_degraded() -> None:
    """A tool the store fails under: a tool error `unavailable`, and `store` degraded."""
    board = HealthBoard()
    async with serving(board, StoreFailingApi()) as http:
        response = await post_mcp(http, WHOAMI)
        assert response.status_code == 200
        result = response.json()["result"]
        assert result["isError"] is True
        assert '"code":"unavailable"' in result["content"][0]["text"]
        health = await _health(http)
    [entry] = health["degraded"]
    assert entry["kind"] == "store"
    assert "free space there" in entry["message"]


# --- LazyMcp on its own: an endpoint that fails after its import, or loads ------------------


class _Endpoint:
    """A stand-in for the SDK's endpoint: answers 200, and its session manager's `run()`
    fails on entry when `fail_on_run`, or once `crash` is set while it serves."""

    def __init__(self, *, fail_on_run: bool = False) -> None:
        self.fail_on_run = fail_on_run
        self.crash = trio.Event()

    async def app(self, scope: Scope, receive: Any, send: Any) -> None:
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"{}"})

    @asynccontextmanager
    async def run(self) -> AsyncIterator[None]:
        if self.fail_on_run:
            raise RuntimeError("the session manager cannot start\nsecond line")
        async with trio.open_nursery() as nursery:

            async def crash_when_told() -> None:
                await self.crash.wait()
                raise RuntimeError("the session manager's task group died")

            nursery.start_soon(crash_when_told)
            yield
            nursery.cancel_scope.cancel()


async def _ask(lazy: LazyMcp) -> tuple[int, bytes]:
    """One request through `lazy.app`: (status, body)."""
    sent: list[Message] = []

    async def send(message: Message) -> None:
        sent.append(message)

    async def receive() -> Message:
        return {"type": "http.request", "body": b"", "more_body": False}

    with trio.fail_after(10):
        await lazy.app({"type": "http", "path": "/mcp"}, receive, send)
    return int(sent[0]["status"]), b"".join(m.get("body", b"") for m in sent[1:])


async def test_lazy_mcp_whose_session_manager_fails_to_start_answers_503() -> None:
    """An endpoint built but whose `run()` fails on entry: `failed to load`, first line only,
    `mcp` degraded; the task ends without raising."""
    board = HealthBoard()
    lazy = LazyMcp(lambda: cast("McpEndpoint", _Endpoint(fail_on_run=True)), board)
    async with trio.open_nursery() as nursery:
        await nursery.start(lazy.run)
        status, body = await _ask(lazy)
    assert status == 503
    assert b"failed to load (RuntimeError: the session manager cannot start)" in body
    assert [e["kind"] for e in board.snapshot()["degraded"]] == [MCP]


async def test_lazy_mcp_that_stops_while_serving_answers_503_after() -> None:
    """A session manager that dies while serving: later requests answer 503 `stopped`, and
    `mcp` is degraded, the web server untouched."""
    board = HealthBoard()
    endpoint = _Endpoint()
    lazy = LazyMcp(lambda: cast("McpEndpoint", endpoint), board)
    async with trio.open_nursery() as nursery:
        await nursery.start(lazy.run)
        assert (await _ask(lazy))[0] == 200
        endpoint.crash.set()
        with trio.fail_after(10):
            await trio.testing.wait_all_tasks_blocked()  # the crash has reached the board
        assert [e["kind"] for e in board.snapshot()["degraded"]] == [MCP]
        status, body = await _ask(lazy)
    assert status == 503
    assert b"the MCP endpoint stopped (" in body


async def test_lazy_mcp_that_loads_clears_an_earlier_mcp_degradation() -> None:
    """A restarted web server whose endpoint now loads clears the `mcp` mark of the last one."""
    board = HealthBoard()
    board.degrade(MCP, "the MCP endpoint failed to load (ImportError)")
    lazy = LazyMcp(lambda: cast("McpEndpoint", _Endpoint()), board)
    async with trio.open_nursery() as nursery:
        await nursery.start(lazy.run)
        assert (await _ask(lazy))[0] == 200
        nursery.cancel_scope.cancel()
    assert board.snapshot() == {"status": "ok"}
