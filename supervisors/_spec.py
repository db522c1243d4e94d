"""Value types of the supervision library: strategies, restart types, child specs, errors."""

from __future__ import annotations

import enum
from collections.abc import Awaitable, Callable

import attrs


class Strategy(enum.Enum):
    """Which children a supervisor restarts when one of them has to be restarted."""

    ONE_FOR_ONE = "one_for_one"
    """Only the child that exited."""
    ONE_FOR_ALL = "one_for_all"
    """Every child: all stop in reverse order, then all start again in order."""
    REST_FOR_ONE = "rest_for_one"
    """The child that exited and those started after it; earlier ones are untouched."""


class Restart(enum.Enum):
    """When a child that exited is restarted."""

    PERMANENT = "permanent"
    """Always, after an exception and after a normal return."""
    TRANSIENT = "transient"
    """Only after an exception; a normal return leaves it stopped."""
    TEMPORARY = "temporary"
    """Never: its exit is only logged and it leaves the supervisor (as in OTP)."""


def _non_negative(_: object, attribute: attrs.Attribute[float], value: float) -> None:
    if not value >= 0:  # also rejects NaN
        raise ValueError(f"{attribute.name} must be >= 0, got {value!r}")


@attrs.frozen
class ChildSpec:
    """How to start, restart and stop one child of a supervisor.

    ``start`` is called as ``await start(task_status=...)`` and must call
    ``task_status.started(value)`` once it is ready; ``value`` (e.g. an ``ActorRef``) is what
    :meth:`Supervisor.started_value` returns. ``shutdown_timeout`` bounds how long a stop waits
    for the child to finish after its cancel scope is cancelled.
    """

    id: str = attrs.field(validator=attrs.validators.min_len(1))
    start: Callable[..., Awaitable[object]]
    restart: Restart = Restart.PERMANENT
    shutdown_timeout: float = attrs.field(default=2.0, validator=_non_negative)


def describe_exit(error: BaseException | None) -> str:
    return "a normal return" if error is None else repr(error)


class SupervisorGaveUp(Exception):
    """A supervisor exceeded its restart intensity; ``__cause__`` is the child's last error."""

    def __init__(
        self,
        supervisor: str,
        child_id: str,
        last_error: BaseException | None,
        *,
        max_restarts: int,
        period: float,
    ) -> None:
        super().__init__(
            f"supervisor {supervisor!r} gave up: more than {max_restarts} restarts within"
            f" {period:g}s; child {child_id!r} last exited with {describe_exit(last_error)}"
        )
        self.supervisor = supervisor
        self.child_id = child_id
        self.last_error = last_error


class ChildStartFailed(Exception):
    """A child raised or returned before calling ``task_status.started()``.

    During the initial start ``Supervisor.run`` raises it (after stopping the children already
    started, in reverse order), as OTP aborts a supervisor whose child fails to start.
    ``Supervisor.start_child`` raises it to its caller. During a restart it counts as another
    failure of that child. ``__cause__`` is the child's error (``None`` if it returned or was
    stopped while starting).
    """

    def __init__(self, supervisor: str, child_id: str, error: BaseException | None) -> None:
        reason = "exited" if error is None else f"raised {error!r}"
        super().__init__(
            f"supervisor {supervisor!r}: child {child_id!r} {reason} before it was started"
        )
        self.supervisor = supervisor
        self.child_id = child_id
        self.error = error
