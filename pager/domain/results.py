"""What the messaging API answers (SPEC §8 tools, `/v1/me`), one attrs class per shape.

These classes are the one definition of each answer: `pager.wire` turns them into JSON, and
`pager.schema` into the JSON Schemas the MCP tools advertise as `outputSchema` and the
OpenAPI document lists as components. A field's `metadata` may carry:

- `schema`: JSON Schema keywords beside those its type gives (a time is a `date-time` string);
- `wire`: its name on the wire, when that is no Python name (`from`);
- `omit_if_none`: the key is left out, not `null`, when it has no value (fields only some
  answers carry, e.g. a takeover's);
- `as_is`: the value is JSON data already (a page's fields, as stored): sent as it is, never
  walked by the converter.
"""

from __future__ import annotations

import enum
from typing import Any, Literal

import attrs

from pager.domain.clock import iso
from pager.domain.delivery import NotApplied, Wake
from pager.domain.json_bounds import loads_stored, nesting_depth
from pager.domain.records import Message, MessageState

TIME: dict[str, Any] = {"format": "date-time"}
COUNT: dict[str, Any] = {"minimum": 0}


def _time() -> Any:
    return attrs.field(metadata={"schema": TIME})


def _count() -> Any:
    return attrs.field(metadata={"schema": COUNT})


#: The metadata of a field only some answers carry: absent, not null, when None.
OPTIONAL: dict[str, Any] = {"omit_if_none": True}


class Origin(enum.StrEnum):
    """Who a message came from (SPEC §8.1)."""

    HUMAN = "human"
    AGENT = "agent"
    SCRIPT = "script"


class ActingAs(enum.StrEnum):
    """Who a `/v1/me` request acts as (SPEC §4.2)."""

    SESSION = "session"
    PERSON = "person"
    HARNESS = "harness"


@attrs.frozen(kw_only=True)
class MeSession:
    id: str
    epoch: int = attrs.field(metadata={"schema": {"minimum": 0}})
    lease_expires_at: str = _time()


@attrs.frozen(kw_only=True)
class Me:
    """`whoami`: the caller's identity and session (none for the person at the terminal)."""

    agent_id: str
    alias: str
    address: str
    workspace: str
    implementation: str
    durable: bool
    host: str
    session: MeSession | None


@attrs.frozen(kw_only=True)
class MeActing(Me):
    """`GET /v1/me`: `whoami`, and whom the request acted as."""

    acting_as: ActingAs


@attrs.frozen(kw_only=True)
class Recipient:
    agent_id: str
    address: str
    #: Its implementation (`claude`, `shell`, …).
    implementation: str
    #: The mail is queued for a session that is never shown waiting mail at its turns (its
    #: manifest has none of the capabilities that show it: a shell program): it waits until
    #: the session reads it. False for every other outcome.
    waits_to_be_read: bool = False


@attrs.frozen(kw_only=True)
class SendResult:
    """`send` (and a page): the message, to whom, and how the wake went."""

    message_id: str
    state: MessageState
    duplicate: bool
    recipient: Recipient
    wake: Wake


@attrs.frozen(kw_only=True)
class MailMessage:
    """A message as its reader sees it (the SPEC §8 fields of `fetch` and the listings)."""

    id: str
    sender: str = attrs.field(metadata={"wire": "from"})
    to: str
    body: str
    thread: str | None
    reply_to: str | None
    sent_at: str = _time()
    attempt: int = _count()
    origin: Origin
    hop: int = _count()
    #: A page's fields (SPEC §8.2), also shown in its body; null for other messages.
    fields: dict[str, Any] | None = attrs.field(metadata={"as_is": True})


@attrs.frozen(kw_only=True)
class ListedMessage(MailMessage):
    """A message in `inbox`: with its delivery state."""

    state: MessageState


@attrs.frozen(kw_only=True)
class SentMessage(ListedMessage):
    """A message in `sent`: with why it died and when it settled."""

    dead_reason: str | None
    settled_at: str | None = attrs.field(metadata={"schema": TIME})


@attrs.frozen(kw_only=True)
class HistoryMessage(MailMessage):
    """A message in `history`: which way it went and its state; `envelope` with `full`."""

    direction: Literal["sent", "received"]
    state: MessageState
    envelope: str | None = attrs.field(
        default=None,
        metadata={**OPTIONAL, "schema": {"description": "`/v1/me/history?full=true`: whole"}},
    )


@attrs.frozen(kw_only=True)
class Claim:
    token: str
    expires_at: str = _time()
    message: MailMessage
    envelope: str | None = attrs.field(
        default=None,
        metadata={**OPTIONAL, "schema": {"description": "`/v1/me/claim`: whole, enveloped"}},
    )


@attrs.frozen(kw_only=True)
class Claims:
    """`fetch`: the claims made, each to be acknowledged by its token."""

    claims: tuple[Claim, ...]


@attrs.frozen(kw_only=True)
class NotAppliedToken:
    token: str
    reason: NotApplied


@attrs.frozen(kw_only=True)
class AckResult:
    applied: tuple[str, ...]
    not_applied: tuple[NotAppliedToken, ...]


@attrs.frozen(kw_only=True)
class RosterEntry:
    agent_id: str
    address: str
    alias: str
    implementation: str
    host: str
    #: Whether the broker of `host` runs (always true on a store of one broker, SPEC §13).
    host_alive: bool
    attached: bool
    last_seen: str | None = attrs.field(metadata={"schema": TIME})
    waiting: int = _count()
    you: bool


@attrs.frozen(kw_only=True)
class RosterPage:
    """`roster`: one page of who the caller can reach; `next_cursor` null on the last."""

    scope: Literal["workspace", "all"]
    agents: tuple[RosterEntry, ...]
    next_cursor: str | None


@attrs.frozen(kw_only=True)
class HistoryPage:
    messages: tuple[HistoryMessage, ...]


@attrs.frozen(kw_only=True)
class Waiting:
    """`inbox`: how many wait, and the oldest of them (nothing is claimed)."""

    waiting: int = _count()
    messages: tuple[ListedMessage, ...]


@attrs.frozen(kw_only=True)
class SentPage:
    messages: tuple[SentMessage, ...]


@attrs.frozen(kw_only=True)
class MessageStatus:
    """`message_status`: the delivery state of a message the caller sent."""

    message_id: str
    to: str
    state: MessageState
    attempts: int = _count()
    dead_reason: str | None = None
    sent_at: str = _time()
    settled_at: str | None = attrs.field(default=None, metadata={"schema": TIME})


@attrs.frozen(kw_only=True)
class TakenOver:
    previous_agent_id: str
    ended_session_id: str | None


@attrs.frozen(kw_only=True)
class SessionRef:
    id: str
    epoch: int = attrs.field(metadata={"schema": {"minimum": 1}})


@attrs.frozen(kw_only=True)
class AliasResult:
    """`update_agent_alias`, `pager claim` and `move_to_workspace`: the caller's alias and
    address now; a takeover (`force`) names whom it took over and the new session; a move
    names the new workspace."""

    agent_id: str
    alias: str
    address: str
    workspace: str | None = attrs.field(default=None, metadata=OPTIONAL)
    taken_over: TakenOver | None = attrs.field(default=None, metadata=OPTIONAL)
    session: SessionRef | None = attrs.field(default=None, metadata=OPTIONAL)


__all__ = [
    "AckResult",
    "ActingAs",
    "AliasResult",
    "Claim",
    "Claims",
    "HistoryMessage",
    "HistoryPage",
    "ListedMessage",
    "MailMessage",
    "Me",
    "MeActing",
    "MeSession",
    "MessageStatus",
    "NotAppliedToken",
    "Origin",
    "Recipient",
    "RosterEntry",
    "RosterPage",
    "SendResult",
    "SentMessage",
    "SentPage",
    "SessionRef",
    "TakenOver",
    "Waiting",
    "mail_fields",
    "mail_message",
    "page_fields",
    "placeholder_fields",
]

#: How deep a page's stored fields may nest to be shown (the fields object is level 1). Far
#: above what the edge accepts, far below what the encoders on the way out take (the MCP SDK's
#: serializer stops at ~250 levels in all): past it a message is unrenderable.
FIELDS_DEPTH = 128
#: The body a listing shows for a message that cannot be rendered.
UNRENDERABLE_BODY = "[pager] this message cannot be shown: unrenderable"


def page_fields(text: str | None) -> dict[str, Any] | None:
    """A page's stored fields as JSON data; ValueError (or RecursionError) when they are not a
    JSON object nested at most FIELDS_DEPTH levels."""
    if text is None:
        return None
    fields = loads_stored(text)
    if not isinstance(fields, dict):
        raise ValueError(f"page fields are a JSON {type(fields).__name__}, not an object")
    if (depth := nesting_depth(fields)) > FIELDS_DEPTH:
        raise ValueError(f"page fields nest {depth} levels; at most {FIELDS_DEPTH} are shown")
    return fields


def mail_fields(message: Message, *, sender: str, recipient: str) -> dict[str, Any]:
    """The `MailMessage` fields of `message`, for it or any of its subclasses."""
    return {
        "id": message.id,
        "sender": sender,
        "to": recipient,
        "body": message.body,
        "thread": message.thread,
        "reply_to": message.reply_to,
        "sent_at": iso(message.sent_at),
        "attempt": message.attempts,
        "origin": Origin(message.origin),
        "hop": message.hop,
        "fields": page_fields(message.fields),
    }


def placeholder_fields(message: Message, *, sender: str, recipient: str) -> dict[str, Any]:
    """`mail_fields` of a message that cannot be rendered: who, when and its id, none of its
    stored content (a read-only listing shows this instead of failing)."""
    return {
        **mail_fields(attrs.evolve(message, fields=None), sender=sender, recipient=recipient),
        "body": UNRENDERABLE_BODY,
        "thread": None,
        "reply_to": None,
    }


def mail_message(message: Message, *, sender: str, recipient: str) -> MailMessage:
    return MailMessage(**mail_fields(message, sender=sender, recipient=recipient))
