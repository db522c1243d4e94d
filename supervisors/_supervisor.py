"""The Supervisor: starts, watches, restarts and stops children under one trio nursery.

Each incarnation of a child runs in a wrapper task in the supervisor's nursery, inside its own
cancel scope. A child's exception never reaches the nursery (which would cancel its siblings):
the wrapper hands it to the supervising loop, which applies the restart type, the strategy and
the restart intensity. Once a child has called ``started()`` its scope is shielded, so a
cancellation from outside the supervisor does not hit every child at once; the supervisor
stops them itself, one by one, in reverse start order.

Stopping a child means: cancel its scope, then wait at most ``shutdown_timeout`` for it to end.
A trio task cannot be killed, so a child that overruns (e.g. slow cleanup in a shielded scope)
is logged and left to finish in the background: the supervisor stops waiting and moves on to
the next sibling (or starts the replacement), but ``run()`` only returns once every straggler
has finished, because a nursery always joins its tasks. Give a nested supervisor a
``shutdown_timeout`` that covers its own children's.
"""

from __future__ import annotations

import collections
import logging
from collections.abc import Sequence
from typing import NoReturn, assert_never

import attrs
import trio

from ._spec import ChildSpec, ChildStartFailed, Restart, Strategy, SupervisorGaveUp, describe_exit

logger = logging.getLogger("pager.supervisors")


@attrs.define(eq=False)
class _Incarnation:
    """One run of one child."""

    spec: ChildSpec
    scope: trio.CancelScope = attrs.Factory(trio.CancelScope)
    done: trio.Event = attrs.Factory(trio.Event)
    task: trio.lowlevel.Task | None = None
    started: bool = False
    stopping: bool = False


class _ChildStatus:
    """The ``task_status`` a child receives: shields the child once it joins the nursery."""

    def __init__(
        self, inc: _Incarnation, outer: trio.TaskStatus[object], nursery: trio.Nursery
    ) -> None:
        self._inc = inc
        self._outer = outer
        self._nursery = nursery

    def started(self, value: object = None) -> None:
        if self._inc.started:
            raise RuntimeError(f"child {self._inc.spec.id!r} called started() twice")
        self._inc.started = True
        self._outer.started(value)
        # If its starter was cancelled meanwhile, trio leaves the task where it was; it must then
        # stay cancellable by that starter, so shield it only once it has really moved.
        task = self._inc.task
        if task is not None and task.parent_nursery is self._nursery:
            self._inc.scope.shield = True


def _leaf(group: ExceptionGroup[Exception]) -> Exception:
    """The exception inside (nested) one-member groups, else the group itself."""
    exc: Exception = group
    while isinstance(exc, ExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


class Supervisor:
    """An OTP-style supervisor. ``await run()`` runs it; ``ChildSpec(id, sup.run)`` nests it.

    ``start_child``, ``terminate_child`` and ``which_children`` may be called from other tasks
    while it runs, but not from a child's own startup (the supervisor waits for that startup).
    """

    def __init__(
        self,
        name: str,
        children: Sequence[ChildSpec],
        *,
        strategy: Strategy = Strategy.ONE_FOR_ONE,
        max_restarts: int = 3,
        period: float = 5.0,
    ) -> None:
        if max_restarts < 0:
            raise ValueError(f"max_restarts must be >= 0, got {max_restarts!r}")
        if not period > 0:
            raise ValueError(f"period must be > 0, got {period!r}")
        ids = [spec.id for spec in children]
        duplicates = sorted({i for i in ids if ids.count(i) > 1})
        if duplicates:
            raise ValueError(f"supervisor {name!r}: duplicate child ids {duplicates}")
        self.name = name
        self.strategy = strategy
        self.max_restarts = max_restarts
        self.period = period
        self._initial = tuple(children)
        # Per-run state, reset by run() so a parent can restart this supervisor.
        self._specs: list[ChildSpec] = []
        self._running: dict[str, _Incarnation] = {}
        self._values: dict[str, object] = {}
        self._restarts: collections.deque[float] = collections.deque()
        # One entry per exited incarnation, so bounded by the number of children.
        self._exits: collections.deque[tuple[_Incarnation, Exception | None]] = collections.deque()
        self._wake = trio.Event()
        self._lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._closing = False

    def __repr__(self) -> str:
        return f"<Supervisor {self.name!r} {self.strategy.value}>"

    async def run(
        self, *, task_status: trio.TaskStatus[Supervisor] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Start the children in order, report ready with ``self``, then supervise them.

        Runs until cancelled (children are then stopped in reverse order) or until it gives up
        (``SupervisorGaveUp``) or a child fails its initial start (``ChildStartFailed``); in
        both cases the children still running are stopped in reverse order first.
        """
        if self._nursery is not None:
            raise RuntimeError(f"supervisor {self.name!r} is already running")
        self._reset()
        failure: SupervisorGaveUp | ChildStartFailed | None = None
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                try:
                    for spec in self._initial:
                        await self._start(spec)
                        self._specs.append(spec)
                    task_status.started(self)
                    await self._supervise()
                except (SupervisorGaveUp, ChildStartFailed) as exc:
                    # Raised after the nursery closes, so callers get it bare, not in a group.
                    failure = exc
                finally:
                    with trio.CancelScope(shield=True):
                        await self._stop_all()
        finally:
            self._nursery = None
        if failure is not None:
            raise failure

    def started_value(self, child_id: str) -> object:
        """The value the child's latest incarnation passed to ``task_status.started()``."""
        try:
            return self._values[child_id]
        except KeyError:
            raise KeyError(f"supervisor {self.name!r} has no started child {child_id!r}") from None

    def which_children(self) -> list[tuple[str, bool]]:
        """``(id, running)`` for each child, in start order."""
        return [(spec.id, self._is_running(spec.id)) for spec in self._specs]

    async def start_child(self, spec: ChildSpec) -> object:
        """Start a child after the existing ones and return its started value.

        Raises ``ChildStartFailed`` if it fails before calling ``started()`` (it is not added).
        """
        async with self._lock:
            self._check_open()
            if spec.id in self._running or any(s.id == spec.id for s in self._specs):
                raise ValueError(f"supervisor {self.name!r} already has a child {spec.id!r}")
            value = await self._start(spec)
            self._specs.append(spec)
            return value

    async def terminate_child(self, child_id: str) -> None:
        """Stop the child (bounded by its ``shutdown_timeout``) and remove it for good."""
        async with self._lock:
            self._check_open()
            spec = self._spec_of(child_id)
            self._drop(spec)
            inc = self._running.get(child_id)
            if inc is not None:
                await self._stop(inc)

    # -- internals ---------------------------------------------------------------------------

    def _reset(self) -> None:
        self._specs = []
        self._running = {}
        self._values = {}
        self._restarts.clear()
        self._exits.clear()
        self._wake = trio.Event()
        self._lock = trio.Lock()
        self._closing = False

    def _check_open(self) -> None:
        if self._nursery is None or self._closing:
            raise RuntimeError(f"supervisor {self.name!r} is not running")

    def _spec_of(self, child_id: str) -> ChildSpec:
        for spec in self._specs:
            if spec.id == child_id:
                return spec
        raise KeyError(f"supervisor {self.name!r} has no child {child_id!r}")

    def _drop(self, spec: ChildSpec) -> None:
        self._specs = [s for s in self._specs if s.id != spec.id]
        self._values.pop(spec.id, None)

    def _is_running(self, child_id: str) -> bool:
        inc = self._running.get(child_id)
        return inc is not None and not inc.done.is_set()

    def _forget(self, inc: _Incarnation) -> None:
        if self._running.get(inc.spec.id) is inc:
            del self._running[inc.spec.id]

    async def _start(self, spec: ChildSpec) -> object:
        """Start one incarnation and wait until it is ready (or failed to be)."""
        assert self._nursery is not None
        inc = _Incarnation(spec)
        self._running[spec.id] = inc
        try:
            value: object = await self._nursery.start(self._child_main, inc)
        except BaseException:
            self._forget(inc)
            raise
        self._values[spec.id] = value
        return value

    async def _child_main(self, inc: _Incarnation, *, task_status: trio.TaskStatus[object]) -> None:
        """Run one incarnation; report its exit to the supervising loop instead of raising."""
        assert self._nursery is not None
        inc.task = trio.lowlevel.current_task()
        status = _ChildStatus(inc, task_status, self._nursery)
        error: Exception | None = None
        try:
            try:
                with inc.scope:
                    await inc.spec.start(task_status=status)
            except* Exception as group:  # Cancelled, KeyboardInterrupt etc. propagate
                error = _leaf(group)
        finally:
            inc.done.set()
        if not inc.started:
            # Raised through nursery.start() to whoever is starting this child.
            raise ChildStartFailed(self.name, inc.spec.id, error) from error
        if inc.stopping:
            if error is not None:
                logger.warning(
                    "supervisor %r: child %r raised while stopping: %r",
                    self.name,
                    inc.spec.id,
                    error,
                    exc_info=error,
                )
            return
        self._exits.append((inc, error))
        self._wake.set()

    async def _supervise(self) -> NoReturn:
        while True:
            while not self._exits:
                self._wake = trio.Event()
                await self._wake.wait()
            inc, error = self._exits.popleft()
            async with self._lock:
                # Skip exits of incarnations stopped meanwhile by a restart or terminate_child.
                if not inc.stopping and self._running.get(inc.spec.id) is inc:
                    self._forget(inc)
                    await self._child_exited(inc.spec, error)

    async def _child_exited(self, spec: ChildSpec, error: Exception | None) -> None:
        match spec.restart:
            case Restart.PERMANENT:
                restart = True
            case Restart.TRANSIENT:
                restart = error is not None
            case Restart.TEMPORARY:
                restart = False
            case _:
                assert_never(spec.restart)
        if restart:
            await self._restart(spec, error)
            return
        logger.info(
            "supervisor %r: %s child %r exited with %s; not restarted",
            self.name,
            spec.restart.value,
            spec.id,
            describe_exit(error),
        )
        if spec.restart is Restart.TEMPORARY:
            self._drop(spec)  # as in OTP, a temporary child leaves once it exits

    async def _restart(self, spec: ChildSpec, error: BaseException | None) -> None:
        """Apply the strategy for ``spec``; a failed restart counts as another failure."""
        while True:
            self._count_restart(spec, error)
            logger.warning(
                "supervisor %r: restarting child %r (%s) after %s",
                self.name,
                spec.id,
                self.strategy.value,
                describe_exit(error),
                exc_info=error,
            )
            affected = self._affected(spec)
            for other in reversed(affected):
                inc = self._running.get(other.id)
                if inc is not None:
                    await self._stop(inc)
                if other.restart is Restart.TEMPORARY:
                    self._drop(other)  # OTP: temporary siblings are stopped, not restarted
            for other in affected:
                if other.restart is Restart.TEMPORARY:
                    continue
                try:
                    await self._start(other)
                except ChildStartFailed as exc:
                    spec, error = other, exc.error
                    break
            else:
                return

    def _affected(self, spec: ChildSpec) -> list[ChildSpec]:
        """The children a restart of ``spec`` stops and starts again, in start order."""
        match self.strategy:
            case Strategy.ONE_FOR_ONE:
                return [spec]
            case Strategy.ONE_FOR_ALL:
                return list(self._specs)
            case Strategy.REST_FOR_ONE:
                ids = [s.id for s in self._specs]
                return self._specs[ids.index(spec.id) :]
            case _:
                assert_never(self.strategy)

    def _count_restart(self, spec: ChildSpec, error: BaseException | None) -> None:
        """Record a restart; give up if more than max_restarts fall within the last period."""
        now = trio.current_time()
        self._restarts.append(now)
        while now - self._restarts[0] > self.period:
            self._restarts.popleft()
        if len(self._restarts) > self.max_restarts:
            logger.error(
                "supervisor %r giving up: more than %d restarts within %gs;"
                " child %r last exited with %s",
                self.name,
                self.max_restarts,
                self.period,
                spec.id,
                describe_exit(error),
                exc_info=error,
            )
            raise SupervisorGaveUp(
                self.name, spec.id, error, max_restarts=self.max_restarts, period=self.period
            ) from error

    async def _stop(self, inc: _Incarnation) -> None:
        """Cancel one incarnation and wait at most its shutdown_timeout for it to end."""
        inc.stopping = True
        inc.scope.cancel()
        with trio.move_on_after(inc.spec.shutdown_timeout):
            await inc.done.wait()
        if not inc.done.is_set():
            logger.warning(
                "supervisor %r: child %r did not stop within %gs; moving on, it finishes"
                " in the background and run() waits for it before returning",
                self.name,
                inc.spec.id,
                inc.spec.shutdown_timeout,
            )
        self._forget(inc)

    async def _stop_all(self) -> None:
        """Stop every incarnation, last started first (one still starting counts as last)."""
        self._closing = True
        while self._running:
            order = {spec.id: i for i, spec in enumerate(self._specs)}
            last = max(self._running.values(), key=lambda inc: order.get(inc.spec.id, len(order)))
            await self._stop(last)
