"""Loads the MCP endpoint on the first `/mcp` request.

The MCP SDK (with pydantic and starlette) is the broker's biggest import: loading it only when
a session first speaks MCP keeps `pager start` quick and an idle broker small. The import runs
in a worker thread, so the event loop keeps serving meanwhile.

An endpoint that fails to load (a broken or half-upgraded install) or stops with an error takes
only `/mcp` down: it answers 503 `unavailable` saying what to do, the health board marks `mcp`
degraded, and `/v1` and `/health` go on serving. It is not loaded again in this web server: a
half-imported SDK is no base to retry on, and `pager restart` starts afresh.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from pager.domain.errors import ErrorCode
from pager.health import MCP, HealthBoard
from pager.web.guard import Receive, Scope, Send, send_error

if TYPE_CHECKING:
    from pager.web.mcp import McpEndpoint

log = logging.getLogger("pager.web.mcp")

#: What to do about an endpoint that failed (the log has the traceback).
_WHAT_TO_DO = (
    "/v1 and /health still work; see logs/broker.log in Pager's state directory for the cause"
    " (reinstall Pager if it names a missing or broken package), then run `pager restart`"
)


class LazyMcp:
    def __init__(self, build: Callable[[], McpEndpoint], board: HealthBoard) -> None:
        self._build = build
        self._board = board
        self._requested = trio.Event()
        self._ready = trio.Event()  # set once the endpoint serves, or failed
        self._endpoint: McpEndpoint | None = None
        self._failure = ""  # what `/mcp` answers once the endpoint failed

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Lives as long as the web server: builds the endpoint when first asked, then runs
        the SDK's session manager until cancelled (after the server's graceful stop). A
        failure ends only this task, never the server (see the module doc)."""
        task_status.started()
        await self._requested.wait()
        try:
            endpoint = await trio.to_thread.run_sync(self._build)
            async with endpoint.run():
                self._endpoint = endpoint
                self._board.recover(MCP)  # a restarted web server loaded it after all
                self._ready.set()
                await trio.sleep_forever()
        except Exception as exc:  # Cancelled is a BaseException: a shutdown passes through
            self._fail(exc)

    def _fail(self, exc: Exception) -> None:
        what = "stopped" if self._endpoint is not None else "failed to load"
        self._endpoint = None
        self._failure = f"the MCP endpoint {what} ({_summary(exc)}); {_WHAT_TO_DO}"
        log.error("the MCP endpoint %s; /mcp answers 503 until a restart", what, exc_info=exc)
        self._board.degrade(MCP, self._failure)
        self._ready.set()

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if not self._ready.is_set():
            self._requested.set()
            await self._ready.wait()
        endpoint = self._endpoint
        if endpoint is None:
            await send_error(send, 503, ErrorCode.UNAVAILABLE.value, self._failure)
            return
        await endpoint.app(scope, receive, send)

    def loaded(self) -> Any:
        return self._endpoint


def _summary(exc: Exception) -> str:
    """The exception's type and first line, short (the log has the whole traceback)."""
    lines = str(exc).strip().splitlines()
    text = f"{type(exc).__name__}: {lines[0]}" if lines else type(exc).__name__
    return text if len(text) <= 200 else text[:199] + "…"
