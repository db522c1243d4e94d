"""The model-facing MCP tools of SPEC §8: their arguments, descriptions and API calls.

Each tool is a strict pydantic model of its arguments (unknown arguments are refused, no type
coercion) that also knows its name, its one-line description and the MessagingApi call it makes.
Field names are the API's keyword names; aliases are the wire names where they differ (`with`).
"""

from __future__ import annotations

import base64
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, ValidationError
from pydantic.json_schema import GenerateJsonSchema, JsonSchemaMode
from pydantic_core import CoreSchema, core_schema

from pager.config import Limits
from pager.domain import results
from pager.domain.api import JSON, Caller, MessagingApi
from pager.domain.envelope import render_message
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.results import (
    AckResult,
    AliasResult,
    Claims,
    HistoryPage,
    Me,
    RosterPage,
    SendResult,
)
from pager.schema import object_schema

Name = Annotated[str, Field(min_length=1, max_length=200)]
#: The default body cap (SPEC §9), in the schema as characters (the broker counts UTF-8 bytes).
BODY_CAP = Limits().body_cap
OptionalName = Annotated[str | None, Field(max_length=200)]


def _whole_number(value: object) -> object:
    """JSON has one number type: `5.0` is the integer 5, as JSON Schema (the tools' input
    schemas, the OpenAPI document) and `pager.wire` say too; strict mode alone refuses it."""
    if type(value) is float and value.is_integer():
        return int(value)
    return value


#: On an `int` argument: a JSON number with no fraction is that integer.
WHOLE = BeforeValidator(_whole_number)


class ToolArgs(BaseModel):
    """The arguments of one tool; subclasses set the class variables and `call`."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    name: ClassVar[str]
    description: ClassVar[str]
    read_only: ClassVar[bool] = False
    #: The attrs class of its answer (`pager.domain.results`): the JSON and `outputSchema`.
    result: ClassVar[type[Any]]

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
    def parse(cls, arguments: dict[str, Any]) -> ToolArgs:
        """Validated arguments; PagerError `validation_failed` naming each bad argument."""
        try:
            return cls.model_validate(arguments)
        except ValidationError as exc:
            raise validation_failed(cls.name, exc) from None

    @classmethod
    def input_schema(cls) -> dict[str, Any]:
        """The JSON Schema advertised as the tool's `inputSchema` (wire names, no titles)."""
        return cls.model_json_schema(by_alias=True, schema_generator=_CompactSchema)

    @classmethod
    def output_schema(cls) -> dict[str, Any]:
        """The JSON Schema advertised as the tool's `outputSchema`: its answer's, inline."""
        return object_schema(cls.result)


class _CompactSchema(GenerateJsonSchema):
    """Drops the titles pydantic derives from names: they repeat the names and cost tokens."""

    def field_title_should_be_set(self, schema: Any) -> bool:
        return False

    def generate(self, schema: CoreSchema, mode: JsonSchemaMode = "validation") -> Any:
        out = super().generate(schema, mode)
        out.pop("title", None)
        out.pop("description", None)  # the class docstring; the tool has its own description
        return out

    def model_schema(self, schema: core_schema.ModelSchema) -> Any:
        out = super().model_schema(schema)
        out.pop("title", None)
        return out


def validation_failed(tool: str, exc: ValidationError) -> PagerError:
    """Names every bad argument and its problem; never echoes the values (they may be bodies)."""
    problems: list[str] = []
    arguments: list[str] = []
    for error in exc.errors(include_url=False, include_input=False, include_context=False):
        loc = error["loc"]
        argument = str(loc[0]) if loc else "arguments"
        where = repr(argument) + "".join(f" item {part}" for part in loc[1:])
        if error["type"] == "extra_forbidden":
            problem = f"{tool} has no argument {where}"
        elif error["type"] == "missing":
            problem = f"{where} is required"
        else:
            problem = f"{where}: {error['msg']}"
        problems.append(problem)
        if argument not in arguments:
            arguments.append(argument)
    return PagerError(
        ErrorCode.VALIDATION_FAILED,
        f"invalid arguments for {tool}: " + "; ".join(problems),
        arguments=arguments,
    )


class Whoami(ToolArgs):
    name = "whoami"
    result = Me
    description = (
        "Your identity: agent id, alias, the address others reach you at, workspace, session."
    )
    read_only = True

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.whoami(caller)


class Send(ToolArgs):
    name = "send"
    result = SendResult
    description = (
        "Send a message to another agent (alias, alias@workspace, or agent id). "
        "Returns the message id and how the wake went."
    )

    to: Name
    # Schema only: the broker refuses an empty body and one over its byte cap itself, saying
    # why in words (a pydantic pattern error would not).
    body: str = Field(json_schema_extra={"pattern": r"\S", "maxLength": BODY_CAP})
    thread: OptionalName = None
    reply_to: str | None = Field(None, max_length=200, description="id of the message this answers")
    idempotency_key: str | None = Field(
        None,
        min_length=1,
        max_length=200,
        description="a resend with the same key returns the original",
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.send(
            caller,
            to=self.to,
            body=self.body,
            thread=self.thread,
            reply_to=self.reply_to,
            idempotency_key=self.idempotency_key,
        )


class Fetch(ToolArgs):
    name = "fetch"
    result = Claims
    description = (
        "Claim waiting messages (optionally long-poll wait_s ≤ 60); "
        "ack each token after handling it, or it is offered again."
    )

    limit: Annotated[int, Field(ge=1, le=100), WHOLE] = 10
    wait_s: float = Field(
        0.0, ge=0, le=60, allow_inf_nan=False, description="seconds to wait if none is waiting"
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.fetch(caller, limit=self.limit, wait_s=self.wait_s)

    def may_wait(self) -> bool:
        return self.wait_s > 0

    def render(self, result: JSON, display_cap: int) -> str | None:
        claims = result.get("claims", [])
        if not claims:
            return "No messages waiting."
        parts = [f"{len(claims)} message(s) claimed; ack each token once handled."]
        for claim in claims:
            parts.append(f"token: {claim['token']}")
            parts.append(envelope(claim["message"], display_cap))
        return "\n".join(parts)


class Ack(ToolArgs):
    name = "ack"
    result = AckResult
    description = "Acknowledge claimed messages by token; lists tokens not applied with the reason."

    tokens: list[Name] = Field(min_length=1, max_length=100, description="claim tokens from fetch")

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.ack(caller, tokens=list(self.tokens))


def _cursor_pattern(view: str) -> str:
    """The shape of `view`'s cursors (`views.encode_cursor`: unpadded URL-safe base64 of
    `{"v":"<view>","k":…}`, so its first characters spell the view): as
    `routes_operator.cursor_pattern`, which the tools do not import (it brings the server)."""
    head = f'{{"v":"{view}","k":'.encode()
    fixed = base64.urlsafe_b64encode(head[: len(head) // 3 * 3]).decode()
    return f"^{fixed}[A-Za-z0-9_-]+$"


RosterCursor = Annotated[
    str,
    Field(
        pattern=_cursor_pattern("roster"),
        max_length=1000,
        description="next_cursor of the previous page, unchanged",
        json_schema_extra={"format": "roster-cursor"},
    ),
]


class Roster(ToolArgs):
    name = "roster"
    result = RosterPage
    description = (
        "Agents you can reach: address, alias, implementation, attached, last seen, waiting count"
        " (a page; pass next_cursor back as cursor for the next one)."
    )
    read_only = True

    scope: Literal["workspace", "all"] = "workspace"
    limit: Annotated[int, Field(ge=1, le=500), WHOLE] = 100
    cursor: RosterCursor | None = None

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.roster(caller, scope=self.scope, limit=self.limit, cursor=self.cursor)


class History(ToolArgs):
    name = "history"
    result = HistoryPage
    description = "Your past messages, optionally with one agent or in one thread (read-only)."
    read_only = True

    # `with` is a Python keyword: the field is `with_` (the API's keyword), the wire name `with`.
    with_: str | None = Field(
        None,
        validation_alias="with",
        max_length=200,
        description="address or id of the other agent",
    )
    thread: OptionalName = None
    limit: Annotated[int, Field(ge=1, le=200), WHOLE] = 50
    full: bool = Field(False, description="show each body whole (not cut); use a small limit")

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.history(caller, with_=self.with_, thread=self.thread, limit=self.limit)

    def render(self, result: JSON, display_cap: int) -> str | None:
        messages = result.get("messages", [])
        if self.full:  # the pointer of a cut body leads here: nothing is cut again
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


class MessageStatus(ToolArgs):
    name = "message_status"
    result = results.MessageStatus
    description = (
        "Delivery state of a message you sent (queued, claimed, delivered, acknowledged, "
        "dead + reason) and its attempts."
    )
    read_only = True

    message_id: Name

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.message_status(caller, message_id=self.message_id)


class UpdateAgentAlias(ToolArgs):
    name = "update_agent_alias"
    result = AliasResult
    description = "Change your alias; returns your new alias and address."

    alias: Annotated[str, Field(min_length=1, max_length=64)]
    force: bool = Field(
        False,
        description="become the agent holding the alias (its id, inbox, history); its session"
        " ends and your current identity is left behind",
    )

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.update_agent_alias(caller, alias=self.alias, force=self.force)


class MoveToWorkspace(ToolArgs):
    name = "move_to_workspace"
    result = AliasResult
    description = (
        "Move yourself to the workspace (Git repository) of a directory, keeping id and inbox."
    )

    path: Annotated[str, Field(min_length=1, max_length=4096)]

    async def call(self, api: MessagingApi, caller: Caller) -> Any:
        return await api.move_to_workspace(caller, path=self.path)


TOOLS: tuple[type[ToolArgs], ...] = (
    Whoami,
    Send,
    Fetch,
    Ack,
    Roster,
    History,
    MessageStatus,
    UpdateAgentAlias,
    MoveToWorkspace,
)
