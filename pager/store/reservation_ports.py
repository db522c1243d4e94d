"""The store behind ports for edit reservations (docs/reservations.md): typed and backend-neutral.

`pager/reservations_service.py` calls these; the SQLite backend (and the PostgreSQL one, whose
writer has the same shape) is `pager/store/sql_reservations.py`. Each write commits before it
returns; `check` is one read on the last committed state, made on every edit a hook checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from pager.domain.reservations import Pattern
from pager.store._reservations import Holder, Reservation

__all__ = ["Holder", "Reservation", "ReservationStore"]


class ReservationStore(Protocol):
    async def holder(self, identity_id: str) -> Holder:
        """The identity's workspace and reservation scope; PagerError `ended` when it is gone."""
        ...

    async def reserve(
        self,
        identity_id: str,
        patterns: Sequence[Pattern],
        *,
        exclusive: bool,
        reason: str,
        ttl: float,
        now: float,
        grace: float,
    ) -> list[Reservation]:
        """Take every pattern or none (PagerError `conflict` naming each holder); a pattern
        held already is renewed. Serialised per scope, across brokers sharing the store."""
        ...

    async def release(
        self, identity_id: str, patterns: Sequence[Pattern] | None, *, now: float
    ) -> tuple[list[Reservation], list[str]]:
        """End the identity's reservations of `patterns` (None: all); (ended, not held)."""
        ...

    async def listed(
        self, identity_id: str | None, *, everywhere: bool, now: float
    ) -> tuple[list[Reservation], bool]:
        """Reservations in force of the identity's scope (every scope: `everywhere`, and
        then no identity is needed), and whether some were left out (a bounded listing)."""
        ...

    async def check(
        self, identity_id: str, paths: Sequence[str], *, now: float
    ) -> list[Reservation]:
        """Others' exclusive reservations in force in the identity's scope that may hold
        `paths` (stale ones too: the caller leaves them out), in one indexed read."""
        ...

    async def break_one(self, reservation_id: str, *, now: float) -> Reservation:
        """End any one reservation (the operator's); PagerError `not_found`."""
        ...
