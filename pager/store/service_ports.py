"""The store behind ports (ARCHITECTURE.md) for the broker's messaging service
(`pager/service.py`, what the MCP tools and `/v1` call): typed and backend-neutral.

The service never sees a database connection. It reads through `Lookups` (short index reads on
every request, on the last committed state) and `Listings` (reads that scan or page), every call
awaited (the backend decides where it runs: never a network round trip on the event loop), and
makes its few writes of its own
through `Accounts` (each committed before it returns); every other change goes through the
actor that owns it. Values come back as records (`pager/domain/records.py`) and the small
frozen values below; the service builds the JSON. The SQLite backend is
`pager/store/sql_service.py`; `tests/store/test_service_ports.py` holds a backend to it.
"""

from __future__ import annotations

from typing import Protocol

import attrs

from pager.domain.addressing import Resolved
from pager.domain.limits import SendLimits
from pager.domain.mailbox_tokens import MailboxToken
from pager.domain.names import Address
from pager.domain.read_ahead import ReadAhead
from pager.domain.records import Identity, Message
from pager.domain.roster import RosterEntry, RosterKey
from pager.domain.workspace import Workspace

__all__ = [
    "Accounts",
    "Addressed",
    "Listings",
    "Located",
    "Lookups",
    "MailboxTarget",
    "Resolved",
    "RosterPage",
    "SentMessage",
    "TokenView",
    "Waiting",
]


@attrs.frozen
class Located:
    """An identity with its current address and its workspace's path (`whoami`)."""

    identity: Identity
    address: str
    workspace: str


@attrs.frozen
class MailboxTarget:
    """Whom a mailbox token pages: its identity, and the identity the page's `to` names now
    (None when `to` was not given or names no one)."""

    mailbox: Resolved
    named: str | None


@attrs.frozen
class SentMessage:
    """One of the caller's sends, and its recipient's address now."""

    message: Message
    to: str


@attrs.frozen
class Addressed:
    """A message as listings show it: with its sender's and recipient's addresses now (the id
    where an identity no longer has one)."""

    message: Message
    sender: str
    recipient: str


@attrs.frozen
class Waiting:
    """An identity's waiting mail: how much in all, and the oldest of it."""

    count: int
    messages: tuple[Addressed, ...]


@attrs.frozen
class RosterPage:
    """One roster page: the caller's own id (to mark it), the entries in order, and the key of
    the last one shown when more follow."""

    me: str
    entries: tuple[RosterEntry, ...]
    last: RosterKey | None


@attrs.frozen
class TokenView:
    """A mailbox token and its mailbox's address now (never the token itself: only its hash
    is stored)."""

    token: MailboxToken
    mailbox: str


class Lookups(Protocol):
    """Short reads the service makes on every request (a few index lookups each), answered at
    once on the last committed state, without waiting for a write in flight. None commits."""

    async def person(self, workspace_key: str) -> Identity | None:
        """The person's identity in the workspace, if one was made (archived or not)."""
        ...

    async def whoami(self, caller_id: str) -> Located:
        """The caller's identity, address and workspace path; PagerError `ended` when the
        identity no longer exists."""
        ...

    async def resolve(self, caller_id: str, address: Address, text: str) -> Resolved:
        """The identity `address` (as the caller wrote it: `text`) names now; a bare alias is
        looked up in the caller's workspace. PagerError `unknown_recipient`,
        `recipient_alias_changed` (the alias was renamed: its new address in the details), or
        `ended` (a bare alias, and the caller's identity is gone)."""
        ...

    async def resolve_to_send(
        self,
        caller_id: str,
        address: Address,
        text: str,
        *,
        now: float,
        idempotency_key: str | None = None,
        limits: SendLimits | None = None,
        person: str | None = None,
    ) -> tuple[Resolved, ReadAhead | None]:
        """`resolve` for a send from `caller_id`: with it, where the backend reads them
        ahead of the write (`ReadAhead`), the facts the send's decision needs (the sender's
        `idempotency_key` among them, and the chain a refusal by the hop limit of `limits`
        would name), in the same statement; None where the write reads them itself. A bare
        alias that is the `person`'s name and names no one may answer the person's identity
        in the caller's workspace, yet to be made by the send's write (`ReadAhead.makes`);
        where the backend does not, it refuses as `resolve` does and the caller goes on to
        `person_beside`."""
        ...

    async def mailbox_target(self, identity_id: str, to: str | None) -> MailboxTarget:
        """The mailbox `identity_id` pages, and whom `to` names in its workspace, read
        together; PagerError `unknown_recipient` when the identity is gone."""
        ...

    async def mailbox_token(self, token_hash: str) -> MailboxToken | None:
        """The mailbox token with this hash, usable or not; None when there is none."""
        ...

    async def sent_message(self, caller_id: str, message_id: str) -> SentMessage | None:
        """The caller's send `message_id` as it is now; None when there is none or it is
        someone else's."""
        ...

    async def conversation(self, implementation: str, conversation_key: str) -> str | None:
        """The identity a harness conversation is bound to, if any."""
        ...


class Listings(Protocol):
    """Reads that scan or page, each one consistent view, awaited off the event loop. None
    commits."""

    async def roster(
        self, caller_id: str, *, everywhere: bool, limit: int, after: RosterKey | None
    ) -> RosterPage:
        """Up to `limit` identities that are not archived, of the caller's workspace (every
        workspace: `everywhere`), by workspace slug then alias after the key `after`, with
        their waiting counts. Never waits for a write, nor holds one up. PagerError `ended`
        when the caller's identity is gone."""
        ...

    async def history(
        self, caller_id: str, *, with_: str | None, thread: str | None, limit: int
    ) -> list[Addressed]:
        """The caller's latest messages, sent and received, newest first; only those
        exchanged with the identity `with_` names (a renamed alias still finds its holder),
        or of `thread`, when given. PagerError `unknown_recipient` for a `with_` that names
        no one, `ended` for a bare alias when the caller's identity is gone."""
        ...

    async def waiting(self, identity_id: str, *, limit: int) -> Waiting:
        """The identity's waiting mail, oldest first, without claiming it."""
        ...

    async def sent(self, identity_id: str, *, limit: int) -> list[Addressed]:
        """The identity's latest sends with their delivery state, newest first."""
        ...

    async def tokens(self, *, revoked: bool) -> list[TokenView]:
        """Every mailbox token, oldest first; revoked ones only when `revoked`."""
        ...


class Accounts(Protocol):
    """The few writes the service makes itself; each commits before it returns."""

    async def person(self, workspace: Workspace, alias: str, *, now: float) -> Identity:
        """The person's durable identity in `workspace`, made on first use with `alias`; its
        use counts as activity and shows it again if it was archived. PagerError
        `alias_conflict` when an agent holds `alias` there or it is reserved for another."""
        ...

    async def person_beside(self, caller_id: str, alias: str, *, now: float) -> Resolved:
        """The person's identity in the caller's workspace as a recipient, made on first use
        with `alias` as `person` makes it (mail to the person's name from a workspace where
        the person has not run a command yet). PagerError `ended` when the caller is gone,
        `alias_conflict` as `person`."""
        ...

    async def bind_conversation(
        self,
        implementation: str,
        conversation_key: str,
        identity_id: str,
        *,
        session_id: str | None = None,
    ) -> None:
        """Bind a harness conversation to the identity; it is also the conversation of
        `session_id` when that session named none (a wake run resumes it: docs/wake.md)."""
        ...

    async def create_token(
        self,
        person_id: str,
        address: Address,
        text: str,
        *,
        token_id: str,
        token_hash: str,
        label: str,
        now: float,
        expires_at: float | None,
    ) -> TokenView:
        """A new mailbox token (stored by its hash) for the identity `address` names (as
        written: `text`; a bare alias in the person's workspace). PagerError as for
        `Lookups.resolve`."""
        ...

    async def revoke_token(self, token_id: str, *, now: float) -> TokenView:
        """Revoke a mailbox token (again is a no-op); PagerError `not_found` for an unknown
        id."""
        ...
