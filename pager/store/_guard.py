"""The loop guard and send rates of SPEC §8.1, decided inside the send's own transaction (so
no caller can understate its hop or race its own count)."""

from __future__ import annotations

import math
import sqlite3

import attrs

from pager.domain.errors import ErrorCode, PagerError

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


def origin_and_hop(
    conn: sqlite3.Connection, sender_id: str, recipient_id: str, now: float, limits: SendLimits
) -> tuple[str, int]:
    """The new message's origin and hop, or PagerError `hop_limit` / `rate_limited`."""
    row = conn.execute(
        "SELECT implementation, cause_hop FROM identities WHERE id = ?", (sender_id,)
    ).fetchone()
    if row is None:
        raise PagerError(ErrorCode.ENDED, "the sending identity no longer exists (purged)")
    implementation, cause = row
    if implementation == PERSON_IMPLEMENTATION:
        return HUMAN, 0
    hop = 1 + int(cause or 0)
    if limits.max_hops and hop > limits.max_hops:
        raise PagerError(
            ErrorCode.HOP_LIMIT,
            f"not sent: this would be message {hop} of a chain in which agents answer each"
            f" other without a person in between (the limit is {limits.max_hops}). Ask your"
            " person whether to go on; once they type a prompt to you, the chain starts again.",
            hop=hop,
            max_hops=limits.max_hops,
        )
    since = now - HOUR
    checks = (
        (limits.agent_per_hour, "sender_id = ?", (sender_id,), "you sent"),
        (
            limits.pair_per_hour,
            "sender_id = ? AND recipient_id = ?",
            (sender_id, recipient_id),
            "you sent this recipient",
        ),
    )
    for limit, where, params, who in checks:
        if not limit:
            continue
        count, oldest = conn.execute(
            f"SELECT COUNT(*), MIN(sent_at) FROM messages WHERE {where}"
            " AND sent_at > ? AND origin = 'agent'",
            (*params, since),
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
    return AGENT, hop


def reset_cause(conn: sqlite3.Connection, identity_id: str) -> None:
    """The identity's person typed a prompt: its next send starts a new chain."""
    conn.execute("UPDATE identities SET cause_hop = NULL WHERE id = ?", (identity_id,))
