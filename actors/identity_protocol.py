"""The identity actor's protocol: the requests it answers (each `Call[R]` declares its reply
type) and the casts it takes from its timers, its provider and other brokers.

The provider's side of delivery (`Deliver`, `WakeSession`) is in `actors/identity_delivery.py`,
launch on mail (`LaunchRun`) in `actors/identity_launch.py`; a wake run's end (`RunEnded`) is
`actors/wake_run.py`'s.
"""

from __future__ import annotations

from collections.abc import Hashable

import attrs

from actors._runtime import Call
from actors.wake_run import RunEnded
from pager.domain.delivery import AckResult, Via, Wake
from pager.domain.records import Message, SessionState
from pager.store.ports import ClaimView, NewMessage


@attrs.frozen
class Enqueue(NewMessage, Call["Sent"]):
    """Queue a message for this identity (the send as the inbox takes it); answers `Sent`."""


@attrs.frozen
class Fetch(Call[list[ClaimView]]):
    session_id: str | None
    limit: int
    wait_s: float
    via: Via = Via.FETCH


@attrs.frozen
class Ack(Call[AckResult]):
    tokens: tuple[str, ...]


@attrs.frozen
class Release(Call[int]):
    """Claims handed back unshown; their messages wait again without an attempt counted."""

    tokens: tuple[str, ...]


@attrs.frozen
class Unrenderable(Call[list[str]]):
    """Claims whose messages cannot be rendered for their reader (`pager.rendering`): those
    messages die alone (`unrenderable`), once; answers the ids that died."""

    tokens: tuple[str, ...]


@attrs.frozen
class StartChain(Call[bool]):
    """The person typed a prompt to this identity: its next send starts a new chain (its
    loop-guard cause cleared, within its budget of resets); answers whether one was reset,
    or fails `rate_limited`."""


@attrs.frozen
class Rebind(Call[None]):
    """The identity's sessions changed in the store (a registration, a takeover, an archive):
    bind the attached one, if any, and end what was bound before."""


@attrs.frozen
class EndSession(Call[None]):
    """End the session (a detach, or its identity's lease lapsed): committed, then its streams
    and long polls are told."""

    session_id: str
    state: SessionState
    reason: str


@attrs.frozen
class Retire(Call[None]):
    """The identity is about to be reaped or purged: answer the long polls (nothing), drop
    the push in flight and stop, before the store dead-letters its inbox. Its attachment stays
    in the index until the store says the identity is gone (`Identities.retiring`)."""


@attrs.frozen
class LeaseCheck:
    """End the session if its lease lapsed; else arm the lease timer again."""


@attrs.frozen
class Renew:
    """A request of the session was authenticated: its lease runs at least `until` (wall
    clock). The actor decides whether the session is still current (a lease that lapsed
    meanwhile ends it) and records the lease in the store now and then."""

    session_id: str
    until: float


@attrs.frozen
class StreamOpened:
    """An event stream (or a wake run) of the session holds its lease while open; said again
    now and then, so an actor started again after a crash learns of the streams still open."""

    session_id: str
    stream: Hashable


@attrs.frozen
class StreamClosed:
    """The stream closed: the lease runs on for the stream grace."""

    session_id: str
    stream: Hashable


@attrs.frozen
class StreamsCarried:
    """The session's attachment was carried on to this identity (a takeover by alias): the
    streams its former identity held go on holding the lease here."""

    session_id: str
    streams: frozenset[Hashable]


@attrs.frozen
class Tick:
    """A timer fired: apply ack waits, retries and expiry; answer long polls that ran out."""


@attrs.frozen
class Idle:
    """The idle timer fired: stop if still nothing is pending."""


@attrs.frozen
class Poke:
    """Another broker sharing the store changed this identity (SPEC §13): bind what the
    store now says, then serve what waits, as a timer would."""


@attrs.frozen
class Pushed:
    """The provider's outcome for one push: the claims its delivery address did not take, and
    those it could not render (never sent: they die, the rest of the push goes on)."""

    push_id: int
    refused: tuple[str, ...]
    unrenderable: tuple[str, ...] = ()


IdentityMessage = (
    Enqueue
    | Fetch
    | Ack
    | Release
    | Unrenderable
    | StartChain
    | Rebind
    | EndSession
    | Retire
    | LeaseCheck
    | Renew
    | StreamOpened
    | StreamClosed
    | StreamsCarried
    | Tick
    | Idle
    | Poke
    | Pushed
    | RunEnded
)


@attrs.frozen
class Sent:
    """The reply to Enqueue."""

    message: Message
    duplicate: bool
    wake: Wake
