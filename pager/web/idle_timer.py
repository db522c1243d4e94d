"""A cheaper keep-alive idle timer for Hypercorn's trio worker.

Hypercorn times out idle keep-alive connections with a `TrioSingleTask` per connection, which
it stops when a request arrives and restarts when the response is done: each time behind a
`trio.Lock` and through `nursery.start`, several task switches of the connection's task per
request (~4% of the broker's CPU per MCP call, by py-spy). `IdleTimer` does the same with no
lock and `start_soon`: neither of its methods awaits anything, so there is nothing to lock.
`install()` swaps it in for the connections Hypercorn accepts afterwards.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import hypercorn.trio.tcp_server
import trio

log = logging.getLogger("pager.web")

#: The name `hypercorn.trio.tcp_server.TCPServer` makes its idle task from.
_HYPERCORN_NAME = "TrioSingleTask"


class IdleTimer:
    """Runs one `action` at a time in the connection's task group; a restart cancels the last.

    Hypercorn's `SingleTask` interface (`hypercorn.typing`), whose methods are async."""

    def __init__(self) -> None:
        self._scope: trio.CancelScope | None = None

    async def restart(self, task_group: Any, action: Callable[[], Awaitable[None]]) -> None:
        self._cancel()
        self._scope = scope = trio.CancelScope()
        # Hypercorn's TaskGroup wraps the connection's nursery; start_soon needs no wait.
        task_group._nursery.start_soon(_run_in, scope, action)

    async def stop(self) -> None:
        self._cancel()

    def _cancel(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            self._scope = None


async def _run_in(scope: trio.CancelScope, action: Callable[[], Awaitable[None]]) -> None:
    with scope:  # cancelled before it began: the action ends at its first checkpoint
        await action()


def install() -> bool:
    """Make Hypercorn's trio connections use `IdleTimer`; False (and Hypercorn's own timer
    kept) if this Hypercorn has no such name to replace."""
    module = hypercorn.trio.tcp_server
    if not hasattr(module, _HYPERCORN_NAME):
        log.warning("Hypercorn's idle timer is not where Pager expects; keeping Hypercorn's")
        return False
    setattr(module, _HYPERCORN_NAME, IdleTimer)
    return True
