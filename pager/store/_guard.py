"""The loop guard and send rates of SPEC §8.1, decided inside the send's own transaction (so
no caller can understate its hop or race its own count)."""

from __future__ import annotations

import math

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.store._conn import Conn
from pager.store._identities import addresses
from pager.store._tokens import MAILBOX_PREFIX, page_with_token

HUMAN, AGENT, SCRIPT = "human", "agent", "script"
#: The implementation of the person's identity (SPEC §4.2).
PERSON_IMPLEMENTATION = "human"
HOUR = 3600.0


@attrs.frozen
class SendLimits:
    """SPEC §8.1's limits (0: off)."""

    max_hops: int = 3
    agent_per_hour: int = 120
    pair_per_hour: int = 60
    script_per_hour: int = 600  # pages per mailbox token, or per identity's `pager run`


@attrs.frozen
class SendOrigin:
    """Where a new message stands in its chain (SPEC §8.1)."""

    origin: str
    hop: int
    cause_id: str | None  # the message whose delivery led to this send


def origin_and_hop(
    conn: Conn,
    sender_id: str,
    recipient_id: str,
    now: float,
    limits: SendLimits,
    *,
    script: bool = False,
) -> SendOrigin:
    """The new message's origin, hop and cause, or PagerError `hop_limit` / `rate_limited`
    (or `unauthenticated` for a mailbox token no longer usable). `script`: a page about a job
    (`pager run`), which starts a chain like a person's message."""
    if sender_id.startswith(MAILBOX_PREFIX):
        page_with_token(conn, sender_id, recipient_id, now)
        _within_rate(conn, limits.script_per_hour, "sender_id = ?", (sender_id,), SCRIPT, now,
                     "this token sent")  # fmt: skip
        return SendOrigin(SCRIPT, 0, None)
    row = conn.execute(
        "SELECT implementation, cause_hop, cause_id FROM identities WHERE id = ?", (sender_id,)
    ).fetchone()
    if row is None:
        raise PagerError(ErrorCode.ENDED, "the sending identity no longer exists (purged)")
    implementation, cause_hop, cause_id = row
    if script:
        _within_rate(conn, limits.script_per_hour, "sender_id = ?", (sender_id,), SCRIPT, now,
                     "you paged")  # fmt: skip
        return SendOrigin(SCRIPT, 0, None)
    if implementation == PERSON_IMPLEMENTATION:
        return SendOrigin(HUMAN, 0, None)
    hop = 1 + int(cause_hop or 0)
    if limits.max_hops and hop > limits.max_hops:
        ends = addresses(conn, (sender_id, recipient_id))
        chain = [
            *_chain(conn, cause_id, limits.max_hops + 1),
            f"{ends.get(sender_id, sender_id)} (you)",
            ends.get(recipient_id, recipient_id),
        ]
        raise PagerError(
            ErrorCode.HOP_LIMIT,
            f"not sent: this would be message {hop} of a chain in which agents answer each"
            f" other without a person in between ({' → '.join(chain)}; the limit is"
            f" {limits.max_hops}). Ask your person whether to go on; once they type a prompt"
            " to you, the chain starts again.",
            hop=hop,
            max_hops=limits.max_hops,
            chain=chain,
        )
    _within_rate(conn, limits.agent_per_hour, "sender_id = ?", (sender_id,), AGENT, now,
                 "you sent")  # fmt: skip
    _within_rate(conn, limits.pair_per_hour, "sender_id = ? AND recipient_id = ?",
                 (sender_id, recipient_id), AGENT, now, "you sent this recipient")  # fmt: skip
    return SendOrigin(AGENT, hop, None if cause_id is None else str(cause_id))


def _within_rate(
    conn: Conn,
    limit: int,
    where: str,
    params: tuple[str, ...],
    origin: str,
    now: float,
    who: str,
) -> None:
    """PagerError `rate_limited` when the sends of `origin` that `where` picks reached `limit`
    in the last hour (0: no limit)."""
    if not limit:
        return
    count, oldest = conn.execute(
        f"SELECT COUNT(*), MIN(sent_at) FROM messages WHERE {where} AND sent_at > ? AND origin = ?",
        (*params, now - HOUR, origin),
    ).fetchone()
    if count >= limit:
        retry = max(1, math.ceil(float(oldest) + HOUR - now))
        raise PagerError(
            ErrorCode.RATE_LIMITED,
            f"not sent: {who} {count} messages in the last hour (the limit is {limit})."
            f" Wait {retry} s, and ask your person whether this many are needed.",
            retry_after_s=retry,
            limit=limit,
        )


def _chain(conn: Conn, cause_id: object, longest: int) -> list[str]:
    """The senders of the chain that ends in message `cause_id`, first to last, by address
    (an identity purged since by its id); at most `longest` of them."""
    senders: list[str] = []
    while cause_id is not None and len(senders) < longest:
        row = conn.execute(
            "SELECT sender_id, cause_id FROM messages WHERE id = ?", (cause_id,)
        ).fetchone()
        if row is None:
            break
        senders.append(str(row[0]))
        cause_id = row[1]
    known = addresses(conn, senders)
    return [known.get(sender, sender) for sender in reversed(senders)]


def reset_cause(conn: Conn, identity_id: str) -> None:
    """The identity's person typed a prompt: its next send starts a new chain."""
    conn.execute(
        "UPDATE identities SET cause_hop = NULL, cause_id = NULL WHERE id = ?", (identity_id,)
    )
