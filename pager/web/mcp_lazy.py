"""Loads the MCP endpoint on the first `/mcp` request.

The MCP SDK (with pydantic and starlette) is the broker's biggest import: loading it only when
a session first speaks MCP keeps `pager start` quick and an idle broker small. The import runs
in a worker thread, so the event loop keeps serving meanwhile.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import trio

from pager.web.guard import Receive, Scope, Send, send_error

if TYPE_CHECKING:
    from pager.web.mcp import McpEndpoint

log = logging.getLogger("pager.web.mcp")


class LazyMcp:
    def __init__(self, build: Callable[[], McpEndpoint]) -> None:
        self._build = build
        self._requested = trio.Event()
        self._ready = trio.Event()
        self._endpoint: McpEndpoint | None = None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Lives as long as the web server: builds the endpoint when first asked, then runs
        the SDK's session manager until cancelled (after the server's graceful stop)."""
        task_status.started()
        await self._requested.wait()
        try:
            endpoint = await trio.to_thread.run_sync(self._build)
        except Exception:
            log.exception("the MCP endpoint could not be loaded")
            self._ready.set()
            raise
        async with endpoint.run():
            self._endpoint = endpoint
            self._ready.set()
            await trio.sleep_forever()

    async def app(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._endpoint is None:
            self._requested.set()
            await self._ready.wait()
        if self._endpoint is None:
            await send_error(send, 500, "internal", "the MCP endpoint failed to load; see the log")
            return
        await self._endpoint.app(scope, receive, send)

    def loaded(self) -> Any:
        return self._endpoint
