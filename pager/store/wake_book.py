"""The store side of launch on mail, the `WakeBook` port (pager/store/ports.py) on either backend:
each call is one function of pager/store/_wake.py on the backend's writer."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, TypeVar

from pager.domain.wake import (
    RunOutcome,
    WakeCandidate,
    WakeEntry,
    WakeRun,
    WakeSettings,
    WakeTarget,
)
from pager.store import _wake as wk
from pager.store._conn import Conn

T = TypeVar("T")

#: Runs listed per identity by `listing`.
RUNS_LISTED = 5
#: Why a run's session ended when its broker never saw it end.
CUT_SHORT = "the broker stopped during the wake run"


class _Writer(Protocol):
    async def lookup(self, fn: Callable[[Conn], T]) -> T: ...

    async def write(self, fn: Callable[[Conn], T], *, heavy: bool = False) -> T: ...


class StoreWakeBook:
    def __init__(self, writer: _Writer) -> None:
        self._writer = writer

    async def settings(self, agent_id: str) -> WakeSettings | None:
        return await self._writer.lookup(lambda conn: wk.wake_settings(conn, agent_id))

    async def target(self, agent_id: str, *, now: float) -> WakeTarget | None:
        return await self._writer.lookup(lambda conn: wk.wake_target(conn, agent_id, now=now))

    async def candidate(self, agent_id: str) -> WakeCandidate | None:
        return await self._writer.lookup(lambda conn: wk.wake_candidate(conn, agent_id))

    async def enabled_ids(self) -> list[str]:
        return [s.agent_id for s in await self._writer.lookup(wk.all_wake_settings)]

    async def unfinished(self, host: str) -> list[WakeRun]:
        return await self._writer.lookup(lambda conn: wk.unfinished_runs(conn, host))

    async def put(self, settings: WakeSettings, *, now: float) -> None:
        await self._writer.write(lambda conn: wk.put_wake_settings(conn, settings, now))

    async def delete(self, agent_id: str, *, now: float) -> bool:
        return await self._writer.write(lambda conn: wk.delete_wake_settings(conn, agent_id, now))

    async def listing(self) -> list[WakeEntry]:
        # A few rows: those the person turned on.
        return await self._writer.lookup(lambda conn: wk.wake_entries(conn, RUNS_LISTED))

    async def started(self, run_id: str, *, pid: int, log: str, now: float) -> None:
        await self._writer.write(
            lambda conn: wk.mark_run_started(conn, run_id, pid=pid, log=log, now=now)
        )

    async def end(
        self, run_id: str, *, outcome: RunOutcome, exit_code: int | None, detail: str, now: float
    ) -> WakeRun | None:
        return await self._writer.write(
            lambda conn: wk.end_wake_run(
                conn, run_id, outcome=outcome, exit_code=exit_code, detail=detail, now=now
            )
        )

    async def deferred(self, agent_id: str, *, retry_after: float, why: str, now: float) -> None:
        await self._writer.write(
            lambda conn: wk.record_deferred(conn, agent_id, now, retry_after=retry_after, why=why)
        )
