"""Edit reservations (docs/reservations.md): the one implementation every edge calls — the MCP
tools `reserve`, `release`, `reservations`, the `/v1/me/reservations` routes (and their
`check`, which edit hooks call before a tool writes), the operator's break, and so the CLI.

It turns what a caller wrote into patterns (pager/domain/reservations.py: relative to the top of
the caller's checkout, absolute paths made relative, everything else refused in words), asks the
store (`pager/store/reservation_ports.py`), and answers `pager.domain.reservation_results`.
Who acts is always the caller's credential (a session, or the person), never an argument.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from pager.domain import reservations as rules
from pager.domain.api import Caller
from pager.domain.checkouts import Located, locate
from pager.domain.clock import WallClock, iso
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.ids import Kind, looks_like
from pager.domain.reservation_results import (
    CheckConflict,
    CheckResult,
    Released,
    ReservationList,
    ReservationView,
    Reserved,
)
from pager.domain.reservations import Pattern, State
from pager.store.reservation_ports import Reservation, ReservationStore

Locate = Callable[[Sequence[str], str], Awaitable[list[Located | None]]]


async def _locate_in_thread(paths: Sequence[str], scope: str) -> list[Located | None]:
    return await trio.to_thread.run_sync(lambda: [locate(path, scope) for path in paths])


class ReservationService:
    """`grace`: how long after its identity's last live session a reservation still blocks
    (the lease's length: a lease is renewed every half of it, so a live session is never
    taken for a gone one)."""

    def __init__(
        self,
        store: ReservationStore,
        clock: WallClock,
        *,
        grace: float,
        locate_paths: Locate | None = None,
    ) -> None:
        self.store = store
        self.clock = clock
        self.grace = grace
        self._locate = locate_paths or _locate_in_thread

    async def reserve(
        self,
        caller: Caller,
        *,
        paths: Sequence[Any],
        shared: bool = False,
        ttl_s: float | None = None,
        reason: str | None = None,
    ) -> Reserved:
        ttl = rules.check_ttl(ttl_s)
        said = rules.check_reason(reason)
        patterns = await self._patterns(caller, paths)
        made = await self.store.reserve(
            caller.agent_id,
            patterns,
            exclusive=not shared,
            reason=said,
            ttl=ttl,
            now=self.clock.now(),
            grace=self.grace,
        )
        return Reserved(reserved=tuple(self._view(r, caller) for r in made))

    async def release(self, caller: Caller, *, paths: Sequence[Any] | None = None) -> Released:
        patterns = None if paths is None else await self._patterns(caller, paths)
        ended, missing = await self.store.release(caller.agent_id, patterns, now=self.clock.now())
        return Released(
            released=tuple(self._view(r, caller) for r in ended), not_held=tuple(missing)
        )

    async def reservations(self, caller: Caller, *, scope: str = "workspace") -> ReservationList:
        everywhere = scope == "all"
        listed, more = await self.store.listed(
            caller.agent_id, everywhere=everywhere, now=self.clock.now()
        )
        return ReservationList(
            scope="all" if everywhere else "workspace",
            reservations=tuple(self._view(r, caller) for r in listed),
            truncated=more,
        )

    async def every(self) -> ReservationList:
        """Every workspace's reservations in force (the operator's view: the TUI)."""
        listed, more = await self.store.listed(None, everywhere=True, now=self.clock.now())
        return ReservationList(
            scope="all", reservations=tuple(self._view(r, None) for r in listed), truncated=more
        )

    async def check(self, caller: Caller, *, paths: Sequence[Any]) -> CheckResult:
        """The exclusive holds of other live identities on `paths` (what an edit hook asks
        before a tool writes them). A shared hold lets the edit through: it says "I am
        reading or co-editing this", not "keep out". One indexed read, no write."""
        relative, outside = await self._paths(caller, paths)
        now = self.clock.now()
        found = await self.store.check(caller.agent_id, relative, now=now) if relative else []
        held = [r for r in found if self._blocks(r, now)]
        conflicts = []
        for path in relative:
            for reservation in held:
                if rules.blocks_edit(path, reservation.holding(), caller.agent_id):
                    conflicts.append(_check_conflict(path, reservation))
        return CheckResult(conflicts=tuple(conflicts), outside=tuple(outside))

    async def break_one(self, reservation_id: str) -> ReservationView:
        """End anyone's reservation (the operator's, with the local secret)."""
        if not looks_like(Kind.RESERVATION, reservation_id):
            raise PagerError(
                ErrorCode.NOT_FOUND,
                f"{str(reservation_id)[:64]!r} is not a reservation id (rsv_…);"
                " `pager reservations --all` lists them",
            )
        ended = await self.store.break_one(reservation_id, now=self.clock.now())
        return self._view(ended, None)

    # -- paths -------------------------------------------------------------------------------

    async def _patterns(self, caller: Caller, texts: Sequence[Any]) -> tuple[Pattern, ...]:
        """Each text as a pattern relative to the caller's checkout; an absolute one outside
        the caller's workspace is refused."""
        relative, outside = await self._paths(caller, texts, patterns=True)
        if outside:
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                f"{outside[0][:200]!r} is outside your workspace; give a path inside it,"
                " relative to its top (src/app.py) or absolute under it; nothing was done",
            )
        return tuple({p.text: p for p in map(rules.normalise, relative)}.values())

    async def _paths(
        self, caller: Caller, texts: Sequence[Any], *, patterns: bool = False
    ) -> tuple[list[str], list[str]]:
        """(the texts relative to their checkout's top, the absolute ones outside the caller's
        workspace). Shapes are checked first: nothing touches the file system for a refusal."""
        # Every text's shape first (an absolute one as if the workspace were `/`): nothing
        # touches the store or the file system for a refusal.
        check = rules.normalise if patterns else rules.relative_text
        for text in rules.items_of(texts, "patterns" if patterns else "paths"):
            check(text, "/")
        absolute = [t for t in texts if t.startswith("/")]
        where: dict[str, Located | None] = {}
        if absolute:
            scope = (await self.store.holder(caller.agent_id)).scope
            found = await self._locate(absolute, scope)
            where = dict(zip(absolute, found, strict=True))
        relative: list[str] = []
        outside: list[str] = []
        for text in texts:
            if text.startswith("/"):
                spot = where.get(text)
                if spot is None:
                    outside.append(text)
                    continue
                text = spot.path
            relative.append(
                rules.normalise(text).text if patterns else rules.relative_text(text, None)
            )
        return relative, outside

    # -- answers -----------------------------------------------------------------------------

    def _blocks(self, reservation: Reservation, now: float) -> bool:
        return reservation.state(now, self.grace) is State.ACTIVE

    def _view(self, reservation: Reservation, caller: Caller | None) -> ReservationView:
        return ReservationView(
            id=reservation.id,
            pattern=reservation.pattern,
            holder=reservation.holder,
            agent_id=reservation.identity_id,
            workspace=reservation.workspace,
            exclusive=reservation.exclusive,
            reason=reservation.reason,
            since=iso(reservation.created_at) or "",
            until=iso(reservation.expires_at) or "",
            state=reservation.state(self.clock.now(), self.grace),
            you=caller is not None and reservation.identity_id == caller.agent_id,
        )


def _check_conflict(path: str, reservation: Reservation) -> CheckConflict:
    return CheckConflict(
        path=path,
        pattern=reservation.pattern,
        holder=reservation.holder,
        agent_id=reservation.identity_id,
        reason=reservation.reason,
        since=iso(reservation.created_at) or "",
        until=iso(reservation.expires_at) or "",
        id=reservation.id,
    )
