"""The store's ports (`pager/store/ports.py`) over either engine's writer.

Each call is one function on a connection, run by the one writer (SQLite's checkpoint actor,
group commit: statements on the event loop, only `COMMIT` in a worker thread; PostgreSQL's
pg/_writer.py) and committed before the call returns; quick reads go through its read-only
side connection. Which writes run whole in the worker thread (`heavy`: they may touch many
rows) is decided here, not by callers. The identity's next due time is refreshed in the same
transaction as every change of its inbox.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Protocol, TypeVar

import attrs

from pager.domain import addressing, delivery, idempotency, ids
from pager.domain.delivery import AckResult, ClaimPolicy, Via
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Hint
from pager.domain.limits import SendLimits
from pager.domain.loop_guard import SendOrigin, TooDeep, decide, hop_limit_error
from pager.domain.read_ahead import ReadAhead
from pager.domain.records import Message, Session, SessionState
from pager.domain.retention import Applied, Due, Plan, Pruned
from pager.domain.windows import Windows
from pager.store import messaging as ms
from pager.store._conn import AfterCommit, Conn
from pager.store._messages import Queued
from pager.store._registration import make_person_in_send
from pager.store.ports import Changed, ClaimFor, ClaimView, Enqueued, NewMessage

T = TypeVar("T")

#: Claims (or tokens) one write may handle on the event loop; more run whole in the writer's
#: thread (end to end, a fetch of 100 took ~9 ms more than a fetch of 1: most of it on the loop).
ROWS_ON_LOOP = 20


class Writer(Protocol):
    """The store's writer: SQLite's (pager/store/sqlite_writer.py `Checkpoint`) or
    PostgreSQL's (pager/store/pg/_writer.py `PgWriter`)."""

    #: Whether a send's decision facts are read with its address, ahead of its write (where
    #: each statement costs a round trip: PostgreSQL), not inside it.
    reads_ahead: bool

    async def lookup(self, fn: Callable[[Conn], T]) -> T: ...

    async def write(self, fn: Callable[[Conn], T], *, heavy: bool = False) -> T: ...

    async def write_late(
        self, fn: Callable[[Conn], AfterCommit[T]], *, heavy: bool = False
    ) -> T: ...


class Reads(Protocol):
    """The read side (pager/store/read_views.py `ReadViews`, pg/backend.py `PgReadSide`): `fn`
    in one read transaction."""

    async def read(self, fn: Callable[[Conn], T]) -> T: ...


class SqlInbox:
    """`wake_in_write`: how a write tells the brokers sharing the store that an identity has
    mail, inside its transaction (PostgreSQL's NOTIFY, delivered at the commit); None for a
    store of one broker."""

    def __init__(
        self, writer: Writer, wake_in_write: Callable[[Conn, str], None] | None = None
    ) -> None:
        self._writer = writer
        self._wake_in_write = wake_in_write

    async def next_due(self, identity_id: str) -> float | None:
        return await self._writer.lookup(lambda conn: ms.next_due_of(conn, identity_id))

    async def offerable(self, identity_id: str, *, now: float) -> int:
        return await self._writer.lookup(lambda conn: ms.offerable_count(conn, identity_id, now))

    async def _change(
        self,
        identity_id: str,
        op: Callable[[Conn], T],
        *,
        now: float,
        policy: ClaimPolicy,
        heavy: bool = False,
    ) -> Changed[T]:
        """Run `op` and refresh the identity's next due time in the same transaction."""

        def with_due(conn: Conn) -> Changed[T]:
            ms.lock_inbox(conn, identity_id)
            value = op(conn)
            due = ms.inbox_due(conn, identity_id, now, policy.message_expiry)
            if due.needed != due.recorded:  # read with the deadlines: no statement of its own
                ms.set_next_due(conn, identity_id, due.needed)
            return Changed(value, due.needed)

        return await self._writer.write(with_due, heavy=heavy)

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
        """The statements are ordered for a backend that sends them together (PostgreSQL:
        pg/_batch.py): what the send must read before it decides (the inbox, the sender's
        chain and rates) goes out in one batch with BEGIN; the rest, the event last (it holds
        the events' order lock to the commit), goes with COMMIT. A send whose facts were read
        with its address (`send.ahead`) is decided before its write, which goes out whole in
        one batch (`_enqueue_decided`)."""
        if _decidable_ahead(send):
            try:
                decided = await self._enqueue_decided(
                    recipient_id, send, now=now, idempotent_since=idempotent_since,
                    limits=limits, policy=policy, claim_for=claim_for, tell_others=tell_others,
                )  # fmt: skip
            except ms.StaleFacts:
                if send.ahead is not None and send.ahead.makes is not None:
                    # Another write made the person's identity first: the send goes to it.
                    raise addressing.made_meanwhile(send.ahead.recipient_address) from None
                decided = None  # decided on facts that changed: decide inside the write
            if decided is not None:
                return decided

        def op(conn: Conn) -> AfterCommit[Changed[Enqueued]]:
            ms.lock_send(conn, recipient_id, send.sender_id)
            # The recipient's row, read once: it still exists (a reap that committed just
            # before must win) and its next due time, with the inbox's deadlines.
            inbox = ms.inbox_due_later(conn, recipient_id, now, policy.message_expiry)
            key = send.idempotency_key
            try:
                original = None
                if key is not None:
                    # A true repeat answers the original; a reuse for another send is refused.
                    original = ms.idempotent_original(
                        conn,
                        sender_id=send.sender_id,
                        key=key,
                        since=idempotent_since,
                        recipient_id=recipient_id,
                        body=send.body,
                        thread=send.thread,
                        reply_to=send.reply_to,
                    )
                if original is None:
                    stands = ms.origin_and_hop(
                        conn, send.sender_id, recipient_id, now, limits, script=send.script
                    )
            except PagerError:
                inbox()  # its read finished: SQLite holds a statement open until it is read
                raise
            if original is not None:
                return _settled(conn, recipient_id, inbox(), Enqueued(original, True))
            before = inbox()
            if not before.exists:
                raise PagerError(
                    ErrorCode.UNKNOWN_RECIPIENT, "the recipient was just reaped", hint=Hint.ROSTER
                )
            message = _add_sent(conn, recipient_id, send, stands, now)
            if key is not None:
                ms.remember_idempotency(conn, send.sender_id, key, message.unread.id, now)
            claims: tuple[ClaimView, ...] = ()
            if claim_for is None:
                after = before.with_new_mail(now)
            else:
                claims = tuple(_claim(conn, recipient_id, claim_for, now, policy))
                after = ms.inbox_due(conn, recipient_id, now, policy.message_expiry)
            self._queued(conn, recipient_id, message, before, after, tell_others=tell_others)
            due = after.needed
            return AfterCommit(lambda: Changed(Enqueued(message.message(), False, claims), due))

        heavy = claim_for is not None and claim_for.limit > ROWS_ON_LOOP
        return await self._writer.write_late(op, heavy=heavy)

    async def _enqueue_decided(
        self,
        recipient_id: str,
        send: NewMessage,
        *,
        now: float,
        idempotent_since: float,
        limits: SendLimits,
        policy: ClaimPolicy,
        claim_for: ClaimFor | None,
        tell_others: bool,
    ) -> Changed[Enqueued] | None:
        """A send decided on the facts read ahead (`send.ahead`), written in one transaction
        that reads nothing before its end: under the inbox's and the sender's locks, a
        statement fails it (`StaleFacts`) unless those facts still hold, so a sender racing
        its own sends (the same idempotency key among them), or a claim of the inbox, cannot
        slip past what was decided. A repeat of a key is answered, and a refusal raised, on
        the facts as read, without a write: each was true when they were read. None when the
        write must read the inbox itself: a reader waits on mail already there, or a next due
        time to mend."""
        ahead = send.ahead
        assert ahead is not None
        assert ahead.sender is not None
        before = ms.InboxDue(**attrs.asdict(ahead.inbox), message_expiry=policy.message_expiry)
        key = send.idempotency_key
        if key is not None:
            original = _repeated_ahead(ahead, send, recipient_id, key, idempotent_since)
            if original is not None:
                if before.needed != before.recorded:
                    return None
                return Changed(Enqueued(original, True), before.needed)
        stands = decide(ahead.sender, limits, ahead.read_at, script=send.script)
        if isinstance(stands, TooDeep):
            deep = stands
            if ahead.chain is not None:  # read with the address: the refusal needs no read
                sender = ahead.sender_address or send.sender_id
                named = [*ahead.chain, f"{sender} (you)", ahead.recipient_address]
                raise hop_limit_error(deep, limits.max_hops, named)
            raise await self._writer.lookup(
                lambda conn: ms.too_deep(conn, send.sender_id, recipient_id, deep, limits)
            )
        if claim_for is not None and not _only_new_mail_claimable(ahead, now, policy):
            return None
        reader = claim_for if claim_for is not None and claim_for.limit > 0 else None
        after = before.with_new_mail(now)
        if reader is not None:  # the new message, claimed: an open claim until its ack wait
            deadline = now + policy.ack_wait
            held = after.open_claim_deadline
            after = attrs.evolve(
                after, open_claim_deadline=deadline if held is None else min(held, deadline)
            )

        def op(conn: Conn) -> AfterCommit[Changed[Enqueued]]:
            if ahead.makes is not None:  # the recipient is made first, unless made already
                make_person_in_send(conn, ahead.makes)
            ms.lock_send(conn, recipient_id, send.sender_id)
            ms.expect_unchanged(
                conn, send.sender_id, recipient_id, ahead, key=key,
                nothing_claimable_at=None if claim_for is None else now,
            )  # fmt: skip
            message = _add_sent(conn, recipient_id, send, stands, now)
            if key is not None:
                ms.remember_idempotency(conn, send.sender_id, key, message.unread.id, now)
            claimed = None
            if reader is not None:
                claimed = ms.claim_queued(
                    conn,
                    message,
                    session_id=reader.session_id,
                    now=now,
                    policy=policy,
                    via=reader.via,
                    new_token=lambda: ids.new_token(ids.Kind.CLAIM_TOKEN),
                    hash_token=ids.hash_token,
                )
            self._queued(conn, recipient_id, message, before, after, tell_others=tell_others)
            due = after.needed

            def enqueued() -> Changed[Enqueued]:
                claims: tuple[ClaimView, ...] = ()
                if claimed is not None:
                    view = ClaimView(claimed(), ahead.sender_address, ahead.recipient_address)
                    claims = (view,)
                return Changed(Enqueued(message.message(), False, claims), due)

            return AfterCommit(enqueued)

        heavy = claim_for is not None and claim_for.limit > ROWS_ON_LOOP
        return await self._writer.write_late(op, heavy=heavy)

    def _queued(
        self,
        conn: Conn,
        recipient_id: str,
        message: Queued,
        before: ms.InboxDue,
        after: ms.InboxDue,
        *,
        tell_others: bool,
    ) -> None:
        """What every send writes after its message: the inbox's next due time when it moved,
        the other brokers told, and the `message.queued` event last."""
        if after.needed != before.recorded:
            ms.set_next_due(conn, recipient_id, after.needed)
        if tell_others and self._wake_in_write is not None:
            self._wake_in_write(conn, recipient_id)
        ms.record_queued(conn, message)

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
        def op(conn: Conn) -> list[ClaimView]:
            return _claim(conn, recipient_id, ClaimFor(session_id, limit, via), now, policy)

        heavy = limit > ROWS_ON_LOOP
        return await self._change(recipient_id, op, now=now, policy=policy, heavy=heavy)

    async def ack(
        self, identity_id: str, tokens: Sequence[str], *, now: float, policy: ClaimPolicy
    ) -> Changed[AckResult]:
        def op(conn: Conn) -> AckResult:
            return ms.acknowledge(
                conn, identity_id=identity_id, tokens=tokens, now=now, hash_token=ids.hash_token
            )

        heavy = len(tokens) > ROWS_ON_LOOP
        return await self._change(identity_id, op, now=now, policy=policy, heavy=heavy)

    async def release(
        self, identity_id: str, tokens: Sequence[str], *, now: float, policy: ClaimPolicy
    ) -> Changed[int]:
        hashes = [ids.hash_token(token) for token in tokens]

        def op(conn: Conn) -> int:
            return ms.release_claims(conn, identity_id, hashes, now)

        heavy = len(tokens) > ROWS_ON_LOOP
        return await self._change(identity_id, op, now=now, policy=policy, heavy=heavy)

    async def dead_letter(
        self,
        identity_id: str,
        tokens: Sequence[str],
        *,
        reason: str,
        now: float,
        policy: ClaimPolicy,
    ) -> Changed[list[str]]:
        hashes = [ids.hash_token(token) for token in tokens]

        def op(conn: Conn) -> list[str]:
            return ms.dead_letter_claims(conn, identity_id, hashes, now, reason)

        heavy = len(tokens) > ROWS_ON_LOOP
        return await self._change(identity_id, op, now=now, policy=policy, heavy=heavy)

    async def refuse(
        self,
        identity_id: str,
        tokens: Sequence[str],
        *,
        now: float,
        policy: ClaimPolicy,
    ) -> Changed[int]:
        hashes = [ids.hash_token(token) for token in tokens]

        def op(conn: Conn) -> int:
            return ms.refuse_claims(
                conn,
                hashes,
                now=now,
                schedule=policy.redelivery,
                max_attempts=policy.max_attempts,
            )

        heavy = len(tokens) > ROWS_ON_LOOP
        return await self._change(identity_id, op, now=now, policy=policy, heavy=heavy)

    async def lapse(self, identity_id: str, *, now: float, policy: ClaimPolicy) -> Changed[int]:
        def op(conn: Conn) -> int:
            lapsed = ms.expire_claims(conn, identity_id, now, policy.max_attempts)
            return lapsed + ms.dead_letter_expired(conn, identity_id, now, policy.message_expiry)

        # Heavy: after a restart every claim whose ack wait passed is requeued here, one by one.
        return await self._change(identity_id, op, now=now, policy=policy, heavy=True)

    async def record(self, now: float, kind: str, data: dict[str, object]) -> None:
        await self._writer.write(lambda conn: ms.record_event(conn, now, kind, data))

    async def start_chain(self, identity_id: str, *, now: float, limits: SendLimits) -> bool:
        return await self._writer.write(lambda conn: ms.start_chain(conn, identity_id, now, limits))

    async def count_refusal(
        self, now: float, sender_id: str, reason: str, data: dict[str, object]
    ) -> None:
        await self._writer.write(lambda conn: ms.count_refusal(conn, now, sender_id, reason, data))

    async def due(
        self, now: float, *, after: tuple[float, str] | None, limit: int
    ) -> list[tuple[float, str]]:
        return await self._writer.lookup(lambda conn: ms.due_identities(conn, now, after, limit))

    async def earliest_due_after(self, now: float) -> float | None:
        return await self._writer.lookup(lambda conn: ms.earliest_due_after(conn, now))


def _decidable_ahead(send: NewMessage) -> bool:
    """Whether a send can be decided on the facts read with its address: an identity's
    send, read ahead (with its idempotency key, when it has one)."""
    ahead = send.ahead
    return (
        ahead is not None
        and ahead.sender is not None
        and (ahead.inbox.exists or ahead.makes is not None)
        and (send.idempotency_key is None or ahead.key is not None)
        and not send.sender_id.startswith(ms.MAILBOX_PREFIX)
    )


def _repeated_ahead(
    ahead: ReadAhead, send: NewMessage, recipient_id: str, key: str, since: float
) -> Message | None:
    """The original a send repeats, by its key as read ahead (None: the key is new, or
    free again); PagerError `conflict` when the send reuses the key for another message."""
    read = ahead.key
    assert read is not None
    original = read.original
    if original is None or read.created_at is None or read.created_at < since:
        return None
    differs = idempotency.differences(
        original,
        recipient_id=recipient_id,
        body=send.body,
        thread=send.thread,
        reply_to=send.reply_to,
    )
    if not differs:
        return original
    raise idempotency.conflict(
        original,
        differs,
        key=key,
        recipient_id=recipient_id,
        original_to=read.original_to or original.recipient_id,
        asked_to=ahead.recipient_address,
    )


def _only_new_mail_claimable(ahead: ReadAhead, now: float, policy: ClaimPolicy) -> bool:
    """Whether a claim at `now` would take the new message alone, by the inbox as read: no
    mail waiting, no retry due by then, none to expire (`expect_unchanged` checks it still
    holds under the inbox's lock)."""
    inbox = ahead.inbox
    oldest = inbox.oldest_unsettled_sent_at
    return (
        not ahead.mail_waiting
        and (inbox.next_retry is None or inbox.next_retry > now)
        and (oldest is None or oldest > delivery.expiry_cutoff(now, policy.message_expiry))
    )


def _settled(
    conn: Conn, recipient_id: str, inbox: ms.InboxDue, enqueued: Enqueued
) -> AfterCommit[Changed[Enqueued]]:
    """A send that changed nothing (a repeat): the due time kept as the inbox needs it."""
    if inbox.needed != inbox.recorded:
        ms.set_next_due(conn, recipient_id, inbox.needed)
    due = inbox.needed
    return AfterCommit(lambda: Changed(enqueued, due))


def _claim(
    conn: Conn,
    recipient_id: str,
    claim_for: ClaimFor,
    now: float,
    policy: ClaimPolicy,
) -> list[ClaimView]:
    claims = ms.claim_waiting(
        conn,
        recipient_id=recipient_id,
        session_id=claim_for.session_id,
        limit=claim_for.limit,
        now=now,
        policy=policy,
        via=claim_for.via,
        new_token=lambda: ids.new_token(ids.Kind.CLAIM_TOKEN),
        hash_token=ids.hash_token,
    )
    if not claims:
        return []
    known = ms.addresses(conn, [c.message.sender_id for c in claims] + [recipient_id])
    me = known.get(recipient_id, recipient_id)
    return [ClaimView(c, known.get(c.message.sender_id, c.message.sender_id), me) for c in claims]


class SqlSessions:
    def __init__(self, writer: Writer, host: str = "") -> None:
        self._writer = writer
        self._host = host  # this broker's, in the store ('' when it has the store alone)

    async def exists(self, identity_id: str) -> bool:
        found = await self._writer.lookup(lambda conn: ms.get_identity(conn, identity_id))
        return found is not None

    async def by_token(self, token_hash: str) -> tuple[Session | None, str | None]:
        return await self._writer.lookup(
            lambda conn: (
                ms.session_by_token(conn, token_hash),
                ms.purged_session(conn, token_hash),
            )
        )

    async def attached_ids(self) -> frozenset[str]:
        return await self._writer.lookup(lambda conn: ms.attached_identity_ids(conn, self._host))

    async def attached(self, identity_id: str) -> tuple[Session | None, str]:
        def read(conn: Conn) -> tuple[Session | None, str]:
            identity = ms.get_identity(conn, identity_id)
            implementation = "" if identity is None else identity.implementation
            return ms.attached_session(conn, identity_id), implementation

        return await self._writer.lookup(read)

    async def end(self, session: Session, state: SessionState, reason: str, *, now: float) -> None:
        def op(conn: Conn) -> None:
            ms.end_session(conn, session.id, state, reason, now)
            ms.touch_identity(conn, session.identity_id, now, attached=False)

        await self._writer.write(op)

    async def renew(self, session_id: str, identity_id: str, lease: float, *, now: float) -> None:
        def op(conn: Conn) -> None:
            ms.set_lease(conn, session_id, lease)
            ms.touch_identity(conn, identity_id, now)

        await self._writer.write(op)


class SqlRetention:
    def __init__(self, writer: Writer, reads: Reads) -> None:
        self._writer = writer
        self._reads = reads

    async def plan(self, *, now: float, windows: Windows, limit: int) -> Plan:
        def read(conn: Conn) -> Plan:
            attached = ms.attached_identity_ids(conn)
            return ms.plan_sweep(conn, now, windows, attached, limit=limit)

        return await self._reads.read(read)

    async def apply(self, due: Sequence[Due], *, now: float, windows: Windows) -> list[Applied]:
        steps = list(due)
        # Small steps run on the loop like any write (a few identities: under a millisecond);
        # in the writer's thread they would hold the GIL against the loop for its switch
        # interval (5 ms) at a time.
        return await self._writer.write(
            lambda conn: ms.apply_due(conn, steps, now, windows), heavy=len(steps) > ROWS_ON_LOOP
        )

    async def prune(self, *, now: float, windows: Windows) -> Pruned:
        return await self._writer.write(lambda conn: ms.prune(conn, now, windows), heavy=True)

    async def expire_sessions_of(self, hosts: Sequence[str], *, now: float) -> list[str]:
        gone = list(hosts)
        return await self._writer.write(lambda conn: ms.expire_sessions_of_hosts(conn, gone, now))


def _add_sent(
    conn: Conn, recipient_id: str, send: NewMessage, stands: SendOrigin, now: float
) -> Queued:
    """The send's message row, where its chain stands, and both identities marked as having
    exchanged mail."""
    message = ms.add_message(
        conn,
        message_id=ids.new_message_id(),
        sender_id=send.sender_id,
        recipient_id=recipient_id,
        body=send.body,
        thread=send.thread,
        reply_to=send.reply_to,
        now=now,
        origin=stands.origin,
        hop=stands.hop,
        cause_id=stands.cause_id,
        fields=send.fields,
    )
    ms.mark_exchanged(conn, {send.sender_id, recipient_id})
    return message
