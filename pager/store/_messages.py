"""Messages, claims and idempotency keys: sync functions on a connection.

Callers run them inside one checkpoint transaction each; none of them commits. Every state
change of a message happens here, so the rules of SPEC §8 read in one place, and each one
records its `message.*` operator event in the same transaction (one per message, also in bulk).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

import attrs

from pager.domain import delivery, idempotency
from pager.domain.clock import iso
from pager.domain.delivery import AckResult, ClaimPolicy, Step, Via
from pager.domain.records import Claim, ClaimState, Message, MessageState
from pager.store._conn import Conn, Cursor
from pager.store._delivery_sql import DELAYED_INDEXED, INBOX_INDEXED, guard, states_sql
from pager.store._dialect import dialect_of
from pager.store._events import record_event, record_events
from pager.store._identities import addresses
from pager.store._sql import qualified, sql

_MESSAGE_COLUMNS = (
    "seq, id, sender_id, recipient_id, body, thread, reply_to, sent_at, state, attempts,"
    " available_at, dead_reason, settled_at, origin, hop, fields"
)


def message_columns(table: str) -> str:
    """The columns `message_of` reads, of the messages row named `table` in a statement."""
    return qualified(_MESSAGE_COLUMNS, table)


def message_of(row: Any) -> Message:
    """A message from a row that starts with `message_columns`."""
    return _message(row)


def _message(row: Any) -> Message:
    return Message(
        seq=int(row[0]),
        id=str(row[1]),
        sender_id=str(row[2]),
        recipient_id=str(row[3]),
        body=str(row[4]),
        thread=None if row[5] is None else str(row[5]),
        reply_to=None if row[6] is None else str(row[6]),
        sent_at=float(row[7]),
        state=MessageState(row[8]),
        attempts=int(row[9]),
        available_at=float(row[10]),
        dead_reason=None if row[11] is None else str(row[11]),
        settled_at=None if row[12] is None else float(row[12]),
        origin=str(row[13]),
        hop=int(row[14]),
        fields=None if row[15] is None else str(row[15]),
    )


def insert_message(
    conn: Conn,
    *,
    message_id: str,
    sender_id: str,
    recipient_id: str,
    body: str,
    thread: str | None,
    reply_to: str | None,
    now: float,
    origin: str = "agent",
    hop: int = 0,
    cause_id: str | None = None,
    fields: str | None = None,
) -> Message:
    """A new queued message, and its `message.queued` event."""
    queued = add_message(
        conn,
        message_id=message_id,
        sender_id=sender_id,
        recipient_id=recipient_id,
        body=body,
        thread=thread,
        reply_to=reply_to,
        now=now,
        origin=origin,
        hop=hop,
        cause_id=cause_id,
        fields=fields,
    )
    record_queued(conn, queued)
    return queued.message()


@attrs.define
class Queued:
    """A message just inserted, its seq not read yet (a backend that batches statements reads
    it late: `message()`)."""

    unread: Message  # seq 0 until read
    _seq: Cursor

    def message(self) -> Message:
        if not self.unread.seq:
            self.unread = attrs.evolve(self.unread, seq=int(self._seq.fetchone()[0]))
        return self.unread


def add_message(
    conn: Conn,
    *,
    message_id: str,
    sender_id: str,
    recipient_id: str,
    body: str,
    thread: str | None,
    reply_to: str | None,
    now: float,
    origin: str = "agent",
    hop: int = 0,
    cause_id: str | None = None,
    fields: str | None = None,
) -> Queued:
    """Insert a new queued message (its event is the caller's: `record_queued`)."""
    cursor = conn.execute(
        sql("INSERT INTO messages (id, sender_id, recipient_id, body, thread, reply_to, sent_at,"
        " state, attempts, available_at, origin, hop, cause_id, fields)"
        " VALUES ({}, {}, {}, {}, {}, {}, {}, 'queued', 0, {}, {}, {}, {}, {}) RETURNING seq"),
        (
            message_id, sender_id, recipient_id, body, thread, reply_to, now, now, origin, hop,
            cause_id, fields,
        ),
    )  # fmt: skip
    unread = Message(
        seq=0,
        id=message_id,
        sender_id=sender_id,
        recipient_id=recipient_id,
        body=body,
        thread=thread,
        reply_to=reply_to,
        sent_at=now,
        state=MessageState.QUEUED,
        attempts=0,
        available_at=now,
        origin=origin,
        hop=hop,
        fields=fields,
    )
    return Queued(unread, cursor)


def record_queued(conn: Conn, queued: Queued) -> None:
    """The `message.queued` event of a message just inserted."""
    message = queued.unread
    record_event(
        conn,
        message.sent_at,
        "message.queued",
        {"message_id": message.id, "sender_id": message.sender_id,
         "recipient_id": message.recipient_id, "origin": message.origin, "hop": message.hop},
    )  # fmt: skip


def get_message(conn: Conn, message_id: str) -> Message | None:
    row = conn.execute(
        sql(f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE id = {{}}"), (message_id,)
    ).fetchone()
    return None if row is None else _message(row)


# -- idempotency -----------------------------------------------------------------------------


def idempotent_original(
    conn: Conn,
    *,
    sender_id: str,
    key: str,
    since: float,
    recipient_id: str,
    body: str,
    thread: str | None,
    reply_to: str | None,
) -> Message | None:
    """The message an earlier send with this key created within the window, when this send
    repeats it; None when the key is new here; PagerError `conflict` when it reuses the key
    for another send (pager/domain/idempotency.py)."""
    row = conn.execute(
        sql(
            "SELECT message_id FROM idempotency WHERE sender_id = {} AND key = {} AND created_at"
            " >= {}"
        ),
        (sender_id, key, since),
    ).fetchone()
    if row is None:
        return None
    original = get_message(conn, str(row[0]))
    if original is None:  # nothing left to repeat: the key is free again
        return None
    differs = idempotency.differences(
        original, recipient_id=recipient_id, body=body, thread=thread, reply_to=reply_to
    )
    if not differs:
        return original
    known = addresses(conn, [original.recipient_id, recipient_id])
    raise idempotency.conflict(
        original,
        differs,
        key=key,
        recipient_id=recipient_id,
        original_to=known.get(original.recipient_id, original.recipient_id),
        asked_to=known.get(recipient_id, recipient_id),
    )


def remember_idempotency(conn: Conn, sender_id: str, key: str, message_id: str, now: float) -> None:
    conn.execute(
        sql(
            "INSERT INTO idempotency (sender_id, key, message_id, created_at) VALUES ({}, {},"
            " {}, {})"
            " ON CONFLICT (sender_id, key) DO UPDATE SET message_id = excluded.message_id,"
            " created_at = excluded.created_at"
        ),
        (sender_id, key, message_id, now),
    )


# -- claiming --------------------------------------------------------------------------------

# Each update of a message's state is guarded by the states its step of the delivery state
# machine applies to (`delivery.TRANSITIONS`), written into the SQL from there as literals.
_UNSETTLED = states_sql(delivery.UNSETTLED)
_CLAIMABLE = guard(Step.CLAIM)
_OUT = guard(Step.ACK)
_OPEN = f"state = '{ClaimState.OPEN.value}'"
_QUEUED, _DEAD = MessageState.QUEUED.value, MessageState.DEAD.value


def _claim_end(step: Step) -> str:
    """What `step` makes of the open claim it closes."""
    end = delivery.TRANSITIONS[step].claim_end
    assert end is not None, f"{step} closes no claim"
    return end.value


def _claimable(conn: Conn) -> str:
    """The messages a claim takes, in send order: queued ones available by now. The IN term
    repeats `messages_inbox`'s condition, and `seq > 0` (true of every seq) names the seq that
    ends each of its entries, so SQLite walks the queued mail in send order and stops at the
    limit, instead of sorting every waiting row."""
    dialect = dialect_of(conn)
    return (
        f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE recipient_id = {{}}"
        f" AND {INBOX_INDEXED} AND {_CLAIMABLE}"
        f" AND {dialect.not_after_now('available_at')} AND seq > 0 ORDER BY seq LIMIT {{}}"
        f"{dialect.take_free_rows}"
    )


def claim_waiting(
    conn: Conn,
    *,
    recipient_id: str,
    session_id: str | None,
    limit: int,
    now: float,
    policy: ClaimPolicy,
    via: Via,
    new_token: Callable[[], str],
    hash_token: Callable[[str], str],
) -> list[Claim]:
    """Claim up to `limit` available messages in send order (expired ones die instead).

    Each claim is a guarded update of the queued row it read, so a message another claimer
    took meanwhile is skipped, never claimed twice."""
    dead_letter_expired(conn, recipient_id, now, policy.message_expiry)
    rows = conn.execute(sql(_claimable(conn)), (recipient_id, now, limit)).fetchall()
    claims: list[Claim] = []
    events: list[tuple[str, dict[str, object]]] = []
    for row in rows:
        message = _message(row)
        taken = delivery.claim(message.attempts, via, now, policy.ack_wait)
        state, attempt, expires_at = taken.state, taken.attempt, taken.expires_at
        token = new_token()
        won = conn.execute(
            sql(
                f"UPDATE messages SET state = {{}}, attempts = {{}} WHERE id = {{}} AND"
                f" {_CLAIMABLE}"
                " AND attempts = {}"
            ),
            (state.value, attempt, message.id, message.attempts),
        ).rowcount
        if not won:
            continue
        _open_claim(conn, hash_token(token), message.id, recipient_id, session_id, taken, via, now)
        claims.append(
            Claim(
                token=token,
                message=attrs.evolve(message, state=state, attempts=attempt),
                attempt=attempt,
                expires_at=expires_at,
            )
        )
        events.append(
            (
                f"message.{state.value}",
                _fields(
                    message.id, message.sender_id, recipient_id, attempt=attempt, via=via.value
                ),
            )
        )
    if events:
        record_events(conn, now, events)
    if claims:  # the last batch delivered: its deepest message is the cause of the next send
        _become_cause(conn, recipient_id, max((c.message for c in claims), key=lambda m: m.hop))
    return claims


def claim_queued(
    conn: Conn,
    queued: Queued,
    *,
    session_id: str | None,
    now: float,
    policy: ClaimPolicy,
    via: Via,
    new_token: Callable[[], str],
    hash_token: Callable[[str], str],
) -> Callable[[], Claim]:
    """The message just queued, claimed at once for the reader waiting on its inbox, when no
    other mail there is claimable or due to expire (its caller checked that under the inbox
    lock): what `claim_waiting` writes for it, without reading anything back. The claim,
    built once the message's seq is read (`Queued.message`)."""
    message = queued.unread
    taken = delivery.claim(message.attempts, via, now, policy.ack_wait)
    token = new_token()
    conn.execute(
        sql("UPDATE messages SET state = {}, attempts = {} WHERE id = {}"),
        (taken.state.value, taken.attempt, message.id),
    )
    recipient_id = message.recipient_id
    _open_claim(conn, hash_token(token), message.id, recipient_id, session_id, taken, via, now)
    fields = _fields(
        message.id, message.sender_id, recipient_id, attempt=taken.attempt, via=via.value
    )
    record_events(conn, now, [(f"message.{taken.state.value}", fields)])
    _become_cause(conn, recipient_id, message)

    def claim() -> Claim:
        claimed = attrs.evolve(queued.message(), state=taken.state, attempts=taken.attempt)
        return Claim(
            token=token, message=claimed, attempt=taken.attempt, expires_at=taken.expires_at
        )

    return claim


def _open_claim(
    conn: Conn,
    token_hash: str,
    message_id: str,
    recipient_id: str,
    session_id: str | None,
    taken: delivery.Claimed,
    via: Via,
    now: float,
) -> None:
    conn.execute(
        sql(
            "INSERT INTO claims (token_hash, message_id, identity_id, session_id, attempt, via,"
            " claimed_at, expires_at, state) VALUES ({}, {}, {}, {}, {}, {}, {}, {}, {})"
        ),
        (
            token_hash, message_id, recipient_id, session_id, taken.attempt, via.value, now,
            taken.expires_at, ClaimState.OPEN.value,
        ),
    )  # fmt: skip


def _become_cause(conn: Conn, recipient_id: str, cause: Message) -> None:
    """The message delivered last (the deepest of its batch) causes the recipient's next send."""
    conn.execute(
        sql("UPDATE identities SET cause_hop = {}, cause_id = {} WHERE id = {}"),
        (cause.hop, cause.id, recipient_id),
    )


def dead_letter_expired(conn: Conn, recipient_id: str, now: float, message_expiry: float) -> int:
    """Unsettled messages older than the expiry become dead letters (`expired`)."""
    # Literal states, not parameters: SQLite uses a partial index only when it can prove
    # the query's condition implies the index's, which it cannot for bound values.
    cutoff = delivery.expiry_cutoff(now, message_expiry)
    expired = [
        (str(row[0]), str(row[1]), int(row[2]))
        for row in conn.execute(
            sql(
                "SELECT id, sender_id, attempts FROM messages WHERE recipient_id = {}"
                f" AND {guard(Step.EXPIRE)} AND sent_at <= {{}}"
            ),
            (recipient_id, cutoff),
        )
    ]
    for message_id, _sender, _attempts in expired:
        conn.execute(
            sql(f"UPDATE claims SET state = {{}} WHERE message_id = {{}} AND {_OPEN}"),
            (_claim_end(Step.EXPIRE), message_id),
        )
        conn.execute(
            sql(
                "UPDATE messages SET state = {}, dead_reason = {}, settled_at = {}"
                f" WHERE id = {{}} AND {guard(Step.EXPIRE)}"
            ),
            (_DEAD, delivery.DeadReason.EXPIRED.value, now, message_id),
        )
    if expired:
        record_events(
            conn,
            now,
            [
                (
                    "message.dead",
                    _fields(m, sender, recipient_id, attempt=attempts, reason="expired"),
                )
                for m, sender, attempts in expired
            ],
        )
    return len(expired)


def dead_letter_inbox(conn: Conn, recipient_id: str, now: float, reason: str) -> int:
    """Every unsettled message of the inbox becomes a dead letter with `reason` (`reaped`,
    `purged`), its open claims expire, and each records `message.dead`. The count."""
    conn.execute(
        sql(f"UPDATE claims SET state = {{}} WHERE identity_id = {{}} AND {_OPEN}"),
        (_claim_end(Step.RETIRE), recipient_id),
    )
    dead = conn.execute(
        sql(
            "UPDATE messages SET state = {}, dead_reason = {}, settled_at = {}"
            f" WHERE recipient_id = {{}} AND {INBOX_INDEXED} AND {guard(Step.RETIRE)}"
            " RETURNING id, sender_id, attempts"
        ),
        (_DEAD, reason, now, recipient_id),
    ).fetchall()
    if dead:
        record_events(
            conn,
            now,
            [
                (
                    "message.dead",
                    _fields(str(m), str(sender), recipient_id, attempt=int(n), reason=reason),
                )
                for m, sender, n in dead
            ],
        )
    return len(dead)


def _fields(
    message_id: str, sender_id: str, recipient_id: str, **extra: object
) -> dict[str, object]:
    """How `message.*` events name a message (small and flat)."""
    return {
        "message_id": message_id,
        "sender_id": sender_id,
        "recipient_id": recipient_id,
        **extra,
    }


def _return_to_queue(
    conn: Conn,
    message_id: str,
    now: float,
    decide: Callable[[int], delivery.Requeued | delivery.Dead],
    *,
    event: str,
    **data: object,
) -> tuple[str, dict[str, object]] | None:
    """A claim that lapsed or was refused: queue the message again, or let it die, as
    `decide` (`delivery.lapsed`, `delivery.refused`) says given its attempts.

    The event to record: `event` with `data` when it waits again, `message.dead`
    (max_attempts) when that was its last attempt; None when it was not out on a claim."""
    row = conn.execute(
        sql(
            f"SELECT state, sender_id, recipient_id, attempts FROM messages WHERE id = {{}} AND"
            f" {_OUT}"
        ),
        (message_id,),
    ).fetchone()
    if row is None:
        return None
    state, sender, recipient, attempts = str(row[0]), str(row[1]), str(row[2]), int(row[3])
    outcome = decide(attempts)
    if isinstance(outcome, delivery.Dead):
        changed = conn.execute(
            sql(
                "UPDATE messages SET state = {}, dead_reason = {}, settled_at = {}"
                " WHERE id = {} AND state = {} AND attempts = {}"
            ),
            (_DEAD, outcome.reason.value, now, message_id, state, attempts),
        ).rowcount
        fields = _fields(message_id, sender, recipient, attempt=attempts, reason=outcome.reason)
        return ("message.dead", fields) if changed else None
    changed = conn.execute(
        sql(
            "UPDATE messages SET state = {}, available_at = {} WHERE id = {} AND state = {}"
            " AND attempts = {}"
        ),
        (_QUEUED, outcome.available_at, message_id, state, attempts),
    ).rowcount
    if not changed:
        return None
    return event, _fields(message_id, sender, recipient, attempt=attempts, **data)


def expire_claims(conn: Conn, recipient_id: str, now: float, max_attempts: int) -> int:
    """Open claims past their ack wait return their messages to the queue at once."""
    dialect = dialect_of(conn)
    rows = conn.execute(
        sql(
            f"SELECT token_hash, message_id FROM claims WHERE identity_id = {{}} AND {_OPEN}"
            f" AND {dialect.not_after_now('expires_at')}{dialect.take_free_rows}"
        ),
        (recipient_id, now),
    ).fetchall()
    events = []
    for token_hash, message_id in rows:
        if _close_open_claim(conn, str(token_hash), Step.LAPSE) is None:
            continue
        event = _return_to_queue(
            conn,
            str(message_id),
            now,
            lambda attempts: delivery.lapsed(attempts, max_attempts, now),
            event="message.requeued",
            reason="ack_wait",
        )
        if event is not None:
            events.append(event)
    if events:
        record_events(conn, now, events)
    return len(rows)


def _close_open_claim(
    conn: Conn, token_hash: str, step: Step, *, identity_id: str | None = None
) -> tuple[str, int] | None:
    """The open claim `token_hash` (of `identity_id`, when given) closed as `step` closes it,
    by a guarded update: its message id and attempt, or None when it was not open (any
    more)."""
    mine = "" if identity_id is None else " AND identity_id = {}"
    end = _claim_end(step)
    row = conn.execute(
        sql(
            f"UPDATE claims SET state = {{}} WHERE token_hash = {{}} AND {_OPEN}{mine}"
            " RETURNING message_id, attempt"
        ),
        (end, token_hash) if identity_id is None else (end, token_hash, identity_id),
    ).fetchone()
    return None if row is None else (str(row[0]), int(row[1]))


def refuse_claims(
    conn: Conn,
    token_hashes: Sequence[str],
    *,
    now: float,
    schedule: delivery.RedeliverySchedule,
    max_attempts: int,
) -> int:
    """Claims the delivery address refused (or could not take): retry on the schedule
    (`delivery.refused`)."""
    refused = 0
    events = []
    for token_hash in token_hashes:
        closed = _close_open_claim(conn, token_hash, Step.REFUSE)
        if closed is None:
            continue
        message_id, attempt = closed
        event = _return_to_queue(
            conn,
            message_id,
            now,
            partial(
                delivery.refused, attempt, max_attempts=max_attempts, now=now, schedule=schedule
            ),
            event="message.refused",
            retry_at=iso(delivery.retry_at(attempt, now, schedule)),
        )
        if event is not None:
            events.append(event)
        refused += 1
    if events:
        record_events(conn, now, events)
    return refused


def release_claims(conn: Conn, identity_id: str, token_hashes: Sequence[str], now: float) -> int:
    """Open claims handed back unshown: the message is waiting again as if never claimed."""
    released = 0
    events = []
    for token_hash in token_hashes:
        closed = _close_open_claim(conn, token_hash, Step.RELEASE, identity_id=identity_id)
        if closed is None:
            continue
        message_id = closed[0]
        out = conn.execute(
            sql(f"SELECT state, attempts, sender_id FROM messages WHERE id = {{}} AND {_OUT}"),
            (message_id,),
        ).fetchone()
        if (
            out is not None
            and conn.execute(
                sql(
                    "UPDATE messages SET state = {}, attempts = {} WHERE id = {} AND state = {}"
                    " AND attempts = {}"
                ),
                (_QUEUED, delivery.released(int(out[1])), message_id, out[0], out[1]),
            ).rowcount
        ):
            fields = _fields(message_id, str(out[2]), identity_id, reason="released")
            events.append(("message.requeued", fields))
        released += 1
    if events:
        record_events(conn, now, events)
    return released


def dead_letter_claims(
    conn: Conn, identity_id: str, token_hashes: Sequence[str], now: float, reason: str
) -> list[str]:
    """Messages out on these open claims of `identity_id` die with `reason` (`unrenderable`:
    a claim met a message its reader cannot be given). Guarded by the claim's own attempt, so
    a message dies once and its attempts are not counted again. The ids that died."""
    dead: list[str] = []
    events = []
    for token_hash in token_hashes:
        closed = _close_open_claim(conn, token_hash, Step.UNRENDERABLE, identity_id=identity_id)
        if closed is None:
            continue
        message_id, attempt = closed
        died = conn.execute(
            sql(
                "UPDATE messages SET state = {}, dead_reason = {}, settled_at = {} WHERE id = {}"
                f" AND {guard(Step.UNRENDERABLE)} AND attempts = {{}} RETURNING sender_id"
            ),
            (_DEAD, reason, now, message_id, attempt),
        ).fetchone()
        if died is None:
            continue
        dead.append(message_id)
        fields = _fields(message_id, str(died[0]), identity_id, attempt=attempt, reason=reason)
        events.append(("message.dead", fields))
    if events:
        record_events(conn, now, events)
    return dead


def acknowledge(
    conn: Conn,
    *,
    identity_id: str,
    tokens: Sequence[str],
    now: float,
    hash_token: Callable[[str], str],
) -> AckResult:
    """Apply each token at most once; say why each other token was not applied."""
    applied: list[str] = []
    not_applied: list[tuple[str, str]] = []
    events: list[tuple[str, dict[str, object]]] = []
    for token in tokens:
        row = conn.execute(
            sql(
                "SELECT c.message_id, c.identity_id, c.state, c.attempt, m.attempts, m.state,"
                " m.sender_id FROM claims c JOIN messages m ON m.id = c.message_id"
                " WHERE c.token_hash = {}"
            ),
            (hash_token(token),),
        ).fetchone()
        if row is None:
            not_applied.append((token, "unknown_token"))
            continue
        message_id, owner, claim_state, attempt, attempts, message_state, sender = row
        refused = delivery.ack(
            caller=identity_id,
            owner=str(owner),
            claim_state=ClaimState(claim_state),
            attempt=int(attempt),
            attempts=int(attempts),
            message_state=MessageState(message_state),
        )
        if refused is None and _close_open_claim(conn, hash_token(token), Step.ACK) is None:
            refused = delivery.NotApplied.EXPIRED  # it lapsed under us
        if refused is not None:
            not_applied.append((token, refused.value))
        else:
            conn.execute(
                sql(
                    "UPDATE messages SET state = {}, settled_at = {} WHERE id = {}"
                    f" AND {guard(Step.ACK)} AND attempts = {{}}"
                ),
                (MessageState.ACKNOWLEDGED.value, now, message_id, attempt),
            )
            applied.append(token)
            events.append(
                (
                    "message.acknowledged",
                    _fields(str(message_id), str(sender), identity_id, attempt=int(attempt)),
                )
            )
    if events:
        record_events(conn, now, events)
    return AckResult(applied, not_applied)


# -- timers and views ------------------------------------------------------------------------


@attrs.frozen
class InboxDue:
    """Where an inbox stands: whether its identity still exists, the next due time the store
    holds for it, and the deadlines the inbox has (see `delivery.next_due`)."""

    exists: bool
    recorded: float | None
    open_claim_deadline: float | None
    next_retry: float | None
    oldest_unsettled_sent_at: float | None
    message_expiry: float

    @property
    def needed(self) -> float | None:
        """The next due time these deadlines make."""
        return delivery.next_due(
            open_claim_deadline=self.open_claim_deadline,
            next_retry=self.next_retry,
            oldest_unsettled_sent_at=self.oldest_unsettled_sent_at,
            message_expiry=self.message_expiry,
        )

    def with_new_mail(self, sent_at: float) -> InboxDue:
        """The inbox once a message sent at `sent_at`, available at once, is queued in it."""
        oldest = self.oldest_unsettled_sent_at
        return attrs.evolve(
            self, oldest_unsettled_sent_at=sent_at if oldest is None else min(oldest, sent_at)
        )


def inbox_due(conn: Conn, recipient_id: str, now: float, message_expiry: float) -> InboxDue:
    """The identity's row and the inbox's three deadlines, in one statement (each deadline an
    index probe, not a scan of the inbox). A retry later than now is one later than its
    message's send, unless the clock went back since: then the oldest message's expiry still
    wakes the inbox."""
    return inbox_due_later(conn, recipient_id, now, message_expiry)()


def inbox_due_later(
    conn: Conn, recipient_id: str, now: float, message_expiry: float
) -> Callable[[], InboxDue]:
    """`inbox_due`, its answer read when called (a backend that batches statements sends
    this one with the next whose answer is read)."""
    cursor = conn.execute(
        sql(
            "SELECT i.id IS NOT NULL, i.next_due,"
            " (SELECT MIN(expires_at) FROM claims WHERE identity_id = {id} AND state = 'open'),"
            " (SELECT MIN(available_at) FROM messages WHERE recipient_id = {id}"
            f"   AND {DELAYED_INDEXED} AND available_at > {{now}}),"
            " (SELECT MIN(sent_at) FROM messages WHERE recipient_id = {id}"
            "   AND state IN ('queued', 'claimed', 'delivered'))"
            " FROM (SELECT CAST({id} AS TEXT) AS wanted) AS k"
            " LEFT JOIN identities AS i ON i.id = k.wanted"
        ),
        {"id": recipient_id, "now": now},
    )

    def read() -> InboxDue:
        exists, recorded, claim_deadline, retry, oldest = cursor.fetchone()
        return InboxDue(
            exists=bool(exists),
            recorded=None if recorded is None else float(recorded),
            open_claim_deadline=None if claim_deadline is None else float(claim_deadline),
            next_retry=None if retry is None else float(retry),
            oldest_unsettled_sent_at=None if oldest is None else float(oldest),
            message_expiry=message_expiry,
        )

    return read


def inbox_counts(conn: Conn, recipient_id: str) -> dict[str, int]:
    counts = {"queued": 0, "claimed": 0, "delivered": 0, "dead": 0}
    for state, count in conn.execute(
        sql(
            f"SELECT state, COUNT(*) FROM messages WHERE recipient_id = {{}} AND {INBOX_INDEXED}"
            " GROUP BY state"
        ),
        (recipient_id,),
    ):
        counts[str(state)] = int(count)
    return counts


def offerable_count(conn: Conn, recipient_id: str, now: float) -> int:
    """The recipient's messages a claim could take at `now` (queued and available)."""
    (count,) = conn.execute(
        sql(
            f"SELECT COUNT(*) FROM messages WHERE recipient_id = {{}} AND {INBOX_INDEXED}"
            f" AND {_CLAIMABLE} AND available_at <= {{}}"
        ),
        (recipient_id, now),
    ).fetchone()
    return int(count)


def waiting_count(conn: Conn, recipient_id: str) -> int:
    (count,) = conn.execute(
        sql(
            f"SELECT COUNT(*) FROM messages WHERE recipient_id = {{}} AND {INBOX_INDEXED}"
            f" AND {_UNSETTLED}"
        ),
        (recipient_id,),
    ).fetchone()
    return int(count)


def history(
    conn: Conn,
    identity_id: str,
    *,
    with_id: str | None,
    thread: str | None,
    limit: int,
) -> list[Message]:
    """The caller's messages, newest first (read-only)."""
    clauses = ["(sender_id = {me} OR recipient_id = {me})"]
    if with_id is not None:
        clauses.append("(sender_id = {other} OR recipient_id = {other})")
    if thread is not None:
        clauses.append("thread = {thread}")
    rows = conn.execute(
        sql(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE {' AND '.join(clauses)}"
            " ORDER BY seq DESC LIMIT {limit}"
        ),
        {"me": identity_id, "other": with_id, "thread": thread, "limit": limit},
    )
    return [_message(row) for row in rows]


def waiting(conn: Conn, recipient_id: str, *, limit: int) -> list[Message]:
    """The recipient's unsettled mail, oldest first, read-only (`pager inbox`)."""
    rows = conn.execute(
        sql(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE recipient_id = {{}}"
            f" AND {_UNSETTLED} ORDER BY seq LIMIT {{}}"
        ),
        (recipient_id, limit),
    )
    return [_message(row) for row in rows]


def sent_by(conn: Conn, sender_id: str, *, limit: int) -> list[Message]:
    """The sender's latest sends, newest first, read-only (`pager sent`)."""
    rows = conn.execute(
        sql(
            f"SELECT {_MESSAGE_COLUMNS} FROM messages WHERE sender_id = {{}}"
            " ORDER BY seq DESC LIMIT {}"
        ),
        (sender_id, limit),
    )
    return [_message(row) for row in rows]
