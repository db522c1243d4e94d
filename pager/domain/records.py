"""Rows of the checkpoint as frozen values (times are unix seconds)."""

from __future__ import annotations

import enum

import attrs


class SessionState(enum.StrEnum):
    ATTACHED = "attached"
    DETACHED = "detached"  # graceful detach
    EXPIRED = "expired"  # its lease lapsed
    ENDED = "ended"  # replaced by a newer attachment, taken over, or archived


class MessageState(enum.StrEnum):
    QUEUED = "queued"
    CLAIMED = "claimed"  # fetched: an open claim awaits an ack
    DELIVERED = "delivered"  # written to a delivery address: an open claim awaits an ack
    ACKNOWLEDGED = "acknowledged"
    DEAD = "dead"


class DeliveryKind(enum.StrEnum):
    HTTP = "http"
    UNIX = "unix"


class ClaimState(enum.StrEnum):
    OPEN = "open"
    ACKNOWLEDGED = "acknowledged"
    EXPIRED = "expired"  # the ack wait passed
    REFUSED = "refused"  # the delivery address refused it or could not be written
    RELEASED = "released"  # handed back unshown (e.g. over a hook's size limit)


@attrs.frozen
class Identity:
    id: str
    workspace_key: str
    alias: str
    durable: bool
    implementation: str
    created_at: float
    last_seen: float
    detached_at: float | None = None
    archived_at: float | None = None
    exchanged: bool = False


@attrs.frozen
class Delivery:
    """Where a connector receives claims: `http` (url) or `unix` (path)."""

    kind: DeliveryKind = attrs.field(converter=DeliveryKind)
    target: str


@attrs.frozen
class Session:
    id: str
    identity_id: str
    epoch: int
    token_hash: str
    resume_hash: str
    state: SessionState
    created_at: float
    lease_expires_at: float
    conversation_key: str | None = None
    delivery: Delivery | None = None
    end_reason: str | None = None
    #: The broker the session attached through ('' on a store of one broker): with a shared
    #: store (SPEC §13) that broker alone holds its binding, lease, long polls and pushes.
    host: str = ""


@attrs.frozen
class Message:
    seq: int
    id: str
    sender_id: str
    recipient_id: str
    body: str
    thread: str | None
    reply_to: str | None
    sent_at: float
    state: MessageState
    attempts: int
    available_at: float
    dead_reason: str | None = None
    settled_at: float | None = None
    origin: str = "agent"  # SPEC §8.1: human, agent or script
    hop: int = 0
    fields: str | None = None  # a page's fields as a JSON object (SPEC §8.2)


@attrs.frozen
class Claim:
    """A claim handed out: the token is known only at creation (the store keeps its hash)."""

    token: str
    message: Message
    attempt: int
    expires_at: float
