"""Who may hold the launch relay's connections, and for how long (pager/launch/relay.py).

Every local user can connect to the relay's loopback port; only the wrapped harness holds its
credential. So the relay keeps two pools, and a connection enters the harness's only by
showing the credential:

- *strangers*: every connection until its first request's head shows the credential, and a
  request without it (which the broker judges) until it ends. At most `STRANGERS` are held;
  one more closes the oldest, so holding sockets open only churns an outsider's own sockets
  (the newest connection, the one a harness just opened, is the last to go). A stranger has
  `HEAD_TIMEOUT` seconds to send a whole head, however it trickles the bytes.
- *the harness's*: requests that carried the credential, at most `HARNESS_CONNECTIONS` at once
  (more get 503). Strangers never count against them.
"""

from __future__ import annotations

import contextlib
from collections import OrderedDict
from collections.abc import Iterator

import trio

#: Seconds a connection has to send its first request's whole head before it is closed.
HEAD_TIMEOUT = 5.0
#: Connections held before they showed the credential; one more closes the oldest.
STRANGERS = 128
#: Requests with the credential served at once; more get 503 (only the harness has it).
HARNESS_CONNECTIONS = 64


class Stranger:
    """One connection in the strangers' pool; `leave` once it showed the credential."""

    def __init__(self, pool: Strangers, scope: trio.CancelScope) -> None:
        self._pool, self.scope = pool, scope

    def leave(self) -> None:
        self._pool.release(self)


class Strangers:
    """The bounded pool of connections not known to be the harness's, oldest first."""

    def __init__(self, limit: int = STRANGERS) -> None:
        self.limit = limit
        self._held: OrderedDict[Stranger, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._held)

    def release(self, stranger: Stranger) -> None:
        self._held.pop(stranger, None)

    @contextlib.contextmanager
    def hold(self) -> Iterator[Stranger]:
        """Holds one connection; the block is cancelled when a newer one needs its place."""
        while len(self._held) >= self.limit:
            oldest, _ = self._held.popitem(last=False)
            oldest.scope.cancel()
        stranger = Stranger(self, trio.CancelScope())
        self._held[stranger] = None
        try:
            with stranger.scope:
                yield stranger
        finally:
            stranger.leave()
