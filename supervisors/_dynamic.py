"""A dynamic one_for_one supervisor for many short-lived children of one kind (OTP's
``simple_one_for_one``): children are started on demand, keyed by id, and leave when they end
without being restarted.

Unlike ``Supervisor``, which keeps an ordered list of a few children for its strategies, this
one holds its children in a dict and runs each in its own task with its own restart loop, so
starting, finding and ending one costs the same with 10 children or 10,000. Restart intensity
is shared by all children: more than ``max_restarts`` restarts within ``period`` seconds make
``run()`` give up (``SupervisorGaveUp``) after stopping every child, failing upward.
"""

from __future__ import annotations

import collections
import logging

import attrs
import trio

from ._spec import ChildSpec, ChildStartFailed, Restart, SupervisorGaveUp, describe_exit
from ._supervisor import _leaf

logger = logging.getLogger("pager.supervisors")


@attrs.define(eq=False)
class _Child:
    spec: ChildSpec
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)


class DynamicSupervisor:
    """``await run()`` runs it (reporting itself ready); ``start_child`` from any task."""

    def __init__(self, name: str, *, max_restarts: int = 10, period: float = 10.0) -> None:
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts!r}")
        if not period > 0:
            raise ValueError(f"period must be > 0, got {period!r}")
        self.name = name
        self.max_restarts = max_restarts
        self.period = period
        self._children: dict[str, _Child] = {}
        self._restarts: collections.deque[float] = collections.deque()
        self._nursery: trio.Nursery | None = None
        self._gave_up: SupervisorGaveUp | None = None

    def __repr__(self) -> str:
        return f"<DynamicSupervisor {self.name!r} ({len(self._children)} children)>"

    def __len__(self) -> int:
        return len(self._children)

    def running(self, child_id: str) -> bool:
        return child_id in self._children

    async def run(
        self, *, task_status: trio.TaskStatus[DynamicSupervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        if self._nursery is not None:
            raise RuntimeError(f"supervisor {self.name!r} is already running")
        self._children.clear()
        self._restarts.clear()
        self._gave_up = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            self._nursery = None
            self._children.clear()
        if self._gave_up is not None:  # the only way sleep_forever ends but a cancel from outside
            raise self._gave_up

    async def start_child(self, spec: ChildSpec) -> object:
        """Start a child and return the value its first incarnation passed to ``started()``.

        Raises ``ChildStartFailed`` if that incarnation fails before ``started()`` (nothing is
        then added) and ValueError if a child with that id is running."""
        nursery = self._nursery
        if nursery is None or self._gave_up is not None:
            raise RuntimeError(f"supervisor {self.name!r} is not running")
        if spec.id in self._children:
            raise ValueError(f"supervisor {self.name!r} already has a child {spec.id!r}")
        child = _Child(spec)
        self._children[spec.id] = child
        try:
            value: object = await nursery.start(self._supervise, child)
        except BaseException:
            if self._children.get(spec.id) is child:
                del self._children[spec.id]
            raise
        return value

    async def terminate_child(self, child_id: str) -> None:
        """Stop the child (bounded by its ``shutdown_timeout``); it is not restarted."""
        child = self._children.pop(child_id, None)
        if child is None:
            return
        child.scope.cancel()
        with trio.move_on_after(child.spec.shutdown_timeout):
            await child.done.wait()

    async def _supervise(self, child: _Child, *, task_status: trio.TaskStatus[object]) -> None:
        """Run incarnations of one child until it ends for good."""
        first = _FirstStatus(task_status)
        status: trio.TaskStatus[object] = first
        try:
            with child.scope:
                while True:
                    error = await _incarnation(child.spec, status)
                    if not first.reported:
                        # Raised through nursery.start() to whoever is starting this child.
                        raise ChildStartFailed(self.name, child.spec.id, error) from error
                    status = _IGNORED
                    if not self._restarts_after(child.spec, error):
                        return
                    if not self._count_restart(child.spec, error):
                        return
        finally:
            child.done.set()
            if self._children.get(child.spec.id) is child:
                del self._children[child.spec.id]

    def _restarts_after(self, spec: ChildSpec, error: Exception | None) -> bool:
        match spec.restart:
            case Restart.PERMANENT:
                restart = True
            case Restart.TRANSIENT:
                restart = error is not None
            case _:
                restart = False
        if not restart and error is not None:
            logger.warning(
                "supervisor %r: child %r exited with %s; not restarted",
                self.name,
                spec.id,
                describe_exit(error),
                exc_info=error,
            )
        return restart

    def _count_restart(self, spec: ChildSpec, error: Exception | None) -> bool:
        """Record a restart; False (and every child stopping) once the intensity is passed."""
        now = trio.current_time()
        self._restarts.append(now)
        while now - self._restarts[0] > self.period:
            self._restarts.popleft()
        if len(self._restarts) > self.max_restarts:
            if self._gave_up is None:
                logger.error(
                    "supervisor %r giving up: more than %d restarts within %gs; child %r last"
                    " exited with %s",
                    self.name,
                    self.max_restarts,
                    self.period,
                    spec.id,
                    describe_exit(error),
                    exc_info=error,
                )
                self._gave_up = SupervisorGaveUp(
                    self.name, spec.id, error, max_restarts=self.max_restarts, period=self.period
                )
                assert self._nursery is not None
                self._nursery.cancel_scope.cancel()
            return False
        logger.warning(
            "supervisor %r: restarting child %r after %s",
            self.name,
            spec.id,
            describe_exit(error),
            exc_info=error,
        )
        return True


async def _incarnation(spec: ChildSpec, status: trio.TaskStatus[object]) -> Exception | None:
    """One run of a child; its exception is returned, not raised (Cancelled and other
    BaseExceptions propagate)."""
    error: Exception | None = None
    try:
        await spec.start(task_status=status)
    except* Exception as group:
        error = _leaf(group)
    return error


class _FirstStatus(trio.TaskStatus[object]):
    """The first incarnation's ``task_status``: passes ``started()`` on and remembers it."""

    def __init__(self, outer: trio.TaskStatus[object]) -> None:
        self._outer = outer
        self.reported = False

    def started(self, value: object = None) -> None:
        if self.reported:
            raise RuntimeError("started() called twice")
        self.reported = True
        self._outer.started(value)


class _Ignored(trio.TaskStatus[object]):
    """Later incarnations: their ``started()`` reaches nobody (OTP: a restart has no caller)."""

    def started(self, value: object = None) -> None:
        pass


_IGNORED = _Ignored()
