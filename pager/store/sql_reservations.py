"""Edit reservations on the store's writer (`pager/store/reservation_ports.py`): SQLite's
checkpoint, or PostgreSQL's writer, which has the same `write` and `lookup`. The statements are
pager/store/_reservations.py's, in the SQL both engines speak."""

from __future__ import annotations

from collections.abc import Sequence

from pager.domain.ids import new_reservation_id
from pager.domain.reservations import Pattern
from pager.store import _reservations as rs
from pager.store._conn import Conn
from pager.store._reservations import Holder, Reservation
from pager.store.sql_ports import Writer


class StoreReservations:
    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    async def holder(self, identity_id: str) -> Holder:
        return await self._writer.lookup(lambda conn: rs.holder_of(conn, identity_id))

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
        ids = [new_reservation_id() for _ in patterns]

        def write(conn: Conn) -> list[Reservation]:
            holder = rs.holder_of(conn, identity_id)
            return rs.reserve(
                conn,
                holder,
                patterns,
                exclusive=exclusive,
                reason=reason,
                ttl=ttl,
                now=now,
                grace=grace,
                new_ids=ids,
            )

        return await self._writer.write(write, heavy=len(patterns) > 20)

    async def release(
        self, identity_id: str, patterns: Sequence[Pattern] | None, *, now: float
    ) -> tuple[list[Reservation], list[str]]:
        def write(conn: Conn) -> tuple[list[Reservation], list[str]]:
            return rs.release(conn, rs.holder_of(conn, identity_id), patterns, now)

        return await self._writer.write(write)

    async def listed(
        self, identity_id: str | None, *, everywhere: bool, now: float
    ) -> tuple[list[Reservation], bool]:
        def read(conn: Conn) -> tuple[list[Reservation], bool]:
            scope = (
                None if everywhere or identity_id is None else rs.holder_of(conn, identity_id).scope
            )
            return rs.listed(conn, scope, now)

        return await self._writer.lookup(read)

    async def check(
        self, identity_id: str, paths: Sequence[str], *, now: float
    ) -> list[Reservation]:
        return await self._writer.lookup(
            lambda conn: rs.exclusive_of_others(conn, identity_id, paths, now)
        )

    async def break_one(self, reservation_id: str, *, now: float) -> Reservation:
        return await self._writer.write(lambda conn: rs.break_one(conn, reservation_id, now))
