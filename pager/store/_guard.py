"""The reads behind the loop guard and send rates of SPEC §8.1 (the decision is
pager/domain/loop_guard.py): inside the send's own transaction, so no caller can understate
its hop or race its own count, or read ahead of it and checked again when it writes
(`expect_unchanged`)."""

from __future__ import annotations

from typing import Any

from pager.domain.addressing import PERSON
from pager.domain.delivery import Step
from pager.domain.errors import PagerError
from pager.domain.limits import SendLimits
from pager.domain.loop_guard import (
    HOUR,
    SenderFacts,
    SendOrigin,
    Sent,
    TooDeep,
    chain_reset_budget,
    decide,
    decide_token_page,
    hop_limit_error,
    refused_from_cause_hop,
)
from pager.domain.names import format_address
from pager.domain.read_ahead import InboxDeadlines, KeyRead, NamedNoOne, ReadAhead, StartFacts
from pager.domain.records import Identity
from pager.domain.results import Origin
from pager.store._conn import Conn
from pager.store._delivery_sql import INBOX_INDEXED, guard
from pager.store._dialect import dialect_of
from pager.store._identities import (
    ADDRESSED_COLUMNS,
    IDENTITY_WIDTH,
    SESSION_WIDTH,
    addressed_where,
    attached_to,
    identity_columns,
    identity_of,
    session_columns,
    session_of,
)
from pager.store._messages import message_columns, message_of
from pager.store._sql import sql
from pager.store._tokens import MAILBOX_PREFIX, page_with_token
from pager.store._wake import SETTINGS_WIDTH, settings_columns, settings_of

#: The origins each rate counts, as SQL literals: an agent identity's sends are its own
#: (`agent`) and its `pager run` pages (`script`); a token's and a run's cap count pages alone.
AGENTS = f"'{Origin.AGENT.value}', '{Origin.SCRIPT.value}'"
SCRIPTS = f"'{Origin.SCRIPT.value}'"


def origin_and_hop(
    conn: Conn,
    sender_id: str,
    recipient_id: str,
    now: float,
    limits: SendLimits,
    *,
    script: bool = False,
) -> SendOrigin:
    """The new message's origin, hop and cause, read and decided inside the send's
    transaction, or PagerError `hop_limit` / `rate_limited` (or `unauthenticated` for a
    mailbox token no longer usable)."""
    if sender_id.startswith(MAILBOX_PREFIX):
        page_with_token(conn, sender_id, recipient_id, now)
        # Counted only when limited: the count walks the token's hour of pages.
        pages = _token_pages(conn, sender_id, now) if limits.script_per_hour else NONE_SENT
        return decide_token_page(pages, limits, now)
    counted = limits.agent_per_hour or limits.pair_per_hour or (script and limits.script_per_hour)
    facts = sender_facts(conn, sender_id, recipient_id, now, count=bool(counted))
    decided = decide(facts, limits, now, script=script)
    if isinstance(decided, TooDeep):
        raise too_deep(conn, sender_id, recipient_id, decided, limits)
    return decided


def _token_pages(conn: Conn, token_id: str, now: float) -> Sent:
    """The pages a mailbox token sent in the last hour."""
    count, oldest = conn.execute(
        sql(
            "SELECT COUNT(*), MIN(sent_at) FROM messages WHERE sender_id = {} AND sent_at > {}"
            f" AND origin IN ({SCRIPTS})"
        ),
        (token_id, now - HOUR),
    ).fetchone()
    return Sent(int(count), None if oldest is None else float(oldest))


#: The sender's sends of the last hour (`{from}`, `{since}`) by the origins each rate counts,
#: in one walk of its recent sends (the index by sender and time); the pair's are `PAIR`'s.
_RATES = (
    f"SELECT COUNT(CASE WHEN origin IN ({AGENTS}) THEN 1 END) AS agent,"
    f" MIN(CASE WHEN origin IN ({AGENTS}) THEN sent_at END) AS agent_oldest,"
    f" COUNT(CASE WHEN origin IN ({SCRIPTS}) THEN 1 END) AS script,"
    f" MIN(CASE WHEN origin IN ({SCRIPTS}) THEN sent_at END) AS script_oldest"
    " FROM messages WHERE sender_id = {from} AND sent_at > {since}"
)


def _pair(to: str) -> str:
    """The sender's sends of the last hour to `to` (a column or a parameter)."""
    return (
        f"(SELECT COUNT(*) FROM messages WHERE sender_id = {{from}} AND sent_at > {{since}}"
        f" AND recipient_id = {to} AND origin IN ({AGENTS})),"
        f" (SELECT MIN(sent_at) FROM messages WHERE sender_id = {{from}} AND sent_at > {{since}}"
        f" AND recipient_id = {to} AND origin IN ({AGENTS}))"
    )


#: No sends counted: what a rate that is off reads.
NONE_SENT = Sent(0, None)


def sender_facts(
    conn: Conn, sender_id: str, recipient_id: str, now: float, *, count: bool = True
) -> SenderFacts | None:
    """The sender's chain and, when `count` (a rate limit is on), its sends of the last hour,
    in one statement. With every rate off nothing is counted: that walk grows with each send
    of the hour."""
    if not count:
        chain = conn.execute(
            sql("SELECT implementation, cause_hop, cause_id FROM identities WHERE id = {}"),
            (sender_id,),
        ).fetchone()
        if chain is None:
            return None
        return facts_of((*chain, 0, None, 0, None, 0, None))
    row = conn.execute(
        sql(
            f"SELECT s.implementation, s.cause_hop, s.cause_id, {_pair('{to}')}, r.agent,"
            f" r.agent_oldest, r.script, r.script_oldest FROM identities s, ({_RATES}) AS r"
            " WHERE s.id = {from}"
        ),
        {"from": sender_id, "to": recipient_id, "since": now - HOUR},
    ).fetchone()
    return None if row is None else facts_of(row)


#: The columns `facts_of` reads, in a statement where `s` is the sender's identities row
#: (NULLs when it is gone), `r` its rates (`_RATES`) and `i` the recipient's row.
_SENDER_COLUMNS = (
    f"s.implementation, s.cause_hop, s.cause_id, {_pair('i.id')}, r.agent, r.agent_oldest,"
    " r.script, r.script_oldest"
)


#: How many columns `_SENDER_COLUMNS` holds.
_SENDER_WIDTH = 9


def facts_of(row: Any) -> SenderFacts | None:
    """`_SENDER_COLUMNS` as the decision takes them (None: the sender is gone)."""
    if row[0] is None:
        return None

    def sent(count: object, oldest: object) -> Sent:
        return Sent(int(str(count)), None if oldest is None else float(str(oldest)))

    return SenderFacts(
        implementation=str(row[0]),
        cause_hop=int(row[1] or 0),
        cause_id=None if row[2] is None else str(row[2]),
        pair=sent(row[3], row[4]),
        agent=sent(row[5], row[6]),
        script=sent(row[7], row[8]),
    )


def too_deep(
    conn: Conn, sender_id: str, recipient_id: str, deep: TooDeep, limits: SendLimits
) -> PagerError:
    """The `hop_limit` refusal, naming the chain's senders by address (an identity purged
    since by its id, a page's token by its label), first to last, then the sender and the
    recipient: one statement walks the chain back from its cause, at most `max_hops + 1`
    messages."""
    rows = conn.execute(
        _CHAIN,
        {"cause": deep.cause_id, "longest": limits.max_hops + 1, "from": sender_id,
         "to": recipient_id},
    ).fetchall()  # fmt: skip
    *chain, sender, recipient = chain_names(rows)
    return hop_limit_error(deep, limits.max_hops, [*chain, f"{sender} (you)", recipient])


def chain_names(rows: Any) -> list[str]:
    """The chain's senders as a refusal names them, from rows of (id, alias, workspace slug,
    token label): by address, else a page's token by its label, else by id."""
    return [
        format_address(str(alias), str(slug)) if alias is not None
        else f"{label} (script)" if label is not None
        else str(sender)
        for sender, alias, slug, label in rows
    ]  # fmt: skip


#: The chain of the message `cause` (a column or a parameter), at most `{longest}` messages,
#: as a CTE `chain` of its senders, last first.
def _chain_walk(cause: str) -> str:
    return (
        "WITH RECURSIVE chain (depth, sender_id, cause_id) AS ("
        f" SELECT 1, sender_id, cause_id FROM messages WHERE id = {cause}"
        " UNION ALL SELECT c.depth + 1, m.sender_id, m.cause_id FROM chain c"
        " JOIN messages m ON m.id = c.cause_id WHERE c.depth < {longest})"
    )


#: The rows `chain_names` takes, of `c` (a FROM item with `depth` and `sender_id`), first to
#: last: the columns, then the joins after `c`.
_NAMED = "c.sender_id, ci.alias, cw.slug, t.label"
_NAMED_JOINS = (
    " LEFT JOIN identities ci ON ci.id = c.sender_id"
    " LEFT JOIN workspaces cw ON cw.key = ci.workspace_key"
    " LEFT JOIN mailbox_tokens t ON t.id = c.sender_id ORDER BY c.depth DESC"
)


#: A chain's senders, first to last, then the sender and the recipient (`too_deep`).
_CHAIN = sql(
    _chain_walk("{cause}")
    + f" SELECT {_NAMED} FROM (SELECT depth, sender_id FROM chain UNION ALL SELECT 0, {{from}}"
    f" UNION ALL SELECT -1, {{to}}) AS c{_NAMED_JOINS}"
)


def lock_send(conn: Conn, recipient_id: str, sender_id: str) -> None:
    """Taken first by a send: the recipient's inbox lock, then the sender's, so that two sends
    of one sender (to any recipients, from any broker) decide on its rates one after the
    other (see `Dialect`)."""
    dialect_of(conn).lock_send(conn, recipient_id, sender_id)


#: The SQLSTATE `pager_expect` raises (pg/_schema.py): what a write decided on changed.
STALE_SQLSTATE = "PGR01"


class StaleFacts(Exception):
    """What a send read ahead of its write changed before the write (another send of its
    sender, a claim of its recipient's inbox): nothing was written; decide again."""


def expect_unchanged(
    conn: Conn,
    sender_id: str,
    recipient_id: str,
    read: ReadAhead,
    *,
    key: str | None = None,
    nothing_claimable_at: float | None = None,
) -> None:
    """A statement that fails the write (`StaleFacts`, by `pager_expect`) unless the facts
    the send decided on still hold: the sender's chain and its counts, the
    recipient's row and its inbox's deadlines (`read`), the sender's idempotency `key` as
    read, and (`nothing_claimable_at`, for a claim of the new message alone) that no mail in
    the inbox is claimable at that time. Run under `lock_send`, so no other send of this
    sender or change of this inbox can come between it and the commit. PostgreSQL's
    statement (its function `pager_expect`)."""
    sender = read.sender
    assert sender is not None  # a send from no one was refused before its write
    conn.execute(
        _EXPECTED[key is not None, nothing_claimable_at is not None],
        {
            "from": sender_id,
            "to": recipient_id,
            "since": read.read_at - HOUR,
            "now": read.read_at,
            "hop": sender.cause_hop,
            "cause": sender.cause_id or "",
            "agent": sender.agent.count,
            "script": sender.script.count,
            "due": _or_minus_one(read.inbox.recorded),
            "claim": _or_minus_one(read.inbox.open_claim_deadline),
            "retry": _or_minus_one(read.inbox.next_retry),
            "oldest": _or_minus_one(read.inbox.oldest_unsettled_sent_at),
            "key": key,
            "keyed": "" if read.key is None else read.key.message_id,
            "claim_at": nothing_claimable_at,
        },
    )


def _or_minus_one(value: float | None) -> float:
    return -1.0 if value is None else value


def _deadlines(to: str) -> tuple[str, str, str]:
    """An inbox's deadlines (`to` its identity: a column or a parameter; `{now}` the time they
    are read at), as pager/store/_messages.py `inbox_due` reads them: the earliest open
    claim's, the next retry's, the oldest unsettled message's sending."""
    return (
        f"SELECT MIN(expires_at) FROM claims WHERE identity_id = {to} AND state = 'open'",
        f"SELECT MIN(available_at) FROM messages WHERE recipient_id = {to}"
        " AND state = 'queued' AND available_at > {now}",
        f"SELECT MIN(sent_at) FROM messages WHERE recipient_id = {to}"
        " AND state IN ('queued', 'claimed', 'delivered')",
    )


def _mail_waiting(to: str, at: str) -> str:
    """Whether the inbox of `to` holds mail a claim could take at `at` (each a column or a
    parameter; pager/store/_messages.py `_claimable`)."""
    return (
        f"EXISTS (SELECT 1 FROM messages WHERE recipient_id = {to} AND {INBOX_INDEXED}"
        f" AND {guard(Step.CLAIM)} AND available_at <= {at})"
    )


def _expected(keyed: bool, claiming: bool) -> str:
    """`expect_unchanged`'s statement: with the key's row (`keyed`), and with no mail
    claimable at `{claim_at}` (`claiming`)."""
    claim, retry, oldest = _deadlines("{to}")
    return (
        "SELECT pager_expect("
        " (SELECT COALESCE(cause_hop, 0) FROM identities WHERE id = {from}) = {hop}"
        " AND (SELECT COALESCE(cause_id, '') FROM identities WHERE id = {from}) = {cause}"
        " AND (SELECT COUNT(*) FROM messages WHERE sender_id = {from} AND sent_at > {since}"
        f"  AND origin IN ({AGENTS})) = {{agent}}"
        " AND (SELECT COUNT(*) FROM messages WHERE sender_id = {from} AND sent_at > {since}"
        f"  AND origin IN ({SCRIPTS})) = {{script}}"
        " AND (SELECT COALESCE(next_due, -1) FROM identities WHERE id = {to}) = {due}"
        f" AND COALESCE(({claim}), -1) = {{claim}}"
        f" AND COALESCE(({retry}), -1) = {{retry}}"
        f" AND COALESCE(({oldest}), -1) = {{oldest}}"
        + (
            " AND COALESCE((SELECT message_id FROM idempotency WHERE sender_id = {from}"
            " AND key = {key}), '') = {keyed}"
            if keyed
            else ""
        )
        + (f" AND NOT {_mail_waiting('{to}', '{claim_at}')}" if claiming else "")
        + ")"
    )


#: `expect_unchanged`'s statements, by (keyed, claiming): made once, not per send.
_EXPECTED = {
    (keyed, claiming): sql(_expected(keyed, claiming))
    for keyed in (False, True)
    for claiming in (False, True)
}


#: The sender's idempotency key `:key` (`k`), the message it names (`o`) and the address of
#: that message's recipient (`oi`, `ow`), joined to a statement where `s` is the sender.
_KEY_JOINS = (
    " LEFT JOIN idempotency k ON k.sender_id = {from} AND k.key = {key}"
    " LEFT JOIN messages o ON o.id = k.message_id"
    " LEFT JOIN identities oi ON oi.id = o.recipient_id"
    " LEFT JOIN workspaces ow ON ow.key = oi.workspace_key"
)
_KEY_COLUMNS = f"k.message_id, k.created_at, oi.alias, ow.slug, {message_columns('o')}"

#: What the recipient's actor loads when it starts (`StartFacts`, with `i.next_due` and
#: `i.implementation`), joined to a statement where `i` is the recipient: its attached session
#: (`a`, as pager/store/_identities.py `attached_session` reads it) and the person's launch
#: on mail settings (`ws`, as pager/store/_wake.py `wake_settings` reads them).
_START_JOINS = (
    f" LEFT JOIN sessions a ON a.id = (SELECT id FROM sessions WHERE {attached_to('i.id')})"
    " LEFT JOIN wake_settings ws ON ws.identity_id = i.id"
)
_START_COLUMNS = f"{session_columns('a')}, {settings_columns('ws')}"


def resolve_ahead(
    conn: Conn,
    *,
    agent_id: str | None,
    alias_key: str | None,
    beside: str | None,
    slug: str | None,
    sender_id: str,
    now: float,
    idempotency_key: str | None = None,
    limits: SendLimits | None = None,
    person: bool = False,
) -> tuple[Identity, str, ReadAhead] | NamedNoOne:
    """The identity an address names (as `addressed_identity`) and its workspace's slug,
    with what the send's decision needs (the sender's chain, rates and address, the
    recipient's row and its inbox's deadlines, as of `now`, the sender's `idempotency_key`
    with the message it names, and the chain's senders when its next send may pass the hop
    limit of `limits`), and what the recipient's actor loads when it starts (`StartFacts`),
    in one statement. When no identity answers to the address now, what
    says why in the same statement (`NamedNoOne`; with the person's identity in the
    sender's workspace when `person`: the alias may be the person's name)."""
    where, parameters = addressed_where(
        agent_id=agent_id, alias_key=alias_key, beside=beside, slug=slug
    )
    deadlines = ", ".join(f"({deadline})" for deadline in _deadlines("i.id"))
    keyed = idempotency_key is not None
    waiting = _mail_waiting("i.id", "{now}")
    chain = (
        "CASE WHEN COALESCE(s.cause_hop, 0) >= {chain_from} THEN ARRAY("
        + _chain_walk("s.cause_id")
        + f" SELECT ARRAY[{_NAMED}] FROM chain c{_NAMED_JOINS}) END"
    )
    former, unnamed = "NULL", ""
    if alias_key is not None:  # where a former holder of the alias is looked for
        former = "(SELECT key FROM workspaces WHERE slug = {slug})"
        if slug is None:  # a bare alias: the sender's workspace
            former = "s.workspace_key"
        unnamed = (
            " LEFT JOIN alias_reservations ar ON i.id IS NULL"
            f" AND ar.workspace_key = {former} AND ar.alias_key = {{alias_key}}"
            " LEFT JOIN identities h ON h.id = ar.identity_id"
            " LEFT JOIN workspaces hw ON hw.key = h.workspace_key"
            " LEFT JOIN identities p ON i.id IS NULL AND {person} AND p.id = (SELECT id"
            " FROM identities WHERE workspace_key = s.workspace_key"
            " AND implementation = {person_implementation} ORDER BY created_at, id LIMIT 1)"
        )
    else:
        unnamed = (
            " LEFT JOIN identities h ON false LEFT JOIN workspaces hw ON false"
            " LEFT JOIN identities p ON false"
        )
    row = conn.execute(
        sql(
            f"SELECT {ADDRESSED_COLUMNS}, w.slug, i.next_due, {deadlines}, {waiting},"
            f" s.alias, sw.slug, {_SENDER_COLUMNS}, {chain}, s.workspace_key, {former},"
            f" {identity_columns('h')}, hw.slug, {identity_columns('p')}, {_START_COLUMNS}"
            f"{f', {_KEY_COLUMNS}' if keyed else ''}"
            f" FROM ({_RATES}) AS r LEFT JOIN identities s ON s.id = {{from}}"
            " LEFT JOIN workspaces sw ON sw.key = s.workspace_key"
            f" LEFT JOIN (identities i JOIN workspaces w ON w.key = i.workspace_key) ON {where}"
            f"{_START_JOINS}{unnamed}{_KEY_JOINS if keyed else ''}"
        ),
        {**parameters, "from": sender_id, "since": now - HOUR, "now": now,
         "key": idempotency_key, "person": person, "person_implementation": PERSON,
         "chain_from": None if limits is None else refused_from_cause_hop(limits),
         "longest": 0 if limits is None else limits.max_hops + 1},
    ).fetchone()  # fmt: skip
    identity = None if row[0] is None else identity_of(row)
    at = IDENTITY_WIDTH
    slug_read = row[at]
    recorded, claim, retry, oldest, mail_waiting, sender_alias, sender_slug = row[at + 1 : at + 8]
    facts_at = at + 8
    chain_at = facts_at + _SENDER_WIDTH
    chain_rows, sender_workspace, former_key = row[chain_at : chain_at + 3]
    holder_at = chain_at + 3
    person_at = holder_at + IDENTITY_WIDTH + 1
    start_at = person_at + IDENTITY_WIDTH
    key_at = start_at + SESSION_WIDTH + SETTINGS_WIDTH
    key = None
    if keyed:
        message_id, created_at, to_alias, to_slug = row[key_at : key_at + 4]
        original = None if row[key_at + 5] is None else message_of(row[key_at + 4 :])
        key = KeyRead(
            message_id=str(message_id or ""),
            created_at=_float(created_at),
            original=original,
            original_to=(None if to_alias is None else format_address(str(to_alias), str(to_slug))),
        )
    inbox = InboxDeadlines(
        exists=identity is not None,
        recorded=_float(recorded),
        open_claim_deadline=_float(claim),
        next_retry=_float(retry),
        oldest_unsettled_sent_at=_float(oldest),
    )
    ahead = ReadAhead(
        now,
        facts_of(row[facts_at:chain_at]),
        inbox,
        mail_waiting=bool(mail_waiting),
        key=key,
        sender_address="" if sender_alias is None else format_address(sender_alias, sender_slug),
        recipient_address="" if identity is None else format_address(identity.alias, slug_read),
        chain=None if chain_rows is None else tuple(chain_names(chain_rows)),
        recipient=None
        if identity is None
        else StartFacts(
            next_due=_float(recorded),
            session=session_of(row[start_at:]),
            implementation=identity.implementation,
            wake=settings_of(row[start_at + SESSION_WIDTH :]),
        ),
    )
    if identity is not None:
        return identity, str(slug_read), ahead
    holder = None
    if row[holder_at] is not None:
        holder = identity_of(row[holder_at:]), str(row[holder_at + IDENTITY_WIDTH])
    return NamedNoOne(
        sender_exists=sender_workspace is not None,
        workspace_known=former_key is not None,
        holder=holder,
        person=None if row[person_at] is None else identity_of(row[person_at:]),
        workspace_key=None if sender_workspace is None else str(sender_workspace),
        workspace_slug=None if sender_slug is None else str(sender_slug),
        ahead=ahead,
    )


def _float(value: object) -> float | None:
    return None if value is None else float(str(value))


def start_chain(conn: Conn, identity_id: str, now: float, limits: SendLimits) -> bool:
    """The identity's person typed a prompt: its next send starts a new chain. True when that
    changed something: mail from an agent was delivered to it since the last reset (at most one
    reset per delivered batch). Such resets are budgeted, `chain_resets_per_hour` (0: none),
    refilled evenly over the hour, because an agent can report a prompt it made up: past the
    budget, PagerError `rate_limited` and the chain goes on (its loop guard stops it). 0
    turns the budget off."""
    row = conn.execute(
        sql("SELECT cause_hop, chain_resets, chain_resets_at FROM identities WHERE id = {}"),
        (identity_id,),
    ).fetchone()
    if row is None or not row[0]:  # nothing to reset: no chain, or one a person started
        return False
    level = chain_reset_budget(limits.chain_resets_per_hour, row[1], row[2], now)
    conn.execute(
        sql(
            "UPDATE identities SET cause_hop = NULL, cause_id = NULL, chain_resets = {},"
            " chain_resets_at = {} WHERE id = {}"
        ),
        (level, now, identity_id),
    )
    return True
