"""What a send's decision needs, read before its write together with its recipient's address
(one statement), by a backend for which each statement costs a round trip (PostgreSQL): the
write then checks that it still holds instead of reading it again."""

from __future__ import annotations

import attrs

from pager.domain.loop_guard import SenderFacts
from pager.domain.records import Identity, Message, Session
from pager.domain.wake import WakeSettings


@attrs.frozen
class InboxDeadlines:
    """Where an inbox stood when read: whether its identity exists, the next due time the
    store holds for it, and its deadlines (`delivery.next_due` makes the next from them)."""

    exists: bool
    recorded: float | None
    open_claim_deadline: float | None
    next_retry: float | None
    oldest_unsettled_sent_at: float | None


@attrs.frozen
class StartFacts:
    """What an identity's actor loads from the store when it starts, as read with a send to
    it: the next due time the store holds for its inbox, its attached session (through any
    broker) and its implementation, and the person's launch-on-mail settings for it (None:
    off). A send to an identity whose actor is not running here starts it from these
    instead of reading them again."""

    next_due: float | None
    session: Session | None
    implementation: str
    wake: WakeSettings | None = None


@attrs.frozen
class KeyRead:
    """The sender's idempotency key as it stood when read: the message its row names (''
    when the key was never used), when that row was written, and that message with its
    recipient's address while it is still stored (pager/domain/idempotency.py decides)."""

    message_id: str
    created_at: float | None
    original: Message | None
    original_to: str | None


@attrs.frozen
class ReadAhead:
    """What a send's decision needs, read with its recipient's address in one statement
    before its write, by a backend for which a statement costs a round trip (PostgreSQL):
    the write then checks that it still holds instead of reading it again (and decides
    again, inside the write, when it does not)."""

    read_at: float  # the time the rates were counted up to
    sender: SenderFacts | None  # None: the sender is gone
    inbox: InboxDeadlines
    #: Whether the inbox held mail a claim could take at `read_at` (a waiting reader's claim
    #: then takes that first, in send order, and is made inside the write).
    mail_waiting: bool = False
    key: KeyRead | None = None  # read when the send has an idempotency key
    sender_address: str = ""  # as a claim made in the send shows them
    recipient_address: str = ""
    #: The senders of the chain the send would extend, first to last, by address (a purged
    #: identity by its id, a page's token by its label), read when the sender's next send
    #: may pass the hop limit (`loop_guard.refused_from_cause_hop`): its refusal names them.
    chain: tuple[str, ...] | None = None
    #: The recipient's identity, when the send's write makes it (the person's, on the first
    #: send to them in a workspace): the inbox read is then an empty one.
    makes: MadeBySend | None = None
    #: What the recipient's actor starts from if it is not running (`StartFacts`).
    recipient: StartFacts | None = None


@attrs.frozen
class MadeBySend:
    """An identity a send's write makes before its message, unless another write made the
    same one first (the send is then made again to that one): `identity`, the key of its
    alias and its workspace's slug."""

    identity: Identity
    alias_key: str
    slug: str


@attrs.frozen
class NamedNoOne:
    """What the same read found when the address names no one now: whether the sender still
    exists, and for an alias, whether the workspace it was looked up in exists, the identity
    that reserved the alias there (with its workspace's slug: `addressing.unnamed` decides
    from them), and, when asked, the person's identity in the sender's workspace (`person`;
    `workspace_key`, `workspace_slug`: the sender's workspace). `ahead`: the sender's facts,
    for a send to the person whose identity the send's write makes."""

    sender_exists: bool
    workspace_known: bool
    holder: tuple[Identity, str] | None
    person: Identity | None
    workspace_key: str | None
    workspace_slug: str | None
    ahead: ReadAhead
