"""Retention (SPEC §9) as values: what a sweep plans for an identity whose window passed, what
applying it did, and what pruning removed. The store plans and applies; these are its answers.
"""

from __future__ import annotations

import enum

import attrs


class Action(enum.StrEnum):
    """What is done to an identity: by a sweep when its window passed, or by the operator."""

    ARCHIVE = "archive"
    REAP = "reap"
    UNARCHIVE = "unarchive"  # operator actions only: never planned by a sweep
    PURGE = "purge"


@attrs.frozen
class Due:
    """One identity whose window has passed: what to do, why, and when it became due."""

    agent_id: str
    action: Action
    reason: str
    due_at: float


@attrs.frozen
class Plan:
    """What one sweep does to identities, and when the next not-yet-passed window ends."""

    due: list[Due]
    next_due: float | None  # wall clock; None when no window is pending
    more: bool  # the batch limit cut the list; sweep again at once


@attrs.frozen
class Applied:
    """What one action did to an identity (its messages dead-lettered, sessions ended) and its
    address as it was, for the operator event."""

    agent_id: str
    action: Action
    reason: str
    dead_lettered: int
    ended_sessions: int = 0  # sessions that were attached
    alias: str = ""
    address: str = ""


@attrs.frozen
class Pruned:
    """How many rows one pruning removed, by kind."""

    idempotency: int
    events: int
    purged_sessions: int = 0
    refusals: int = 0  # rows of counted refusals (a minute of one sender for one reason each)
