"""A port of 127.0.0.1 that refuses connections, for tests of what happens when nothing listens.

A port found by binding port 0 and closing the socket again is free only until someone else
binds it: another pytest-xdist worker's broker or PostgreSQL server may get it meanwhile (the
kernel hands out port 0's picks from the same range) and answer where the test wants a refusal.
`refused_port()` keeps the port bound, by a socket that never listens, for as long as the test
needs it: a connection to it is refused, and no other process can take it."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator


@contextlib.contextmanager
def refused_port() -> Iterator[int]:
    """A port of 127.0.0.1 where connections are refused, held until the block ends."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind(("127.0.0.1", 0))
        port: int = holder.getsockname()[1]
        yield port
