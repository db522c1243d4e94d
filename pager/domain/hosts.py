"""The hosts of a store several brokers share (SPEC §13): which are alive, as this broker last
saw their heartbeats. A store of one broker has one host, this one, always alive."""

from __future__ import annotations

from collections.abc import Iterable

import attrs


@attrs.frozen(kw_only=True)
class HostView:
    name: str
    alive: bool
    version: str
    started_at: float  # unix seconds, the database's clock
    heartbeat_at: float  # 0 once the broker stopped cleanly
    this: bool  # the broker that answers


class HostBoard:
    """What the roster, the snapshot and `pager status` read; the backend refreshes it (the
    PostgreSQL one at each heartbeat), readers never wait on the store for it."""

    def __init__(self, this: str) -> None:
        self.this = this
        self._views: dict[str, HostView] = {}

    def alive(self, name: str) -> bool:
        """Whether the broker of host `name` runs ('' is the one host of an unshared store)."""
        if name in ("", self.this):
            return True
        view = self._views.get(name)
        return view is not None and view.alive

    def views(self) -> tuple[HostView, ...]:
        return tuple(self._views.values())

    def update(self, views: Iterable[HostView]) -> None:
        self._views = {view.name: view for view in views}
