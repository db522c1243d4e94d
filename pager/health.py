"""What the broker reports as degraded on `GET /health` (ARCHITECTURE.md, "Errors by kind").

An infrastructure failure on a request path (the store's disk, the MCP SDK that would not load,
a provider that keeps failing) answers its caller `unavailable`/`internal` and marks its kind
degraded here; whoever sees that kind work again clears it. `/health` and so `pager status`
show what is marked. One board per broker process, shared by its children (BrokerContext).

Standard library only: the web edge, the actors and the supervisors all mark it.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

log = logging.getLogger("pager.health")

#: Kinds named by more than one module (any other non-empty string is a kind too).
STORE = "store"
MCP = "mcp"


def provider_kind(implementation: str) -> str:
    """The kind of one implementation's provider: `provider:<id>`."""
    return f"provider:{implementation}"


class HealthBoard:
    """The degradations in effect, each with its message and the wall-clock time it began.

    Safe to mark from worker threads as well as from trio tasks (a lock guards the entries).
    """

    def __init__(self, now: Callable[[], float] = time.time) -> None:
        """`now` answers Unix seconds (a `WallClock.now`); `since` is taken from it."""
        self._now = now
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[str, float]] = {}  # kind -> (message, since)

    def degrade(self, kind: str, message: str) -> None:
        """Mark `kind` degraded, saying `message` (what is wrong, what to do). Marking a kind
        already degraded replaces its message and keeps the time it began."""
        if not kind or not message:
            raise ValueError(
                f"a degradation needs a kind and a message (got kind={kind!r}, message={message!r})"
            )
        with self._lock:
            earlier = self._entries.get(kind)
            since = self._now() if earlier is None else earlier[1]
            self._entries[kind] = (message, since)
        if earlier is None:
            log.warning("health degraded (%s): %s", kind, message)

    def recover(self, kind: str) -> None:
        """Clear `kind`; nothing happens if it was not degraded."""
        with self._lock:
            cleared = self._entries.pop(kind, None)
        if cleared is not None:
            log.info("health recovered (%s)", kind)

    def snapshot(self) -> dict[str, Any]:
        """What `GET /health` adds: `{"status": "ok"}`, or `{"status": "degraded", "degraded":
        [{"kind", "message", "since"}, …]}` in the order the degradations began (`since` is
        ISO 8601 UTC with milliseconds, like `started_at`)."""
        with self._lock:
            entries = list(self._entries.items())
        if not entries:
            return {"status": "ok"}
        degraded = [
            {"kind": kind, "message": message, "since": _iso(since)}
            for kind, (message, since) in entries
        ]
        return {"status": "degraded", "degraded": degraded}


def _iso(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat(timespec="milliseconds")
