"""The model-facing MCP tools of SPEC §8: their arguments, descriptions and API calls.

A tool's arguments are a request class of `pager.requests` (structured strictly by
`pager.wire`: unknown arguments refused, no type coercion); the tool adds its name, its
one-line description and the MessagingApi call it makes.
"""

from __future__ import annotations

from typing import Any, ClassVar

from pager import requests
from pager.domain import results
from pager.domain.api import JSON, Caller, MessagingApi
from pager.domain.envelope import render_message
from pager.domain.reservation_results import Released, ReservationList, Reserved
from pager.domain.results import (
    AckResult,
    AliasResult,
    Claims,
    HistoryPage,
    Me,
    RosterPage,
    SendResult,
)
from pager.schema import object_schema, request_schema
from pager.wire import structure


class ToolSpec:
    """One tool: its name, description, request class (`pager.requests`: its arguments and,
    generated from it, its `inputSchema`), answer class and the MessagingApi call it makes."""

    name: ClassVar[str]
    description: ClassVar[str]
    read_only: ClassVar[bool] = False
    request: ClassVar[type[Any]]
    #: The attrs class of its answer (`pager.domain.results`): the JSON and `outputSchema`.
    result: ClassVar[type[Any]]

    def __init__(self, args: Any) -> None:
        self.args = args

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        raise NotImplementedError

    def may_wait(self) -> bool:
        """Whether the call may park (a long poll), so its client's hang-up must end it."""
        return False

    def render(self, result: JSON, display_cap: int) -> str | None:
        """The text a model reads, when it must differ from the JSON (message bodies go in
        the SPEC §8 envelope); None: the compact JSON."""
        return None

    @classmethod
    def parse(cls, arguments: dict[str, Any]) -> ToolSpec:
        """The call with its arguments structured; PagerError `validation_failed` naming each
        bad argument."""
        return cls(structure(arguments, cls.request, what=cls.name))

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        """The JSON Schema advertised as the tool's `inputSchema`: its request class's."""
        return request_schema(cls.request)

    @classmethod
    def output_schema(cls) -> dict[str, Any]:
        """The JSON Schema advertised as the tool's `outputSchema`: its answer's, inline."""
        return object_schema(cls.result)


class Whoami(ToolSpec):
    name = "whoami"
    request = requests.WhoamiRequest
    result = Me
    description = (
        "Your identity: agent id, alias, the address others reach you at, workspace, session."
    )
    read_only = True

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.whoami(caller)


class Send(ToolSpec):
    name = "send"
    request = requests.SendRequest
    result = SendResult
    description = (
        "Send a message to another agent (alias, alias@workspace, or agent id). "
        "Returns the message id and how the wake went."
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        args: requests.SendRequest = self.args
        return await api.send(
            caller,
            to=args.to,
            body=args.body,
            thread=args.thread,
            reply_to=args.reply_to,
            idempotency_key=args.idempotency_key,
        )


class Fetch(ToolSpec):
    name = "fetch"
    request = requests.FetchRequest
    result = Claims
    description = (
        "Claim waiting messages (optionally long-poll wait_s ≤ 60); "
        "ack each token after handling it, or it is offered again."
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.fetch(caller, limit=self.args.limit, wait_s=self.args.wait_s)

    def may_wait(self) -> bool:
        return bool(self.args.wait_s > 0)

    def render(self, result: JSON, display_cap: int) -> str | None:
        claims = result.get("claims", [])
        if not claims:
            return "No messages waiting."
        parts = [f"{len(claims)} message(s) claimed; ack each token once handled."]
        for claim in claims:
            parts.append(f"token: {claim['token']}")
            parts.append(envelope(claim["message"], display_cap))
        return "\n".join(parts)


class Ack(ToolSpec):
    name = "ack"
    request = requests.AckRequest
    result = AckResult
    description = "Acknowledge claimed messages by token; lists tokens not applied with the reason."

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.ack(caller, tokens=list(self.args.tokens))


class Roster(ToolSpec):
    name = "roster"
    request = requests.RosterRequest
    result = RosterPage
    description = (
        "Agents you can reach: address, alias, implementation, attached, last seen, waiting count"
        " (a page; pass next_cursor back as cursor for the next one)."
    )
    read_only = True

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        args: requests.RosterRequest = self.args
        return await api.roster(caller, scope=args.scope, limit=args.limit, cursor=args.cursor)


class History(ToolSpec):
    name = "history"
    request = requests.HistoryRequest
    result = HistoryPage
    description = "Your past messages, optionally with one agent or in one thread (read-only)."
    read_only = True

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        args: requests.HistoryRequest = self.args
        return await api.history(caller, with_=args.with_, thread=args.thread, limit=args.limit)

    def render(self, result: JSON, display_cap: int) -> str | None:
        messages = result.get("messages", [])
        if self.args.full:  # the pointer of a cut body leads here: nothing is cut again
            display_cap = max([display_cap, *(len(str(m.get("body", ""))) for m in messages)])
        if not messages:
            return "No messages."
        parts = [f"{len(messages)} message(s), newest first (read-only: nothing is claimed)."]
        for message in messages:
            direction, state = message.get("direction", ""), message.get("state")
            parts.append(f"{direction}: to {message.get('to')}, state {state}")
            parts.append(envelope(message, display_cap))
        return "\n".join(parts)


def envelope(message: JSON, display_cap: int) -> str:
    """One message in the envelope that marks it as data from another agent."""
    return render_message(
        sender_address=str(message.get("from", "")),
        message_id=str(message.get("id", "")),
        body=str(message.get("body", "")),
        sent_at=str(message.get("sent_at", "")),
        thread=message.get("thread"),
        display_cap=display_cap,
        attempt=message.get("attempt"),
    )


class MessageStatus(ToolSpec):
    name = "message_status"
    request = requests.MessageStatusRequest
    result = results.MessageStatus
    description = (
        "Delivery state of a message you sent (queued, claimed, delivered, acknowledged, "
        "dead + reason) and its attempts."
    )
    read_only = True

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.message_status(caller, message_id=self.args.message_id)


class UpdateAgentAlias(ToolSpec):
    name = "update_agent_alias"
    request = requests.UpdateAgentAliasRequest
    result = AliasResult
    description = "Change your alias; returns your new alias and address."

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.update_agent_alias(caller, alias=self.args.alias, force=self.args.force)


class MoveToWorkspace(ToolSpec):
    name = "move_to_workspace"
    request = requests.MoveToWorkspaceRequest
    result = AliasResult
    description = (
        "Move yourself to the workspace (Git repository) of a directory, keeping id and inbox."
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.move_to_workspace(caller, path=self.args.path)


class Reserve(ToolSpec):
    name = "reserve"
    request = requests.ReserveRequest
    result = Reserved
    description = (
        "Reserve files before you change them (paths or globs relative to the workspace:"
        " src/api/**, README.md); exclusive unless shared, for ttl_s (default 1 h; reserve again"
        " to renew). All or nothing: a conflict names who holds what, and takes nothing."
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        args: requests.ReserveRequest = self.args
        return await api.reserve(
            caller, paths=list(args.paths), shared=args.shared, ttl_s=args.ttl_s, reason=args.reason
        )


class Release(ToolSpec):
    name = "release"
    request = requests.ReleaseRequest
    result = Released
    description = "Release your reservations of these patterns (as reserved); none given: all."

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        paths = self.args.paths
        return await api.release(caller, paths=None if paths is None else list(paths))


class Reservations(ToolSpec):
    name = "reservations"
    request = requests.ReservationsRequest
    result = ReservationList
    description = (
        "Reservations in force in your workspace (scope 'all': every workspace): pattern,"
        " holder, exclusive or shared, reason, until, state (stale ones block nothing)."
    )
    read_only = True

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.reservations(caller, scope=self.args.scope)


TOOLS: tuple[type[ToolSpec], ...] = (
    Whoami,
    Send,
    Fetch,
    Ack,
    Roster,
    History,
    MessageStatus,
    UpdateAgentAlias,
    MoveToWorkspace,
    Reserve,
    Release,
    Reservations,
)
