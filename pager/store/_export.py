"""The JSON Lines export (SPEC §4.1 `pager export`, §6 `GET /v1/export`): one record per
identity, then one per message (with its origin, hop and cause, SPEC §8.1, and a page's
fields, §8.2), each with its format
version `v`. A generator over one read
transaction, so a caller can stream any size in constant memory (it pulls a batch at a time)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from pager.domain.clock import iso
from pager.domain.json_bounds import loads_stored
from pager.domain.names import format_address
from pager.store._conn import Conn
from pager.store._sql import sql

#: The record format. Readers must ignore fields they do not know; a change that removes or
#: redefines a field raises it.
EXPORT_VERSION = 1


def export_records(conn: Conn, *, since: float | None = None) -> Iterator[Any]:
    """Every identity, then every message (sent at or after `since`, oldest first)."""
    identities = conn.execute(
        sql(
            "SELECT i.id, i.alias, i.durable, i.implementation, i.created_at, i.last_seen,"
            " i.archived_at, w.slug, w.path FROM identities i"
            " JOIN workspaces w ON w.key = i.workspace_key ORDER BY i.created_at, i.id"
        )
    )
    for row in identities:
        yield {
            "v": EXPORT_VERSION,
            "kind": "identity",
            "agent_id": row[0],
            "alias": row[1],
            "address": format_address(row[1], row[7]),
            "durable": bool(row[2]),
            "implementation": row[3],
            "workspace": row[8],
            "created_at": iso(row[4]),
            "last_seen": iso(row[5]),
            "archived_at": iso(row[6]),
        }
    messages = conn.execute(
        sql(
            "SELECT m.id, m.sender_id, m.recipient_id, m.body, m.thread, m.reply_to, m.sent_at,"
            " m.state, m.attempts, m.dead_reason, m.settled_at,"
            " s.alias, sw.slug, r.alias, rw.slug, m.origin, m.hop, m.cause_id, m.fields, t.label"
            " FROM messages m"
            " LEFT JOIN identities s ON s.id = m.sender_id"
            " LEFT JOIN mailbox_tokens t ON t.id = m.sender_id"
            " LEFT JOIN workspaces sw ON sw.key = s.workspace_key"
            " LEFT JOIN identities r ON r.id = m.recipient_id"
            " LEFT JOIN workspaces rw ON rw.key = r.workspace_key"
            " WHERE m.sent_at >= {} ORDER BY m.seq"
        ),
        (since if since is not None else float("-inf"),),
    )
    for row in messages:
        yield {
            "v": EXPORT_VERSION,
            "kind": "message",
            "message_id": row[0],
            "from": row[1],
            "from_address": _sender_address(row[11], row[12], row[19]),
            "to": row[2],
            "to_address": None if row[13] is None else format_address(row[13], row[14]),
            "body": row[3],
            "thread": row[4],
            "reply_to": row[5],
            "sent_at": iso(row[6]),
            "state": row[7],
            "attempts": row[8],
            "dead_reason": row[9],
            "settled_at": iso(row[10]),
            "origin": row[15],
            "hop": row[16],
            "cause": row[17],  # the message whose delivery led to this send (SPEC §8.1)
            "fields": None if row[18] is None else loads_stored(row[18]),  # a page's (§8.2)
        }


def _sender_address(alias: str | None, slug: str | None, token_label: str | None) -> str | None:
    """An identity's address, a mailbox token's `<label> (script)` (SPEC §8.2), or None for
    a sender purged since."""
    if alias is not None and slug is not None:
        return format_address(alias, slug)
    return None if token_label is None else f"{token_label} (script)"
