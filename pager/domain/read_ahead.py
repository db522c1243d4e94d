"""What a send's decision needs, read before its write together with its recipient's address
(one statement), by a backend for which each statement costs a round trip (PostgreSQL): the
write then checks that it still holds instead of reading it again."""

from __future__ import annotations

import attrs

from pager.domain.loop_guard import SenderFacts
from pager.domain.records import Message


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
