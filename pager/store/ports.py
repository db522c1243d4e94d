"""The store behind ports (ARCHITECTURE.md): what actors call, typed and backend-neutral.

Actors never see a database connection. Every operation is async and awaited; the backend
decides where it runs (SQLite's quick reads on the loop, every PostgreSQL statement in a worker
thread). An identity actor calls `Inbox` for its mail and `Sessions` for its binding; each
mutating call commits before it returns (the checkpoint is written before the effect is
announced) and answers, beside its value, the identity's next due time, which the store keeps
for the scheduler in the same transaction. A backend (SQLite
today, `pager/store/sql_ports.py`; PostgreSQL next) implements these, calling the delivery
state machine of `pager/domain/delivery.py`; `tests/store/test_ports_contract.py` holds every
backend to the same behaviour. The values they take and answer are the domain's
(`pager/domain/`): this contract names no backend's module (tests/test_store_layering.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Generic, Protocol, TypeVar

import attrs

from pager.domain.api import Caller
from pager.domain.delivery import AckResult, ClaimPolicy, Via
from pager.domain.hosts import HostBoard
from pager.domain.limits import SendLimits
from pager.domain.read_ahead import ReadAhead
from pager.domain.records import Claim, Message, Session, SessionState
from pager.domain.registration import Outcome, Registration, Takeover
from pager.domain.results import AliasResult
from pager.domain.retention import Action, Applied, Due, Plan, Pruned
from pager.domain.wake import (
    RunOutcome,
    WakeCandidate,
    WakeEntry,
    WakeRun,
    WakeSettings,
    WakeTarget,
)
from pager.domain.windows import Windows
from pager.domain.workspace import Workspace

T_co = TypeVar("T_co", covariant=True)


@attrs.frozen
class Changed(Generic[T_co]):
    """A committed change's result and the identity's next due time (wall clock) after it."""

    value: T_co
    next_due: float | None


@attrs.frozen
class ClaimView:
    """A claim with the addresses a reader needs."""

    claim: Claim
    sender_address: str
    recipient_address: str


@attrs.frozen
class NewMessage:
    """A send as the recipient's inbox takes it."""

    sender_id: str  # an identity, or a mailbox token's id for a page (SPEC §8.2)
    body: str
    thread: str | None
    reply_to: str | None
    idempotency_key: str | None
    fields: str | None = None  # a page's fields, as a JSON object
    script: bool = False  # a page about a job (`pager run`): script origin, hop 0
    ahead: ReadAhead | None = None  # its decision's facts, when read with the address


@attrs.frozen
class ClaimFor:
    """Who is waiting for mail when a send arrives: its claim is made in the send's own
    transaction (one commit, not two)."""

    session_id: str | None
    limit: int
    via: Via


@attrs.frozen
class Enqueued:
    message: Message
    duplicate: bool  # an unchanged repeat within the idempotency window: the original
    claims: tuple[ClaimView, ...] = ()  # made for `claim_for`, in send order


class Inbox(Protocol):
    """One identity's mail: every state change of its messages and claims."""

    async def next_due(self, identity_id: str) -> float | None:
        """The identity's next due time as the store holds it (a quick read)."""
        ...

    async def offerable(self, identity_id: str, *, now: float) -> int:
        """How many of the identity's messages a claim could take now (a quick read)."""
        ...

    async def enqueue(
        self,
        recipient_id: str,
        send: NewMessage,
        *,
        now: float,
        idempotent_since: float,
        limits: SendLimits,
        policy: ClaimPolicy,
        claim_for: ClaimFor | None = None,
        tell_others: bool = False,
    ) -> Changed[Enqueued]:
        """Queue a message (after the loop guard and rates of SPEC §8.1) and, for
        `claim_for`, claim waiting mail in the same transaction; PagerError when refused (the
        recipient gone, a key reused, a hop or rate limit). `tell_others`: the brokers
        sharing the store are told of the mail by the same transaction, at its commit (the
        `Wakeups` hint, without a write of its own)."""
        ...

    async def claim(
        self,
        recipient_id: str,
        *,
        session_id: str | None,
        limit: int,
        via: Via,
        now: float,
        policy: ClaimPolicy,
    ) -> Changed[list[ClaimView]]:
        """Claim up to `limit` available messages in send order."""
        ...

    async def ack(
        self, identity_id: str, tokens: Sequence[str], *, now: float, policy: ClaimPolicy
    ) -> Changed[AckResult]: ...

    async def release(
        self, identity_id: str, tokens: Sequence[str], *, now: float, policy: ClaimPolicy
    ) -> Changed[int]:
        """Open claims handed back unshown: their messages wait again, attempt not counted."""
        ...

    async def dead_letter(
        self,
        identity_id: str,
        tokens: Sequence[str],
        *,
        reason: str,
        now: float,
        policy: ClaimPolicy,
    ) -> Changed[list[str]]:
        """Messages out on these open claims die with `reason`, once (attempts not counted
        again); the ids that died."""
        ...

    async def refuse(
        self,
        identity_id: str,
        tokens: Sequence[str],
        *,
        now: float,
        policy: ClaimPolicy,
    ) -> Changed[int]:
        """Claims the delivery address refused: retried on `policy.redelivery`."""
        ...

    async def lapse(self, identity_id: str, *, now: float, policy: ClaimPolicy) -> Changed[int]:
        """Apply what came due: claims past their ack wait return, expired mail dies."""
        ...

    async def record(self, now: float, kind: str, data: dict[str, object]) -> None:
        """An operator event with no state change beside it."""
        ...

    async def start_chain(self, identity_id: str, *, now: float, limits: SendLimits) -> bool:
        """The person prompted the identity: its next send starts a new chain (no cause).
        True when a chain was reset; PagerError `rate_limited` past the identity's budget of
        resets (`messaging.start_chain`). Its identity actor's to call: the loop guard's cause
        is its state, like the claims that set it."""
        ...

    async def count_refusal(
        self, now: float, sender_id: str, reason: str, data: dict[str, object]
    ) -> None:
        """A send the loop guard or a rate refused: counted per (sender, reason, minute), and
        the first of each minute is a `send.refused` event with `data`."""
        ...

    async def due(
        self, now: float, *, after: tuple[float, str] | None, limit: int
    ) -> list[tuple[float, str]]:
        """(next due time, identity) of identities due by `now`, in due order, after the
        cursor `after` (a quick read, for the scheduler)."""
        ...

    async def earliest_due_after(self, now: float) -> float | None:
        """The first next-due time later than `now`, of any identity (a quick read)."""
        ...


class Sessions(Protocol):
    """The sessions of one identity, as its actor binds and ends them, and the lookups that
    authentication and start-up make."""

    async def exists(self, identity_id: str) -> bool:
        """Whether the identity exists (not reaped or purged; a quick read)."""
        ...

    async def by_token(self, token_hash: str) -> tuple[Session | None, str | None]:
        """The session a token's hash names, and, when none does, the session id it named
        before its identity was purged (quick reads)."""
        ...

    async def attached_ids(self) -> frozenset[str]:
        """Every identity with a session attached through this broker."""
        ...

    async def attached(self, identity_id: str) -> tuple[Session | None, str]:
        """Its attached session, if any, and its implementation (a quick read)."""
        ...

    async def end(self, session: Session, state: SessionState, reason: str, *, now: float) -> None:
        """End the attached session (a detach, a lapsed lease); its identity is detached."""
        ...

    async def renew(self, session_id: str, identity_id: str, lease: float, *, now: float) -> None:
        """Record the lease (and the identity's last_seen)."""
        ...


class Retention(Protocol):
    """The retention windows of SPEC §9: planned on a read snapshot, applied in small steps."""

    async def plan(self, *, now: float, windows: Windows, limit: int) -> Plan:
        """Which windows passed by `now` (for at most `limit` identities), read without
        holding up writes; identities attached in that snapshot are left out."""
        ...

    async def apply(self, due: Sequence[Due], *, now: float, windows: Windows) -> list[Applied]:
        """Apply planned steps, each only if it still stands (checked in the same change)."""
        ...

    async def prune(self, *, now: float, windows: Windows) -> Pruned:
        """Forget idempotency keys, operator events and purged sessions' tokens past their
        windows."""
        ...

    async def expire_sessions_of(self, hosts: Sequence[str], *, now: float) -> list[str]:
        """End the sessions of these hosts' brokers (which are not running) whose leases
        lapsed; the identities detached (SPEC §13)."""
        ...


class Leadership(Protocol):
    """Whether this broker is the one that sweeps (SPEC §13: retention runs on one broker at
    a time; another takes over when it dies)."""

    async def lead(self) -> bool: ...


class AlwaysLead:
    """A store of one broker: it always sweeps."""

    async def lead(self) -> bool:
        return True


class Directory(Protocol):
    """Identities and their places (SPEC §7): registrations, renames, moves, takeovers and the
    operator's actions, each decided and committed in one change from the store itself."""

    async def register(
        self,
        registration: Registration,
        *,
        now: float,
        lease_ttl: float,
        token: str,
        resume_token: str,
    ) -> Outcome:
        """Create, rejoin, refuse (PagerError) or take over; the sessions it ended and started."""
        ...

    async def rename(
        self,
        caller: Caller,
        alias: str,
        *,
        force: bool,
        claim: bool,
        mine: Session | None,
        lease: float,
        now: float,
        lease_ttl: float,
    ) -> tuple[AliasResult, Takeover | None]:
        """Give the caller's identity `alias`, or take over the identity holding it (`force`,
        `claim`) with the caller's session `mine` (its live lease `lease`)."""
        ...

    async def move(self, caller: Caller, workspace: Workspace, *, now: float) -> AliasResult:
        """Move the caller's identity, alias and all, to another workspace."""
        ...

    async def retire(self, agent_id: str, action: Action, reason: str, *, now: float) -> Applied:
        """Archive, unarchive, reap or purge one identity now (`not_found`, `conflict`)."""
        ...


class EventLog(Protocol):
    """The operator event log, read in seq order by the event feed and by each replay: one user
    at a time, each call off the event loop (pager/store/off_loop.py)."""

    async def latest_seq(self) -> int:
        """The highest seq ever assigned (0 when none), pruned ones included."""
        ...

    async def oldest_seq(self) -> int | None:
        """The lowest retained seq; None when nothing is retained."""
        ...

    async def rows_after(self, seq: int, limit: int) -> list[tuple[int, str, str, str]]:
        """(seq, at, type, data as JSON text) of events after `seq`, oldest first."""
        ...

    async def close(self) -> None: ...


#: What a broker does when told an identity changed elsewhere: its id, or None after a spell
#: of deafness (the notification connection broke), when any identity may have.
WakeHandler = Callable[[str | None], None]


class Wakeups(Protocol):
    """Wakes across the brokers sharing a store (SPEC §13): `notify` tells the others that an
    identity's mail or session changed, after the change committed; the broker its session is
    attached through then serves it. A hint only: a lost one delays, never loses."""

    #: Whether other brokers share the store (else there is nobody to tell).
    shared: bool

    async def notify(self, identity_id: str) -> None: ...

    async def on_wake(self, handler: WakeHandler | None) -> None:
        """Who hears other brokers' notifications (the identity actors), or nobody."""
        ...


class NoWakeups:
    """A store of one broker: there is nobody else to tell, nor to hear."""

    shared = False

    async def notify(self, identity_id: str) -> None:
        return None

    async def on_wake(self, handler: WakeHandler | None) -> None:
        return None


class WakeBook(Protocol):
    """Launch on mail (docs/wake.md): the person's settings per identity and the wake runs.
    A run starts with its session's registration (`Registration.wake`), in one commit."""

    async def settings(self, agent_id: str) -> WakeSettings | None: ...

    async def target(self, agent_id: str, *, now: float) -> WakeTarget | None:
        """What a run of the identity needs, read at once; None when launch on mail is off."""
        ...

    async def candidate(self, agent_id: str) -> WakeCandidate | None:
        """The identity with its address and the conversation a run would resume."""
        ...

    async def enabled_ids(self) -> list[str]: ...

    async def unfinished(self, host: str) -> list[WakeRun]:
        """Runs this host started that never recorded an end (its broker was killed)."""
        ...

    async def put(self, settings: WakeSettings, *, now: float) -> None: ...

    async def delete(self, agent_id: str, *, now: float) -> bool: ...

    async def listing(self) -> list[WakeEntry]:
        """Every identity with launch on mail on, with its latest runs (newest first)."""
        ...

    async def started(self, run_id: str, *, pid: int, log: str, now: float) -> None: ...

    async def end(
        self, run_id: str, *, outcome: RunOutcome, exit_code: int | None, detail: str, now: float
    ) -> WakeRun | None:
        """Record the run's end, ending its session if nothing did (None when the run had
        ended already)."""
        ...

    async def deferred(self, agent_id: str, *, retry_after: float, why: str, now: float) -> None:
        """Record that the hourly bound put a run off (`wake.deferred`)."""
        ...


@attrs.frozen
class MessagingPorts:
    """The ports the messaging subtree runs on, built by the composition root for its backend."""

    inbox: Inbox
    sessions: Sessions
    directory: Directory
    retention: Retention
    #: This broker's host as sessions record it ('' when it has the store alone).
    host: str = ""
    wakeups: Wakeups = attrs.field(factory=NoWakeups)
    leadership: Leadership = attrs.field(factory=AlwaysLead)
    #: The store's hosts and their liveness (None: a store of one broker).
    hosts: HostBoard | None = None
    wake: WakeBook | None = None
