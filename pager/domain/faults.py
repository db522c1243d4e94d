"""Failures of the moment: not a bug, nothing of the caller's to fix in its request, and
nothing that crashes an actor. Every edge answers one `unavailable` with its message (what is
wrong, then what to do), and the broker's health shows the store degraded while it lasts.

The store's faults and the errors of a database file that cannot be used are of this kind
(pager/store/_errors.py); so is a call to a part of the broker that got no answer in time
(actors' `CallTimeout`, a `TimeoutError`).
"""

from __future__ import annotations

from typing import ClassVar


class Unavailable(Exception):
    """The broker cannot do this right now, for a reason outside its own state (a disk, a lock,
    a database server). Its message says what is wrong and what to do."""

    #: Whether it marks the store degraded on /health (a lost race is no trouble of the store).
    degrades: ClassVar[bool] = True
