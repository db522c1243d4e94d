"""What a registration asks and what it did (SPEC §7): the values the directory port takes
and answers; the store decides them inside one transaction (create, rejoin, refuse, take over).
"""

from __future__ import annotations

import attrs

from pager.domain.records import Delivery, Identity, Session
from pager.domain.workspace import Workspace


@attrs.frozen
class WakeStart:
    """A wake run's registration (docs/wake.md): a session for `agent_id` only while none is
    attached, it is not archived and the hourly bound allows; recorded as run `run_id`."""

    agent_id: str
    run_id: str
    max_runs_per_hour: int


@attrs.frozen
class Registration:
    """What a session asks when it registers: where, with which harness, under which name or
    conversation, and whether it may take an alias over (`force`)."""

    workspace: Workspace
    implementation: str
    session_name: str | None
    conversation_key: str | None
    delivery: Delivery | None
    force: bool
    resume_token: str | None = None
    wake: WakeStart | None = None


@attrs.frozen
class Registered:
    """The identity a registration attached, its workspace's slug and the new session (with
    its token and resume token, the only time either is seen)."""

    identity: Identity
    slug: str
    session: Session
    token: str
    resume_token: str


@attrs.frozen
class Takeover:
    """What one forced takeover did, for the directory's bookkeeping."""

    identity: Identity  # the identity taken over, as it is now
    session: Session  # the caller's session on it
    ended: Session | None  # the holder's session, ended (None: nobody was attached)
    handed: Session | None  # the holder's token from now on: a session of a fresh identity
    handed_implementation: str


@attrs.frozen
class Outcome:
    """A registration's whole effect: what it attached, the sessions it ended, and those it
    started (each with its identity's implementation) for the directory's bookkeeping."""

    registered: Registered
    ended: list[Session]
    started: list[tuple[Session, str]]  # with the identity's implementation
