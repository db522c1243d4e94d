"""The shims on dependencies' internals (pager/web/_compat.py): each is shown to take effect in
a real server (a test that fails when the shim is inert), and each falls back to the
dependency's own behaviour, with one warning, when the internal it needs is gone."""

from __future__ import annotations

import logging
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import httpx2
import hypercorn.trio.tcp_server as tcp_server
import hypercorn.trio.worker_context as worker_context
import pytest
import trio
from hypercorn.config import Config
from hypercorn.trio import serve
from hypercorn.trio.task_group import TaskGroup
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server import _streamable_http_modern as modern
from mcp.server._otel import OpenTelemetryMiddleware
from mcp.server.mcpserver import MCPServer
from mcp.shared.inbound import validate_mcp_param_headers

from pager.web import _compat
from pager.web.mcp import create_mcp
from pager.web.server import bind_listener, run_web_server
from tests.fakes.fake_messaging import FakeMessagingApi

KEEP_ALIVE = 0.05
HEALTH = {"instance_id": "i1", "pid": 1, "version": "0", "schema_version": 3, "started_at": "t"}

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


# --- Hypercorn's idle timer ---------------------------------------------------------------


@pytest.fixture(autouse=True)
def hypercorns_own_timer(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test starts from Hypercorn's own timer (whatever other tests installed) and
    leaves the module as it found it."""
    monkeypatch.setattr(tcp_server, "TrioSingleTask", worker_context.TrioSingleTask)
    monkeypatch.setattr(_compat.IdleTimer, "spawn_fallback", False)


@pytest.fixture
def restarts(monkeypatch: pytest.MonkeyPatch) -> list[object]:
    """The task groups `IdleTimer.restart` was called with, in order."""
    calls: list[object] = []
    restart = _compat.IdleTimer.restart

    async def counted(self: _compat.IdleTimer, task_group: Any, action: Any) -> None:
        calls.append(task_group)
        await restart(self, task_group, action)

    monkeypatch.setattr(_compat.IdleTimer, "restart", counted)
    return calls


class PublicTaskGroup:
    """Hypercorn's trio TaskGroup behind its public protocol only: no `_nursery`."""

    def __init__(self) -> None:
        self._inner = TaskGroup()

    async def spawn_app(self, *args: Any) -> Any:
        return await self._inner.spawn_app(*args)

    def spawn(self, func: Callable[..., Any], *args: Any) -> None:
        self._inner.spawn(func, *args)

    async def __aenter__(self) -> PublicTaskGroup:
        await self._inner.__aenter__()
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self._inner.__aexit__(*exc_info)


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


async def keep_alive_exchange(requests: int) -> None:
    """A real Hypercorn trio server on 127.0.0.1: `requests` requests on one keep-alive
    connection, each answered; then, idle, the server closes it (`keep_alive_timeout`)."""
    config = Config()
    config.bind = ["127.0.0.1:0"]
    config.keep_alive_timeout = KEEP_ALIVE
    config.accesslog = None
    shutdown = trio.Event()
    async with trio.open_nursery() as nursery:
        binds: list[str] = await nursery.start(
            partial(serve, hello, config, shutdown_trigger=shutdown.wait)  # type: ignore[arg-type]
        )
        port = int(binds[0].rsplit(":", 1)[1])
        stream = await trio.open_tcp_stream("127.0.0.1", port)
        buffer = bytearray()
        for _ in range(requests):  # each request stops the idle timer, each answer restarts it
            await stream.send_all(b"GET / HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
            assert (await read_response(stream, buffer)).startswith(b"HTTP/1.1 200")
        while await stream.receive_some():  # idle now: the server hangs up
            pass
        await stream.aclose()
        shutdown.set()


async def test_idle_timer_runs_every_keep_alive_restart_and_closes_when_idle(
    restarts: list[object],
) -> None:
    """After the start-up check, Hypercorn's connections time out through `IdleTimer`: it is
    restarted when the connection opens and after each answer, and still closes it idle."""
    report = _compat.check_shims()
    assert report.degraded() == []
    with trio.fail_after(10):
        await keep_alive_exchange(requests=3)
    assert len(restarts) == 1 + 3
    assert all(isinstance(group, TaskGroup) for group in restarts)


async def test_idle_timer_without_private_nursery_warns_once_and_still_serves(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture, restarts: list[object]
) -> None:
    """A task group without `_nursery` met at run time: one warning, the timer starts through
    the public `spawn`, requests are answered and the idle connection is still closed."""
    assert _compat.install_idle_timer().in_effect
    monkeypatch.setattr(tcp_server, "TaskGroup", PublicTaskGroup)
    caplog.set_level(logging.WARNING, logger="pager.web")
    with trio.fail_after(10):
        await keep_alive_exchange(requests=3)
    assert len(restarts) == 1 + 3
    assert all(isinstance(group, PublicTaskGroup) for group in restarts)
    [warning] = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert "`_nursery`" in warning.getMessage()


def test_idle_timer_check_sees_hypercorn_not_using_the_replaced_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The check looks at what `TCPServer` constructs, not at the assignment: a Hypercorn that
    makes its idle task some other way leaves the shim inert, so Hypercorn's own is put back."""
    init = tcp_server.TCPServer.__init__

    def bound_elsewhere(self: tcp_server.TCPServer, *args: Any) -> None:
        init(self, *args)
        self.idle_task = worker_context.TrioSingleTask()

    monkeypatch.setattr(tcp_server.TCPServer, "__init__", bound_elsewhere)
    result = _compat.install_idle_timer()
    assert not result.in_effect
    assert "TrioSingleTask, not from the module's" in result.reason
    assert vars(tcp_server)["TrioSingleTask"] is worker_context.TrioSingleTask


def test_check_shims_keeps_hypercorns_timer_when_its_task_group_has_no_nursery(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """Seen at start, a task group without `_nursery` keeps Hypercorn's own timer, with one
    warning, and the report says so (for /health to show)."""
    monkeypatch.setattr(tcp_server, "TaskGroup", PublicTaskGroup)
    caplog.set_level(logging.WARNING, logger="pager.web")
    report = _compat.check_shims()
    assert vars(tcp_server)["TrioSingleTask"] is worker_context.TrioSingleTask
    [line] = report.degraded()
    assert line.startswith(f"{_compat.IDLE_TIMER}: ")
    assert "`_nursery`" in line
    [warning] = caplog.records
    assert warning.levelno == logging.WARNING
    assert _compat.IDLE_TIMER in warning.getMessage()


def test_check_shims_warns_once_when_hypercorn_has_no_such_name(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The name gone from Hypercorn: nothing replaced, one warning, one degraded line."""
    monkeypatch.delattr(tcp_server, "TrioSingleTask")
    caplog.set_level(logging.WARNING, logger="pager.web")
    report = _compat.check_shims()
    assert "TrioSingleTask" not in vars(tcp_server)
    assert len(report.degraded()) == 1
    assert len(caplog.records) == 1


# --- The MCP SDK --------------------------------------------------------------------------


def endpoint_server(shims: _compat.ShimReport | None = None) -> Any:
    """The low-level SDK server a `create_mcp` endpoint serves (its session manager's app)."""
    endpoint = create_mcp(
        FakeMessagingApi(), host="127.0.0.1", port=8000, request_cap=65536, shims=shims
    )
    return endpoint.app.__self__.app  # type: ignore[attr-defined]


def test_create_mcp_drops_the_otel_middleware_the_sdk_installs() -> None:
    """The SDK's default server carries an OpenTelemetryMiddleware; the endpoint's has none."""
    assert any(isinstance(m, OpenTelemetryMiddleware) for m in MCPServer("default").middleware)
    report = _compat.ShimReport()
    served = endpoint_server(report)
    assert served.middleware, "the SDK's other middleware stays"
    assert not any(isinstance(m, OpenTelemetryMiddleware) for m in served.middleware)
    assert report.results()[_compat.OTEL_MIDDLEWARE].in_effect


def test_otel_shim_without_the_private_module_warns_and_keeps_the_chain(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """`mcp.server._otel` gone: the chain is left as the SDK made it, with one warning; the
    endpoint is still built."""
    monkeypatch.setitem(sys.modules, "mcp.server._otel", None)
    caplog.set_level(logging.WARNING, logger="pager.web")
    report = _compat.ShimReport()
    served = endpoint_server(report)
    assert any(isinstance(m, OpenTelemetryMiddleware) for m in served.middleware)
    assert [line.split(":")[0] for line in report.degraded()] == [_compat.OTEL_MIDDLEWARE]
    assert len(caplog.records) == 1


def test_header_check_shim_sees_an_sdk_that_no_longer_asks_the_lookup(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """If the SDK's header check stopped asking `get_tool_input_schema`, replacing it would
    change nothing: the probe sees that and the SDK's own lookup is kept."""

    async def never_asks(*args: Any) -> None:
        return None

    monkeypatch.setattr(modern, "_mcp_param_rejection", never_asks)
    server = MCPServer("probe")._lowlevel_server
    own = server.get_tool_input_schema
    result = _compat.skip_param_header_check(server)
    assert not result.in_effect
    assert "does not ask" in result.reason
    assert server.get_tool_input_schema is own


@asynccontextmanager
async def mcp_client(shims: _compat.ShimReport) -> AsyncIterator[Client]:
    """The web server with /mcp over a fake API, and an SDK client in the 2026-07-28 era
    (`auto`), the one whose calls the SDK checks for `Mcp-Param-*` headers."""
    sock = bind_listener("127.0.0.1", None, None)
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            serving = partial(
                run_web_server,
                host="127.0.0.1",
                sock=sock,
                health=HEALTH,
                request_cap=65536,
                shutdown_trigger=stop.wait,
                api=FakeMessagingApi(),
                shims=shims,
            )
            await nursery.start(serving)
            url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
            async with httpx2.AsyncClient(headers={"Authorization": "Bearer alice-token"}) as http:
                transport = streamable_http_client(url, http_client=http)
                async with Client(transport, mode="auto", cache=None) as client:
                    yield client
            stop.set()
    finally:
        sock.close()


@pytest.mark.parametrize("shimmed", [True, False], ids=["shimmed", "inert"])
async def test_tool_call_skips_the_sdks_otel_span_and_schema_walk(
    monkeypatch: pytest.MonkeyPatch, shimmed: bool
) -> None:
    """A real tool call through the endpoint: with the shims, the SDK asks `_no_schema` and
    neither walks the tool's schema for header declarations nor enters the OTel middleware;
    with both shims made inert, the same counters see the SDK do both (so they can fail)."""
    counts = {"no_schema": 0, "own_lookup": 0, "walk": 0, "otel": 0}

    def counted(key: str, func: Callable[..., Any]) -> Callable[..., Any]:
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            counts[key] += 1
            return func(*args, **kwargs)

        return wrapper

    otel_call = OpenTelemetryMiddleware.__call__

    async def otel(self: OpenTelemetryMiddleware, *args: Any) -> Any:
        counts["otel"] += 1
        return await otel_call(self, *args)

    monkeypatch.setattr(_compat, "_no_schema", counted("no_schema", _compat._no_schema))
    monkeypatch.setattr(
        MCPServer, "_tool_input_schema", counted("own_lookup", MCPServer._tool_input_schema)
    )
    monkeypatch.setattr(
        modern, "validate_mcp_param_headers", counted("walk", validate_mcp_param_headers)
    )
    monkeypatch.setattr(OpenTelemetryMiddleware, "__call__", otel)
    if not shimmed:

        def inert(app: Any) -> _compat.ShimResult:
            return _compat.ShimResult("inert", in_effect=True)

        monkeypatch.setattr(_compat, "drop_otel_middleware", inert)
        monkeypatch.setattr(_compat, "skip_param_header_check", inert)
    report = _compat.ShimReport()
    with trio.fail_after(20):
        async with mcp_client(report) as client:
            result = await client.call_tool("send", {"to": "bob", "body": "hi"})
    assert not result.is_error, result.content
    if shimmed:
        assert counts == {"no_schema": 1, "own_lookup": 0, "walk": 0, "otel": 0}
        assert sorted(report.results()) == sorted(
            [_compat.IDLE_TIMER, _compat.OTEL_MIDDLEWARE, _compat.PARAM_HEADER_CHECK]
        )
        assert report.degraded() == []
    else:
        assert counts["no_schema"] == 0
        assert counts["own_lookup"] >= 1
        assert counts["walk"] >= 1
        assert counts["otel"] >= 1
