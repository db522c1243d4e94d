"""The messaging service's ports (`pager/store/service_ports.py`) over either engine's writer.

Each call is one function on a connection, on the connection it has always used (as SQLite's
writer runs them; PostgreSQL's pg/_writer.py keeps the same calls): lookups on the writer's
read-only side connection, at once on the event loop (`Checkpoint.lookup`); the roster on the
service's own read-only connection in a worker thread (`ReadViews.read`: it never waits for a
write, nor holds one up); the other listings through the writer's own connection in its
worker thread (`Checkpoint.read`); writes through the one writer, committed before the call
returns (`Checkpoint.write`).
"""

from __future__ import annotations

from typing import NoReturn, TypeVar

import attrs

from pager.domain import addressing
from pager.domain import identity_rules as rules
from pager.domain.addressing import PERSON
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.limits import SendLimits
from pager.domain.mailbox_tokens import MailboxToken
from pager.domain.names import Address, alias_key, format_address, parse_address
from pager.domain.read_ahead import MadeBySend, NamedNoOne, ReadAhead, StartFacts
from pager.domain.records import Identity, Message
from pager.domain.roster import RosterKey
from pager.domain.workspace import Workspace
from pager.store import messaging as ms
from pager.store import views
from pager.store._conn import Conn
from pager.store._registration import person_identity
from pager.store.service_ports import (
    Addressed,
    Located,
    MailboxTarget,
    Resolved,
    RosterPage,
    SentMessage,
    TokenView,
    Waiting,
)
from pager.store.sql_ports import Reads, Writer

T = TypeVar("T")


class SqlLookups:
    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    async def person(self, workspace_key: str) -> Identity | None:
        return await self._writer.lookup(
            lambda conn: ms.identity_of_implementation(conn, workspace_key, PERSON)
        )

    async def whoami(self, caller_id: str) -> Located:
        def read(conn: Conn) -> Located:
            me = _me(conn, caller_id)
            address = format_address(me.alias, ms.workspace_slug(conn, me.workspace_key))
            return Located(me, address, ms.workspace_path(conn, me.workspace_key))

        return await self._writer.lookup(read)

    async def resolve(self, caller_id: str, address: Address, text: str) -> Resolved:
        return await self._writer.lookup(lambda conn: _resolve(conn, caller_id, address, text))

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
        if not self._writer.reads_ahead:
            return await self.resolve(caller_id, address, text), None

        def read(conn: Conn) -> tuple[Resolved, ReadAhead | None]:
            lookup = addressing.lookup_of(address, caller_id)
            found = ms.resolve_ahead(
                conn,
                agent_id=lookup.agent_id,
                alias_key=lookup.alias_key,
                beside=lookup.beside,
                slug=lookup.slug,
                sender_id=caller_id,
                now=now,
                idempotency_key=idempotency_key,
                limits=limits,
                person=person is not None,
            )
            if isinstance(found, NamedNoOne):  # renamed, unknown or gone: as `resolve` says
                try:
                    _not_named(found, address, text)
                except PagerError as refused:
                    made = _person_made(found, address, refused, person, now)
                    if made is None:
                        raise
                    return made
            identity, _, ahead = found
            return Resolved(identity.id, ahead.recipient_address, identity.implementation), ahead

        return await self._writer.lookup(read)

    async def mailbox_target(self, identity_id: str, to: str | None) -> MailboxTarget:
        def read(conn: Conn) -> MailboxTarget:
            mine = _resolve(conn, identity_id, parse_address(identity_id), identity_id)
            return MailboxTarget(mine, None if to is None else _named(conn, identity_id, to))

        return await self._writer.lookup(read)

    async def mailbox_token(self, token_hash: str) -> MailboxToken | None:
        return await self._writer.lookup(lambda conn: ms.mailbox_token_by_hash(conn, token_hash))

    async def sent_message(self, caller_id: str, message_id: str) -> SentMessage | None:
        def read(conn: Conn) -> SentMessage | None:
            message = ms.get_message(conn, message_id)
            if message is None or message.sender_id != caller_id:
                return None
            known = ms.addresses(conn, [message.recipient_id])
            return SentMessage(message, known.get(message.recipient_id, message.recipient_id))

        return await self._writer.lookup(read)

    async def conversation(self, implementation: str, conversation_key: str) -> str | None:
        return await self._writer.lookup(
            lambda conn: ms.identity_of_conversation(conn, implementation, conversation_key)
        )


class SqlListings:
    """Every listing reads on the read side (its own read-only connection, one consistent
    snapshot per call): a page never waits for a commit, nor holds one up."""

    def __init__(self, reads: Reads) -> None:
        self._reads = reads

    async def roster(
        self, caller_id: str, *, everywhere: bool, limit: int, after: RosterKey | None
    ) -> RosterPage:
        def read(conn: Conn) -> RosterPage:
            me = _me(conn, caller_id)
            entries, last = views.roster(
                conn,
                workspace_key=None if everywhere else me.workspace_key,
                limit=limit,
                after=after,
            )
            return RosterPage(me.id, tuple(entries), last)

        return await self._reads.read(read)

    async def history(
        self, caller_id: str, *, with_: str | None, thread: str | None, limit: int
    ) -> list[Addressed]:
        def read(conn: Conn) -> list[Addressed]:
            other = None
            if with_ is not None:
                other = _resolve(conn, caller_id, parse_address(with_), with_, history=True).id
            messages = ms.history(conn, caller_id, with_id=other, thread=thread, limit=limit)
            return _addressed(conn, messages)

        return await self._reads.read(read)

    async def waiting(self, identity_id: str, *, limit: int) -> Waiting:
        def read(conn: Conn) -> Waiting:
            messages = ms.waiting(conn, identity_id, limit=limit)
            count = ms.waiting_count(conn, identity_id)
            return Waiting(count, tuple(_addressed(conn, messages)))

        return await self._reads.read(read)

    async def sent(self, identity_id: str, *, limit: int) -> list[Addressed]:
        return await self._reads.read(
            lambda conn: _addressed(conn, ms.sent_by(conn, identity_id, limit=limit))
        )

    async def tokens(self, *, revoked: bool) -> list[TokenView]:
        def read(conn: Conn) -> list[TokenView]:
            listed = ms.list_mailbox_tokens(conn, revoked=revoked)
            return [_token_view(conn, token) for token in listed]

        return await self._reads.read(read)


class SqlAccounts:
    def __init__(self, writer: Writer) -> None:
        self._writer = writer

    async def person(self, workspace: Workspace, alias: str, *, now: float) -> Identity:
        return await self._writer.write(lambda conn: person_identity(conn, workspace, alias, now))

    async def person_beside(self, caller_id: str, alias: str, *, now: float) -> Resolved:
        def op(conn: Conn) -> Resolved:
            workspace = ms.workspace_of_key(conn, _me(conn, caller_id).workspace_key)
            person = person_identity(conn, workspace, alias, now)
            return Resolved(person.id, format_address(person.alias, workspace.slug), PERSON)

        return await self._writer.write(op)

    async def bind_conversation(
        self,
        implementation: str,
        conversation_key: str,
        identity_id: str,
        *,
        session_id: str | None = None,
    ) -> None:
        def op(conn: Conn) -> None:
            ms.bind_conversation(conn, implementation, conversation_key, identity_id)
            if session_id is not None:
                ms.name_conversation(conn, session_id, conversation_key)

        await self._writer.write(op)

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
        def write(conn: Conn) -> TokenView:
            recipient = _resolve(conn, person_id, address, text)
            made = ms.insert_mailbox_token(
                conn,
                token_id=token_id,
                token_hash=token_hash,
                identity_id=recipient.id,
                label=label,
                now=now,
                expires_at=expires_at,
            )
            return _token_view(conn, made)

        return await self._writer.write(write)

    async def revoke_token(self, token_id: str, *, now: float) -> TokenView:
        return await self._writer.write(
            lambda conn: _token_view(conn, ms.revoke_mailbox_token(conn, token_id, now))
        )


def _me(conn: Conn, caller_id: str) -> Identity:
    me = ms.get_identity(conn, caller_id)
    if me is None:
        raise _ended()
    return me


def _ended() -> PagerError:
    return PagerError(ErrorCode.ENDED, "your identity no longer exists; register again")


def _resolve(
    conn: Conn,
    caller_id: str,
    address: Address,
    text: str,
    *,
    history: bool = False,
) -> Resolved:
    """An address → the identity it names now (`pager.domain.addressing` decides; this reads
    what it asks for). The address that names someone now costs one statement (the identity
    with its workspace's slug)."""
    lookup = addressing.lookup_of(address, caller_id)
    found = ms.addressed_identity(
        conn,
        agent_id=lookup.agent_id,
        alias_key=lookup.alias_key,
        beside=lookup.beside,
        slug=lookup.slug,
    )
    if found is not None:
        return addressing.named(*found)
    return _unnamed(conn, caller_id, address, text, history=history)


def _unnamed(
    conn: Conn, caller_id: str, address: Address, text: str, *, history: bool = False
) -> Resolved:
    """`_resolve` of an address that names no one now (its statement found nothing): why
    not, or the alias's new holder (PagerError from `addressing.unnamed`)."""
    former = addressing.not_named_now(address, text)
    if former.slug is None:
        workspace_key: str | None = _me(conn, caller_id).workspace_key
    else:
        workspace = ms.workspace_of_slug(conn, former.slug)
        workspace_key = None if workspace is None else workspace[0]
    holder = None
    if workspace_key is not None:
        reserved = ms.alias_reserved_by(conn, workspace_key, former.alias_key)
        identity = None if reserved is None else ms.get_identity(conn, reserved)
        if identity is not None:
            holder = (identity, ms.workspace_slug(conn, identity.workspace_key))
    return addressing.unnamed(
        text, former, workspace_known=workspace_key is not None, holder=holder, history=history
    )


def _not_named(found: NamedNoOne, address: Address, text: str) -> NoReturn:
    """`_unnamed` on what a send's read found with the address (`ms.resolve_ahead`), read
    in the same statement: why the address names no one, or the alias's new holder."""
    former = addressing.not_named_now(address, text)
    if former.slug is None and not found.sender_exists:
        raise _ended()
    addressing.unnamed(
        text, former, workspace_known=found.workspace_known, holder=found.holder, history=False
    )
    raise AssertionError("a send to an alias nobody holds is refused")


def _person_made(
    found: NamedNoOne, address: Address, refused: PagerError, person: str | None, now: float
) -> tuple[Resolved, ReadAhead] | None:
    """The person's identity the send's write makes, with the read as the write takes it,
    when the alias that names no one is the person's name (`addressing.reaches_person`) and
    they have no identity in the sender's workspace yet (`identity_rules.decide_person`);
    None otherwise (the refusal stands, or `person_beside` finds the person's identity)."""
    if person is None or not addressing.reaches_person(address, refused, person):
        return None
    if found.workspace_key is None or found.workspace_slug is None:
        return None
    reserved = None if found.holder is None else found.holder[0].id
    decided = rules.decide_person(person, person=found.person, by_alias=None, reserved_by=reserved)
    if not isinstance(decided, rules.CreatePerson):
        return None
    identity = decided.identity(found.workspace_key, now)
    made = MadeBySend(identity, alias_key(decided.alias), found.workspace_slug)
    reached = addressing.named(identity, made.slug)
    # Nothing of it is stored yet: its actor starts with an empty inbox and no session.
    empty = StartFacts(next_due=None, session=None, implementation=PERSON)
    ahead = attrs.evolve(
        found.ahead, recipient_address=reached.address, makes=made, recipient=empty
    )
    return reached, ahead


def _named(conn: Conn, caller_id: str, text: str) -> str | None:
    """The id of the identity `text` names now, or None."""
    try:
        return _resolve(conn, caller_id, parse_address(text), text).id
    except PagerError:
        return None


def _addressed(conn: Conn, messages: list[Message]) -> list[Addressed]:
    """The messages with both addresses, looked up in one batch."""
    known = ms.addresses(conn, {m.sender_id for m in messages} | {m.recipient_id for m in messages})
    return [
        Addressed(m, known.get(m.sender_id, m.sender_id), known.get(m.recipient_id, m.recipient_id))
        for m in messages
    ]


def _token_view(conn: Conn, token: MailboxToken) -> TokenView:
    mailbox = ms.addresses(conn, [token.identity_id]).get(token.identity_id, token.identity_id)
    return TokenView(token, mailbox)
