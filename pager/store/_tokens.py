"""Mailbox tokens (SPEC §8.2): sync functions on a connection, run inside one checkpoint
transaction each; none of them commits.

A token pages one identity, its mailbox, and nothing else. Only its `hash_token` digest is
stored. Revoking keeps the row (so the pages it sent still show its label); purging or reaping
the identity deletes its tokens (ON DELETE CASCADE).
"""

from __future__ import annotations

from typing import Any

import attrs

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.mailbox_tokens import UNUSABLE, MailboxToken
from pager.store._conn import Conn
from pager.store._sql import sql

#: A mailbox token id's prefix: a page's sender id is its token's id.
MAILBOX_PREFIX = "mbx_"


_COLUMNS = "id, identity_id, label, created_at, last_used_at, expires_at, revoked_at"


def _token(row: Any) -> MailboxToken:
    return MailboxToken(
        id=str(row[0]),
        identity_id=str(row[1]),
        label=str(row[2]),
        created_at=float(row[3]),
        last_used_at=None if row[4] is None else float(row[4]),
        expires_at=None if row[5] is None else float(row[5]),
        revoked_at=None if row[6] is None else float(row[6]),
    )


def insert_mailbox_token(
    conn: Conn,
    *,
    token_id: str,
    token_hash: str,
    identity_id: str,
    label: str,
    now: float,
    expires_at: float | None,
) -> MailboxToken:
    conn.execute(
        sql(
            f"INSERT INTO mailbox_tokens (token_hash, {_COLUMNS})"
            " VALUES ({}, {}, {}, {}, {}, NULL, {}, NULL)"
        ),
        (token_hash, token_id, identity_id, label, now, expires_at),
    )
    return MailboxToken(token_id, identity_id, label, now, None, expires_at, None)


def mailbox_token_by_hash(conn: Conn, token_hash: str) -> MailboxToken | None:
    row = conn.execute(
        sql(f"SELECT {_COLUMNS} FROM mailbox_tokens WHERE token_hash = {{}}"), (token_hash,)
    ).fetchone()
    return None if row is None else _token(row)


def get_mailbox_token(conn: Conn, token_id: str) -> MailboxToken | None:
    row = conn.execute(
        sql(f"SELECT {_COLUMNS} FROM mailbox_tokens WHERE id = {{}}"), (token_id,)
    ).fetchone()
    return None if row is None else _token(row)


def list_mailbox_tokens(conn: Conn, *, revoked: bool) -> list[MailboxToken]:
    """Every token, oldest first; revoked ones only when `revoked`."""
    where = "" if revoked else " WHERE revoked_at IS NULL"
    rows = conn.execute(
        sql(f"SELECT {_COLUMNS} FROM mailbox_tokens{where} ORDER BY created_at, id")
    )
    return [_token(row) for row in rows]


def revoke_mailbox_token(conn: Conn, token_id: str, now: float) -> MailboxToken:
    """Revoke a token (again is a no-op); PagerError `not_found` for an unknown id."""
    token = get_mailbox_token(conn, token_id)
    if token is None:
        raise PagerError(
            ErrorCode.NOT_FOUND,
            f"no mailbox token {token_id!r}; `pager token list` shows their ids",
        )
    if token.revoked_at is None:
        conn.execute(
            sql("UPDATE mailbox_tokens SET revoked_at = {} WHERE id = {}"), (now, token_id)
        )
        token = attrs.evolve(token, revoked_at=now)
    return token


def page_with_token(conn: Conn, token_id: str, recipient_id: str, now: float) -> None:
    """Inside the page's own transaction: the token still pages this recipient (it was not
    revoked or its identity purged since the request was authenticated), and it is used now.
    PagerError `unauthenticated` otherwise."""
    token = get_mailbox_token(conn, token_id)
    if token is None or not token.usable(now) or token.identity_id != recipient_id:
        raise PagerError(ErrorCode.UNAUTHENTICATED, UNUSABLE)
    conn.execute(sql("UPDATE mailbox_tokens SET last_used_at = {} WHERE id = {}"), (now, token_id))
