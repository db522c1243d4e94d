"""The loop guard and send rates of SPEC §8.1, decided inside the send's own transaction (so
no caller can understate its hop or race its own count)."""

from __future__ import annotations

import math

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.store._conn import Conn
from pager.store._identities import addresses
from pager.store._tokens import MAILBOX_PREFIX, page_with_token

HUMAN, AGENT, SCRIPT = "human", "agent", "script"
#: The implementation of the person's identity (SPEC §4.2).
PERSON_IMPLEMENTATION = "human"
HOUR = 3600.0
#: The origins each rate counts, as SQL literals: an agent identity's sends are its own
#: (`agent`) and its `pager run` pages (`script`); a token's and a run's cap count pages alone.
AGENTS = "'agent', 'script'"
SCRIPTS = "'script'"


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
        if limits.script_per_hour:  # counted only when limited: the count walks the hour
            _within_rate(limits.script_per_hour, _token_pages(conn, sender_id, now), now,
                         "this token sent")  # fmt: skip
        return SendOrigin(SCRIPT, 0, None)
    counted = limits.agent_per_hour or limits.pair_per_hour or (script and limits.script_per_hour)
    sender = _sender(conn, sender_id, recipient_id, now, count=bool(counted))
    if sender is None:
        raise PagerError(ErrorCode.ENDED, "the sending identity no longer exists (purged)")
    if script:
        _within_rate(limits.script_per_hour, sender.script, now, "you paged")
    if sender.implementation == PERSON_IMPLEMENTATION:
        return SendOrigin(SCRIPT, 0, None) if script else SendOrigin(HUMAN, 0, None)
    hop = 1 + sender.cause_hop
    if not script:  # a run-page starts a chain: no hop to check
        _within_hops(conn, sender_id, recipient_id, hop, sender.cause_id, limits)
    # An agent's sends and its `pager run` pages share its budgets: a run-page starts no
    # chain, but it is still this agent writing to that recipient.
    _within_rate(limits.agent_per_hour, sender.agent, now, "you sent")
    _within_rate(limits.pair_per_hour, sender.pair, now, "you sent this recipient")
    if script:
        return SendOrigin(SCRIPT, 0, None)
    return SendOrigin(AGENT, hop, sender.cause_id)


@attrs.frozen
class _Sent:
    """How many messages of a kind were sent in the last hour, and when the oldest was."""

    count: int
    oldest: float | None


@attrs.frozen
class _Sender:
    implementation: str
    cause_hop: int
    cause_id: str | None
    agent: _Sent  # its sends and run-pages (origins agent and script)
    pair: _Sent  # the same, to this recipient
    script: _Sent  # its run-pages


def _token_pages(conn: Conn, token_id: str, now: float) -> _Sent:
    """The pages a mailbox token sent in the last hour."""
    count, oldest = conn.execute(
        "SELECT COUNT(*), MIN(sent_at) FROM messages WHERE sender_id = ? AND sent_at > ?"
        f" AND origin IN ({SCRIPTS})",
        (token_id, now - HOUR),
    ).fetchone()
    return _Sent(int(count), None if oldest is None else float(oldest))


def _sender(
    conn: Conn, sender_id: str, recipient_id: str, now: float, *, count: bool
) -> _Sender | None:
    """The sender's chain and, when `count` (a rate limit is on), its sends of the last hour,
    in one statement (one walk of its recent sends, on the index by sender and time). With
    every rate off nothing is counted: that walk grows with each send of the hour."""
    if not count:
        row = conn.execute(
            "SELECT implementation, cause_hop, cause_id FROM identities WHERE id = ?",
            (sender_id,),
        ).fetchone()
        return None if row is None else _chain_of(row, _NONE_SENT, _NONE_SENT, _NONE_SENT)
    row = conn.execute(
        "SELECT i.implementation, i.cause_hop, i.cause_id, r.agent, r.agent_oldest, r.pair,"
        " r.pair_oldest, r.script, r.script_oldest FROM identities i,"
        f" (SELECT COUNT(CASE WHEN origin IN ({AGENTS}) THEN 1 END) AS agent,"
        f"  MIN(CASE WHEN origin IN ({AGENTS}) THEN sent_at END) AS agent_oldest,"
        f"  COUNT(CASE WHEN origin IN ({AGENTS}) AND recipient_id = :to THEN 1 END) AS pair,"
        f"  MIN(CASE WHEN origin IN ({AGENTS}) AND recipient_id = :to THEN sent_at END)"
        "   AS pair_oldest,"
        f"  COUNT(CASE WHEN origin IN ({SCRIPTS}) THEN 1 END) AS script,"
        f"  MIN(CASE WHEN origin IN ({SCRIPTS}) THEN sent_at END) AS script_oldest"
        "  FROM messages WHERE sender_id = :from AND sent_at > :since) AS r"
        " WHERE i.id = :from",
        {"from": sender_id, "to": recipient_id, "since": now - HOUR},
    ).fetchone()
    if row is None:
        return None

    def sent(count: object, oldest: object) -> _Sent:
        return _Sent(int(str(count)), None if oldest is None else float(str(oldest)))

    return _chain_of(row, sent(row[3], row[4]), sent(row[5], row[6]), sent(row[7], row[8]))


#: The sends of an hour not counted (their limit is off).
_NONE_SENT = _Sent(0, None)


def _chain_of(row: tuple[object, ...], agent: _Sent, pair: _Sent, script: _Sent) -> _Sender:
    return _Sender(
        implementation=str(row[0]),
        cause_hop=int(str(row[1] or 0)),
        cause_id=None if row[2] is None else str(row[2]),
        agent=agent,
        pair=pair,
        script=script,
    )


def _within_hops(
    conn: Conn, sender_id: str, recipient_id: str, hop: int, cause_id: object, limits: SendLimits
) -> None:
    """PagerError `hop_limit` when a send at `hop` would make the chain too deep."""
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


def _within_rate(limit: int, sent: _Sent, now: float, who: str) -> None:
    """PagerError `rate_limited` when `sent` reached `limit` in the last hour (0: no limit)."""
    if not limit or sent.count < limit:
        return
    oldest = now if sent.oldest is None else sent.oldest
    retry = max(1, math.ceil(oldest + HOUR - now))
    raise PagerError(
        ErrorCode.RATE_LIMITED,
        f"not sent: {who} {sent.count} messages in the last hour (the limit is {limit})."
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


def start_chain(conn: Conn, identity_id: str, now: float, limits: SendLimits) -> bool:
    """The identity's person typed a prompt: its next send starts a new chain. True when that
    changed something: mail from an agent was delivered to it since the last reset (at most one
    reset per delivered batch). Such resets are budgeted, `chain_resets_per_hour` (0: none),
    refilled evenly over the hour, because an agent can report a prompt it made up: past the
    budget, PagerError `rate_limited` and the chain goes on (its loop guard stops it). 0
    turns the budget off."""
    row = conn.execute(
        "SELECT cause_hop, chain_resets, chain_resets_at FROM identities WHERE id = ?",
        (identity_id,),
    ).fetchone()
    if row is None or not row[0]:  # nothing to reset: no chain, or one a person started
        return False
    per_hour = limits.chain_resets_per_hour
    level: float | None = None  # no budget kept while the limit is off
    if per_hour:
        level = float(per_hour)
        if row[1] is not None:
            level = min(level, float(row[1]) + (now - float(row[2])) * per_hour / HOUR)
        if level < 1:
            retry = max(1, math.ceil((1 - level) * HOUR / per_hour))
            raise PagerError(
                ErrorCode.RATE_LIMITED,
                f"the chain was not started again: {per_hour} prompts an hour restart this"
                f" agent's chain after mail from agents, and it used them (the loop guard"
                f" counts on from where it is). It can restart in {retry} s.",
                retry_after_s=retry,
                limit=per_hour,
            )
    conn.execute(
        "UPDATE identities SET cause_hop = NULL, cause_id = NULL, chain_resets = ?,"
        " chain_resets_at = ? WHERE id = ?",
        (None if level is None else level - 1, now, identity_id),
    )
    return True
