"""What the operator API shows (SPEC §6 snapshot and read views), as frozen values.

Times are ISO 8601 UTC strings (`pager.domain.clock.iso`): these objects are built for the
edge and turned into JSON by the one converter (`pager.wire.unstructure`). Cursors are opaque
to clients: URL-safe base64 of a small JSON object naming the view and the last key shown.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any, TypeVar

import attrs

from pager.domain.errors import ErrorCode, PagerError

K = TypeVar("K", str, int)

#: Page sizes of the list views.
DEFAULT_LIMIT = 50
MAX_LIMIT = 200


@attrs.frozen
class SessionView:
    session_id: str
    epoch: int
    created_at: str
    lease_expires_at: str  # as last persisted: the live lease may run up to lease_ttl/2 later


@attrs.frozen
class InboxCounts:
    queued: int = 0
    claimed: int = 0  # claimed and delivered: an open claim awaits an ack
    dead: int = 0


@attrs.frozen
class AgentView:
    agent_id: str
    alias: str
    address: str
    workspace: str  # the slug
    implementation: str
    durable: bool
    archived: bool
    attached: bool
    sessions: tuple[SessionView, ...]
    inbox: InboxCounts
    last_seen: str
    created_at: str
    archived_at: str | None
    #: Its workspace's host, and whether that host's broker runs (SPEC §13; a store of one
    #: broker has one host, always alive).
    host: str = ""
    host_alive: bool = True
    #: Launch on mail (docs/wake.md): the person turned it on; a run of it is going now.
    wake: bool = False
    waking: bool = False


@attrs.frozen
class WorkspaceView:
    slug: str
    path: str
    agents: tuple[AgentView, ...]


@attrs.frozen
class Totals:
    workspaces: int
    agents: int
    attached: int
    archived: int
    queued: int
    claimed: int
    dead: int
    refused_sends: int = 0  # SPEC §8.1: sends the loop guard or a rate refused (event retention)


@attrs.frozen
class Snapshot:
    broker: dict[str, Any]  # the /health identity
    workspaces: tuple[WorkspaceView, ...]
    totals: Totals
    seq: int  # the latest operator event when the snapshot was read


@attrs.frozen
class AgentPage:
    agents: tuple[AgentView, ...]
    next_cursor: str | None


@attrs.frozen
class Correspondent:
    """A message's sender or recipient; alias and address are None once it was purged/reaped."""

    agent_id: str
    alias: str | None
    address: str | None


@attrs.frozen
class MessageView:
    message_id: str
    direction: str  # "in" or "out", seen from the agent whose messages are listed
    sender: Correspondent
    recipient: Correspondent
    body: str
    thread: str | None
    reply_to: str | None
    sent_at: str
    state: str
    attempts: int
    dead_reason: str | None
    settled_at: str | None
    origin: str  # SPEC §8.1: human, agent or script
    hop: int


@attrs.frozen
class MessagePage:
    messages: tuple[MessageView, ...]
    next_cursor: str | None


@attrs.frozen
class Archived:
    agent: AgentView
    ended_sessions: int


@attrs.frozen
class Unarchived:
    agent: AgentView


@attrs.frozen
class Purged:
    agent_id: str
    alias: str
    address: str
    ended_sessions: int
    dead_lettered: int


# -- cursors ---------------------------------------------------------------------------------


def encode_cursor(view: str, key: str | int) -> str:
    raw = json.dumps({"v": view, "k": key}, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def _bad_cursor() -> PagerError:
    return PagerError(
        ErrorCode.VALIDATION_FAILED,
        "cursor is not a cursor this view handed out; pass next_cursor from the previous page"
        " unchanged, or leave it out to start from the first page",
        parameter="cursor",
    )


def decode_cursor(view: str, text: str, key_type: type[K]) -> K:
    """The key inside a cursor of `view`; `validation_failed` naming `cursor` otherwise."""
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
        data = json.loads(raw)
    except (ValueError, binascii.Error):
        raise _bad_cursor() from None
    if not isinstance(data, dict) or set(data) != {"v", "k"} or data["v"] != view:
        raise _bad_cursor()
    key = data["k"]
    if type(key) is not key_type:
        raise _bad_cursor()
    return key
