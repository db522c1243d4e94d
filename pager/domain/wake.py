"""Launch on mail (SPEC §10, docs/wake.md): the person's per-identity settings and the rules
that say when a wake run may start. Pure: the store keeps the values, the identity actor and
the registration apply the rules.
"""

from __future__ import annotations

import enum

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.records import Identity
from pager.domain.workspace import Workspace

#: Defaults of `pager wake on` (each can be given per identity).
DEFAULT_RUNS_PER_HOUR = 4
DEFAULT_TIMEOUT = 600.0
#: Bounds a person may choose within.
MAX_RUNS_PER_HOUR = 60
MIN_TIMEOUT, MAX_TIMEOUT = 1.0, 24 * 3600.0
#: The most arguments a `--command` may have, and the longest each may be (characters).
MAX_COMMAND_PARTS, MAX_COMMAND_CHARS = 64, 4096
#: The window of the hourly bound.
HOUR = 3600.0


@attrs.frozen
class WakeSettings:
    """What the person turned on for one identity. `command`: the headless arguments that
    replace the manifest's `[wake.launch] args` (None: the manifest's)."""

    agent_id: str
    command: tuple[str, ...] | None = None
    max_runs_per_hour: int = DEFAULT_RUNS_PER_HOUR
    timeout: float = DEFAULT_TIMEOUT
    updated_at: float = 0.0


def check_settings(settings: WakeSettings) -> WakeSettings:
    """The settings, or PagerError `validation_failed` naming what is out of bounds."""
    if not 1 <= settings.max_runs_per_hour <= MAX_RUNS_PER_HOUR:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"max_runs_per_hour must be between 1 and {MAX_RUNS_PER_HOUR},"
            f" got {settings.max_runs_per_hour}",
        )
    if not MIN_TIMEOUT <= settings.timeout <= MAX_TIMEOUT:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"timeout must be between {MIN_TIMEOUT:g} s and {MAX_TIMEOUT:g} s (24h),"
            f" got {settings.timeout:g} s",
        )
    command = settings.command
    if command is not None:
        if not command or any(not part for part in command):
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                "command must have at least one argument, none of them empty",
            )
        if len(command) > MAX_COMMAND_PARTS or max(map(len, command)) > MAX_COMMAND_CHARS:
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                f"command is too long (at most {MAX_COMMAND_PARTS} arguments of at most"
                f" {MAX_COMMAND_CHARS} characters each)",
            )
        if any("\x00" in part for part in command):
            raise PagerError(ErrorCode.VALIDATION_FAILED, "command must not contain NUL")
    return settings


class RunOutcome(enum.StrEnum):
    """How a wake run ended (the `wake.ended` event's `outcome`)."""

    EXITED = "exited"  # the harness ended by itself (its exit status says how)
    TIMED_OUT = "timed_out"  # stopped at its timeout
    SUPERSEDED = "superseded"  # a person attached: the run was told and ended
    STOPPED = "stopped"  # the broker stopped (or its session ended otherwise)
    FAILED = "failed"  # it could not start (the harness is missing, the wiring failed)


@attrs.frozen
class WakeRun:
    """One wake run as the store records it."""

    id: str
    agent_id: str
    session_id: str
    host: str
    started_at: float
    ended_at: float | None = None
    outcome: RunOutcome | None = None
    exit_code: int | None = None
    pid: int | None = None
    log: str | None = None
    acknowledged: int = 0


def hourly_retry_after(starts: list[float], limit: int, now: float) -> float | None:
    """Seconds until one more run fits the hourly bound, given the start times of the runs in
    the last hour; None when one may start now."""
    recent = sorted(t for t in starts if t > now - HOUR)
    if len(recent) < limit:
        return None
    return max(0.0, recent[len(recent) - limit] + HOUR - now)


@attrs.frozen
class WakeCandidate:
    """An identity as `pager wake on` judges it (may it be woken by a launch?): its address
    and the conversation a run would resume."""

    identity: Identity
    address: str
    conversation_key: str | None


@attrs.frozen
class WakeTarget(WakeCandidate):
    """What deciding on and starting a wake run reads about an identity, in one go."""

    settings: WakeSettings
    workspace: Workspace
    available: int  # messages waiting that may be offered now


@attrs.frozen
class WakeEntry:
    """One agent with launch on mail on, as `pager wake list` shows it."""

    settings: WakeSettings
    candidate: WakeCandidate
    runs: tuple[WakeRun, ...]
