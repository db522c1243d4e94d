"""OTP-style supervision for trio: ordered start, reverse-order bounded stop, restart strategies,
restart types and restart intensity. Nested trees: a ``Supervisor.run`` is itself a child start.
"""

from ._dynamic import DynamicSupervisor
from ._spec import ChildSpec, ChildStartFailed, Restart, Strategy, SupervisorGaveUp
from ._supervisor import Supervisor

__all__ = [
    "ChildSpec",
    "ChildStartFailed",
    "DynamicSupervisor",
    "Restart",
    "Strategy",
    "Supervisor",
    "SupervisorGaveUp",
]
