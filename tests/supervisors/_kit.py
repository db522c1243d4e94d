"""Controllable children and a journal for the supervisor tests (trio's clock only)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import attrs
import trio

from supervisors import ChildSpec, Restart, Supervisor, SupervisorGaveUp


@attrs.define
class Journal:
    """What happened, and when on trio's clock."""

    entries: list[tuple[float, str]] = attrs.Factory(list)

    def add(self, event: str) -> None:
        self.entries.append((trio.current_time(), event))

    @property
    def events(self) -> list[str]:
        return [event for _, event in self.entries]

    def since(self, mark: int) -> list[str]:
        """Events after the first ``mark`` entries."""
        return self.events[mark:]

    def time_of(self, event: str) -> float:
        """When ``event`` last happened."""
        return [at for at, e in self.entries if e == event][-1]


class Child:
    """A child that logs ``start``/``ready``/``stop``/``stopped`` and exits when told to.

    ``started()`` receives ``"<name>#<n>"`` for its n-th incarnation. ``failing_starts`` makes the
    next that many starts raise ``start_error`` before ``started()``; ``stop_delay`` makes it
    linger that long in a shielded scope when cancelled.
    """

    def __init__(
        self,
        journal: Journal,
        name: str,
        *,
        restart: Restart = Restart.PERMANENT,
        shutdown_timeout: float = 2.0,
        start_delay: float = 0.0,
        stop_delay: float = 0.0,
    ) -> None:
        self.journal = journal
        self.name = name
        self.spec = ChildSpec(name, self.run, restart=restart, shutdown_timeout=shutdown_timeout)
        self.start_delay = start_delay
        self.stop_delay = stop_delay
        self.starts = 0
        self.failing_starts = 0
        self.start_error: Exception = RuntimeError(f"{name} failed to start")
        self._exit = trio.Event()
        self._error: Exception | None = None

    async def run(self, *, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
        self.starts += 1
        self.journal.add(f"start {self.name}")
        await trio.sleep(self.start_delay)
        if self.failing_starts > 0:
            self.failing_starts -= 1
            raise self.start_error
        exit_requested = self._exit = trio.Event()
        self._error = None
        task_status.started(f"{self.name}#{self.starts}")
        self.journal.add(f"ready {self.name}")
        try:
            await exit_requested.wait()
        finally:
            if not exit_requested.is_set():  # cancelled, i.e. being stopped
                self.journal.add(f"stop {self.name}")
                with trio.CancelScope(shield=True):
                    await trio.sleep(self.stop_delay)
                self.journal.add(f"stopped {self.name}")
        if self._error is not None:
            raise self._error

    def crash(self, error: Exception | None = None) -> Exception:
        """Make the running incarnation raise ``error``; returns it."""
        self._error = error if error is not None else RuntimeError(f"{self.name} crashed")
        self._exit.set()
        return self._error

    def finish(self) -> None:
        """Make the running incarnation return normally."""
        self._error = None
        self._exit.set()


def children(
    journal: Journal, *names: str, start_delay: float = 0.0, stop_delay: float = 0.0
) -> list[Child]:
    return [Child(journal, name, start_delay=start_delay, stop_delay=stop_delay) for name in names]


@asynccontextmanager
async def running(supervisor: Supervisor) -> AsyncIterator[Supervisor]:
    """Run ``supervisor`` in a nursery for the block, then cancel it."""
    async with trio.open_nursery() as nursery:
        started = await nursery.start(supervisor.run)
        assert started is supervisor
        yield supervisor
        nursery.cancel_scope.cancel()


async def settle(seconds: float = 0.01) -> None:
    """Let the supervisor react; with the autojump clock this costs no wall time."""
    await trio.sleep(seconds)


async def until_gave_up(
    supervisor: Supervisor, driver: Callable[[], Awaitable[object]]
) -> SupervisorGaveUp:
    """Run ``supervisor``, then ``driver`` beside it; return what run() raised when it gave up.

    ``except SupervisorGaveUp`` also checks that run() raises it bare, not inside a group.
    """
    caught: list[SupervisorGaveUp] = []
    async with trio.open_nursery() as nursery:

        async def supervise(*, task_status: trio.TaskStatus[Supervisor]) -> None:
            try:
                await supervisor.run(task_status=task_status)
            except SupervisorGaveUp as exc:
                caught.append(exc)
            nursery.cancel_scope.cancel()

        await nursery.start(supervise)
        await driver()
        await trio.sleep_forever()
    [gave_up] = caught
    return gave_up
