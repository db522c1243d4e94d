"""The web child of the broker tree: binds the loopback listener and serves with Hypercorn."""

from __future__ import annotations

import errno
import logging
import os
import socket
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve
from quart import Blueprint

from pager.health import HealthBoard
from pager.launch.proof import health_proof
from pager.web import _compat
from pager.web.app import create_app
from pager.web.dispatch import McpDispatcher
from pager.web.guard import EdgeGuard
from pager.web.mcp_lazy import LazyMcp

if TYPE_CHECKING:
    from pager.domain.api import MessagingApi
    from pager.web.mcp import McpEndpoint

log = logging.getLogger("pager.web")

#: In-flight requests get this long after a shutdown starts (SPEC §5: within 2 s in all).
GRACEFUL_TIMEOUT = 1.5


class PortInUse(Exception):
    """The configured port is taken by another program."""


def bind_listener(
    host: str,
    port: int | None,
    kept_port: int | None,
    *,
    on_kept_taken: Callable[[int], None] | None = None,
) -> socket.socket:
    """Bind the configured port, else the one kept from the last start, else a free one
    (`on_kept_taken` hears of a kept port that another program holds)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    candidates = [port] if port is not None else [p for p in (kept_port, 0) if p is not None]
    for candidate in candidates:
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, candidate))
        except OSError as exc:
            sock.close()
            if exc.errno != errno.EADDRINUSE or candidate == candidates[-1]:
                raise PortInUse(
                    f"cannot listen on {host}:{candidate} ({exc.strerror}); "
                    "choose another with PAGER_PORT or `port` in config.toml"
                ) from exc
            log.warning("port %d, kept from the last start, is taken; choosing another", candidate)
            if on_kept_taken is not None:
                on_kept_taken(candidate)
            continue
        sock.listen(128)
        return sock
    raise AssertionError("unreachable: the last candidate either binds or raises")


def hypercorn_config(sock: socket.socket) -> HypercornConfig:
    config = HypercornConfig()
    # Hypercorn takes ownership of the descriptor it is given; give it a copy of ours.
    config.bind = [f"fd://{os.dup(sock.fileno())}"]
    config.graceful_timeout = GRACEFUL_TIMEOUT
    config.accesslog = None
    config.errorlog = log
    config.keep_alive_timeout = 5
    return config


async def run_web_server(
    *,
    host: str,
    sock: socket.socket,
    health: dict[str, Any],
    request_cap: int,
    shutdown_trigger: Callable[[], Awaitable[None]],
    secret: str = "",
    api: MessagingApi | None = None,
    blueprints: Sequence[Blueprint] = (),
    display_cap: int = 4096,
    shims: _compat.ShimReport | None = None,
    board: HealthBoard | None = None,
    task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Serve until `shutdown_trigger` returns (a graceful stop: returns normally).
    With `api`, `/mcp` is served too, its tools calling `api`; an MCP endpoint that fails to
    load answers 503 on `/mcp` alone (pager/web/mcp_lazy.py). `board` is the broker's health
    board: `GET /health` reports it, and the edges mark the store and MCP degraded on it.
    Whether each shim on a dependency's internals took effect is recorded in `shims`
    (pager/web/_compat.py): the Hypercorn one at start, the MCP SDK ones when `/mcp` is first
    asked for."""
    shims = _compat.check_shims(shims)
    board = HealthBoard() if board is None else board
    port = sock.getsockname()[1]
    url = f"http://{host if ':' not in host else f'[{host}]'}:{port}"
    address, instance = url.removeprefix("http://"), str(health.get("instance_id", ""))

    def prove(challenge: str) -> str:
        return health_proof(secret, challenge, instance, address)

    app = create_app(
        health,
        host=host,
        port=port,
        request_cap=request_cap,
        blueprints=blueprints,
        prove=prove if secret else None,
        board=board,
    )
    lazy: LazyMcp | None = None
    if api is not None:
        build = partial(_build_mcp, api, host, port, request_cap, display_cap, shims, board)
        lazy = LazyMcp(build, board)
        # The edge guard stays outermost; the dispatcher authenticates /mcp behind it.
        assert isinstance(app, EdgeGuard)
        app.app = McpDispatcher(web=app.app, mcp=lazy.app, api=api, board=board)
    config = hypercorn_config(sock)
    async with trio.open_nursery() as outer:
        if lazy is not None:
            await outer.start(lazy.run)
        async with trio.open_nursery() as nursery:
            await nursery.start(partial(serve, app, config, shutdown_trigger=shutdown_trigger))  # type: ignore[arg-type]
            log.info("listening on %s", url)
            task_status.started(url)
        # Hypercorn stopped gracefully (in-flight MCP requests finished): now the SDK's
        # session manager may go.
        outer.cancel_scope.cancel()


def _build_mcp(
    api: MessagingApi,
    host: str,
    port: int,
    request_cap: int,
    display_cap: int,
    shims: _compat.ShimReport,
    board: HealthBoard,
) -> McpEndpoint:
    from pager.web.mcp import create_mcp  # the MCP SDK: imported on first use, in a thread

    return create_mcp(
        api,
        host=host,
        port=port,
        request_cap=request_cap,
        display_cap=display_cap,
        shims=shims,
        board=board,
    )
