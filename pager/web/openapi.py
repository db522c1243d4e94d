"""The OpenAPI 3.1 description of every `/v1` route (SPEC §6), served at `GET /v1/openapi.json`.

One table, `ROUTES`, describes each route: method, path, credential, parameters, request body
and responses, with JSON Schemas (2020-12, the dialect of OpenAPI 3.1): the messaging API's
answers generated from their attrs classes (`ANSWERS`), the rest written by hand in
`SCHEMAS`. A test compares the table with the routes the Quart app serves, so a route added
without a description (or a description without a route) fails the build.
"""

from __future__ import annotations

import json
from typing import Any

import attrs
from quart import Blueprint, Response

from pager import requests
from pager.domain import reservation_results, results
from pager.domain.errors import ErrorCode
from pager.domain.harness_process import HARNESS_MAX, HARNESS_PATTERN
from pager.domain.hints import Hint
from pager.domain.records import MessageState
from pager.domain.results import MeActing, Origin
from pager.domain.views import DEFAULT_LIMIT, MAX_LIMIT
from pager.domain.wake import RunOutcome
from pager.requests import ADDRESS, NAME, PAGE, cursor_pattern
from pager.schema import object_schema, request_schema
from pager.versions import VERSION
from pager.web.mcp_tools import (
    Ack,
    Fetch,
    History,
    Release,
    Reservations,
    Reserve,
    Roster,
    Send,
    ToolSpec,
    UpdateAgentAlias,
)
from pager.web.query_guard import refuse_undeclared
from pager.web.routes_events import MAX_ID

Schema = dict[str, Any]

SECRET = "localSecret"
SESSION = "sessionToken"
#: `/v1/me/…`: a session token, or the local secret together with `?workspace=` (the person in
#: that workspace) or `?harness=` (the session a harness's hook bound), SPEC §4.2. The two query
#: parameters are declared as API-key schemes so that the document can say they are required
#: with the secret and not with a session token (a security requirement ANDs its schemes).
SESSION_OR_SECRET = "sessionToken or localSecret"
PERSON_WORKSPACE = "personWorkspace"
HARNESS_PROCESS = "harnessProcess"
MAILBOX = "mailboxToken"
#: A mailbox token's id (`ids.Kind.MAILBOX`).
MAILBOX_ID = "^mbx_[0-9a-hjkmnp-tv-z]{16}$"


def _ref(name: str) -> Schema:
    return {"$ref": f"#/components/schemas/{name}"}


def _object(required: dict[str, Schema], optional: dict[str, Schema] | None = None) -> Schema:
    return {
        "type": "object",
        "properties": {**required, **(optional or {})},
        "required": list(required),
        "additionalProperties": False,
    }


STRING: Schema = {"type": "string"}
NULLABLE_STRING: Schema = {"type": ["string", "null"]}
TIME: Schema = {"type": "string", "format": "date-time"}
NULLABLE_TIME: Schema = {"type": ["string", "null"], "format": "date-time"}
COUNT: Schema = {"type": "integer", "minimum": 0}
BOOLEAN: Schema = {"type": "boolean"}


def _nullable(schema: Schema) -> Schema:
    return {**schema, "type": [schema["type"], "null"]}


def _decimal_at_most(bound: int) -> str:
    """A regex for the decimal numerals (leading zeros allowed) of 0 to `bound`."""
    digits = str(bound)
    shorter = f"[0-9]{{1,{len(digits) - 1}}}|" if len(digits) > 1 else ""
    same_length = [
        f"{digits[:i]}[0-{int(d) - 1}][0-9]{{{len(digits) - i - 1}}}"
        for i, d in enumerate(digits)
        if d != "0"
    ]
    return f"(?:{shorter}{'|'.join([*same_length, digits])})"


#: Where a script says whom it pages (`/v1/notify?to=`): what `names.parse_address` takes.
TO_ADDRESS: Schema = {
    "type": "string",
    **NAME,
    **ADDRESS,
    "description": "an alias, alias@workspace-slug, or an agent id",
}
#: A Server-Sent Event as a client parses it (OpenAPI 3.1: the schema of a `text/event-stream`
#: response describes each event). `data` is JSON text except on heartbeats.
SSE_EVENT: Schema = {
    "type": "object",
    "properties": {
        "event": STRING,
        "data": STRING,
        "id": {"type": "string", "pattern": "^[0-9]+$"},
        "retry": {"type": "integer", "minimum": 0},
    },
    "required": ["event", "data"],
}
#: `routes_events.parse_last_event_id`: 1-19 digits, at most 2**63 - 1, blanks around.
EVENT_ID: Schema = {"type": "string", "pattern": f"^[ \\t]*{_decimal_at_most(MAX_ID)}[ \\t]*$"}

#: What every view of an identity says about it.
IDENTITY_FIELDS: dict[str, Schema] = {
    "agent_id": STRING,
    "alias": STRING,
    "address": STRING,
    "workspace": STRING,
    "implementation": STRING,
    "durable": BOOLEAN,
}

MAILBOX_TOKEN_FIELDS: dict[str, Schema] = {
    "id": {"type": "string", "pattern": MAILBOX_ID},
    "label": STRING,
    "mailbox": STRING,
    "agent_id": STRING,
    "created_at": TIME,
    "last_used_at": NULLABLE_TIME,
    "expires_at": NULLABLE_TIME,
    "revoked_at": NULLABLE_TIME,
}

SCHEMAS: dict[str, Schema] = {
    "Error": {
        "type": "object",
        "properties": {
            "error": {
                "type": "object",
                "properties": {
                    "code": STRING,
                    "message": STRING,
                    # What to do next, as a key: the message says it in /v1's words, and a
                    # client (the command line) may say it in its own (pager/domain/hints.py).
                    "hint": {"type": "string", "enum": [hint.value for hint in Hint]},
                },
                "required": ["code", "message"],
                "additionalProperties": True,  # details, e.g. `parameter`, `holder`
            }
        },
        "required": ["error"],
        "additionalProperties": False,
    },
    "Broker": {
        "type": "object",
        "properties": {
            "ok": {"const": True},
            "instance_id": STRING,
            "pid": {"type": "integer"},
            "version": STRING,
            "schema_version": {"type": "integer"},
            "started_at": STRING,
            # What /health reports degraded (pager/health.py); `degraded` only when it is.
            "status": {"enum": ["ok", "degraded"]},
            "degraded": {
                "type": "array",
                "items": _object({"kind": STRING, "message": STRING, "since": STRING}),
            },
            # Where the state is kept (never a password); `host` with a shared store only.
            "store": _object(
                {"kind": {"enum": ["sqlite", "postgresql"]}, "where": STRING}, {"host": STRING}
            ),
            # With a shared store (SPEC §13): every broker on it, this one included.
            "hosts": {"type": "array", "items": _ref("Host")},
        },
        "required": [
            "ok",
            "instance_id",
            "pid",
            "version",
            "schema_version",
            "started_at",
            "status",
        ],
        "additionalProperties": False,
    },
    "Host": _object(
        {
            "name": STRING,
            "alive": BOOLEAN,
            "version": STRING,
            "started_at": {"type": "number"},
            "heartbeat_at": {"type": "number"},
            "this": BOOLEAN,
        }
    ),
    "Session": _object(
        {
            "session_id": STRING,
            "epoch": {"type": "integer", "minimum": 1},
            "created_at": TIME,
            "lease_expires_at": TIME,
        }
    ),
    "Inbox": _object({"queued": COUNT, "claimed": COUNT, "dead": COUNT}),
    "Agent": _object(
        {
            **IDENTITY_FIELDS,
            "archived": BOOLEAN,
            "attached": BOOLEAN,
            "sessions": {"type": "array", "items": _ref("Session")},
            "inbox": _ref("Inbox"),
            "last_seen": TIME,
            "created_at": TIME,
            "archived_at": NULLABLE_TIME,
            # Its workspace's host and whether that host's broker runs (SPEC §13).
            "host": STRING,
            "host_alive": BOOLEAN,
            # Launch on mail is on; a wake run of it is going (docs/wake.md).
            "wake": BOOLEAN,
            "waking": BOOLEAN,
        }
    ),
    "Workspace": _object(
        {"slug": STRING, "path": STRING, "agents": {"type": "array", "items": _ref("Agent")}}
    ),
    "Totals": _object(
        {
            name: COUNT
            for name in (
                "workspaces",
                "agents",
                "attached",
                "archived",
                "queued",
                "claimed",
                "dead",
                "refused_sends",
            )
        }
    ),
    "Snapshot": _object(
        {
            "broker": _ref("Broker"),
            "workspaces": {"type": "array", "items": _ref("Workspace")},
            "totals": _ref("Totals"),
            "seq": COUNT,
        }
    ),
    "AgentPage": _object(
        {"agents": {"type": "array", "items": _ref("Agent")}, "next_cursor": NULLABLE_STRING}
    ),
    "Correspondent": _object(
        {"agent_id": STRING, "alias": NULLABLE_STRING, "address": NULLABLE_STRING}
    ),
    "Message": _object(
        {
            "message_id": STRING,
            "direction": {"enum": ["in", "out"]},
            "sender": _ref("Correspondent"),
            "recipient": _ref("Correspondent"),
            "body": STRING,
            "thread": NULLABLE_STRING,
            "reply_to": NULLABLE_STRING,
            "sent_at": TIME,
            "state": {"enum": [state.value for state in MessageState]},
            "attempts": COUNT,
            "dead_reason": NULLABLE_STRING,
            "settled_at": NULLABLE_TIME,
            "origin": {"enum": [origin.value for origin in Origin]},
            "hop": COUNT,
        }
    ),
    "MessagePage": _object(
        {"messages": {"type": "array", "items": _ref("Message")}, "next_cursor": NULLABLE_STRING}
    ),
    "Archived": _object({"agent": _ref("Agent"), "ended_sessions": COUNT}),
    "Unarchived": _object({"agent": _ref("Agent")}),
    "Purged": _object(
        {
            "agent_id": STRING,
            "alias": STRING,
            "address": STRING,
            "ended_sessions": COUNT,
            "dead_lettered": COUNT,
        }
    ),
    "NoArguments": {"type": "object", "maxProperties": 0},
    "Registered": _object(
        {
            "agent_id": STRING,
            "alias": STRING,
            "address": STRING,
            "durable": BOOLEAN,
            "session_id": STRING,
            "epoch": {"type": "integer", "minimum": 1},
            "token": STRING,
            "resume_token": STRING,
            "lease_ttl_s": {"type": "number"},
        }
    ),
    "Detached": _object({"detached": {"const": True}, "session_id": STRING}),
    "PageAccepted": _object({"message_id": STRING}),
    "MailboxToken": _object(MAILBOX_TOKEN_FIELDS),
    "NewMailboxToken": _object(
        {
            **MAILBOX_TOKEN_FIELDS,
            "token": {"type": "string", "description": "the token (`pmt_…`), shown only here"},
        }
    ),
    "MailboxTokens": _object({"tokens": {"type": "array", "items": _ref("MailboxToken")}}),
    "WakeRun": _object(
        {
            "run_id": STRING,
            "session_id": STRING,
            "host": STRING,
            "started_at": TIME,
            "ended_at": NULLABLE_TIME,
            "outcome": {"enum": [*(outcome.value for outcome in RunOutcome), None]},
            "exit_code": {"type": ["integer", "null"]},
            "acknowledged": COUNT,
            "log": NULLABLE_STRING,
        }
    ),
    "WakeAgent": _object(
        {
            "agent_id": STRING,
            "address": STRING,
            "implementation": STRING,
            "command": {"type": ["array", "null"], "items": STRING},
            "launch_args": {"type": ["array", "null"], "items": STRING},
            "max_runs_per_hour": {"type": "integer", "minimum": 1},
            "timeout_s": {"type": "number"},
            "updated_at": TIME,
            "launchable": BOOLEAN,
            "why_not": NULLABLE_STRING,
            "runs": {"type": "array", "items": _ref("WakeRun")},
        }
    ),
    "WakeAgents": _object({"agents": {"type": "array", "items": _ref("WakeAgent")}}),
    "WakeOff": _object({"agent_id": STRING, "was_on": BOOLEAN}),
    "Prompted": _object({"prompted": {"const": True}, "agent_id": STRING}),
    "HookClaimed": _object(
        {
            "agent_id": NULLABLE_STRING,
            "text": STRING,
            "tokens": {"type": "array", "items": STRING},
        }
    ),
}

#: The messaging API's answers, from their one definition (`pager.domain.results`): the MCP
#: tools advertise the same schemas as their `outputSchema`.
ANSWERS: dict[str, type] = {
    "Me": MeActing,
    "Whoami": results.Me,
    "MeSession": results.MeSession,
    "SendResult": results.SendResult,
    "Recipient": results.Recipient,
    "MailMessage": results.MailMessage,
    "ListedMessage": results.ListedMessage,
    "SentMessage": results.SentMessage,
    "HistoryMessage": results.HistoryMessage,
    "MeInbox": results.Waiting,
    "MeHistory": results.HistoryPage,
    "MeSent": results.SentPage,
    "Claim": results.Claim,
    "Claims": results.Claims,
    "AckResult": results.AckResult,
    "NotAppliedToken": results.NotAppliedToken,
    "RosterEntry": results.RosterEntry,
    "Roster": results.RosterPage,
    "MessageStatus": results.MessageStatus,
    "AliasResult": results.AliasResult,
    "TakenOver": results.TakenOver,
    "SessionRef": results.SessionRef,
    "Reservation": reservation_results.ReservationView,
    "Reserved": reservation_results.Reserved,
    "Released": reservation_results.Released,
    "Reservations": reservation_results.ReservationList,
    "ReservationConflict": reservation_results.CheckConflict,
    "ReservationCheck": reservation_results.CheckResult,
}
_ANSWER_NAMES = {cls: name for name, cls in ANSWERS.items()}


def _answer_ref(cls: type) -> Schema:
    name = _ANSWER_NAMES.get(cls)
    return object_schema(cls, _answer_ref) if name is None else _ref(name)


SCHEMAS.update({name: object_schema(cls, _answer_ref) for name, cls in ANSWERS.items()})

#: The request bodies that are components, from their one definition (`pager.requests`);
#: the others are written inline in their route, from theirs.
REQUESTS: dict[str, type] = {
    "RegisterRequest": requests.RegisterRequest,
    "HttpDelivery": requests.HttpDelivery,
    "UnixDelivery": requests.UnixDelivery,
    "HookClaimRequest": requests.HookClaimRequest,
    "HookAckRequest": requests.HookAckRequest,
    "WakeOn": requests.WakeOnRequest,
}
_REQUEST_NAMES = {cls: name for name, cls in REQUESTS.items()}


def _request_ref(cls: type) -> Schema:
    name = _REQUEST_NAMES.get(cls)
    return request_schema(cls, _request_ref) if name is None else _ref(name)


SCHEMAS.update({name: request_schema(cls, _request_ref) for name, cls in REQUESTS.items()})
#: A page (`pages.parse_page`): the body of `/v1/notify`, the `page` of `/v1/me/notify`.
SCHEMAS["Page"] = PAGE


#: Why each error status is answered (the `code` in the body is one of `ErrorCode`).
ERRORS: dict[int, str] = {
    400: "invalid input (`validation_failed`), naming what is wrong; nothing changed. On"
    " `/v1/me/…` with the local secret also: neither `workspace` nor `harness` given, a"
    " `workspace` that is not an existing directory, a malformed `harness`",
    401: "missing or wrong credential (`unauthenticated`); a session token may also answer"
    " `expired` or `ended`",
    403: "a cross-origin request (an `Origin` that is not the broker's)",
    404: "not found (`not_found`): no such agent, message or token; on `/v1/me/…`, no"
    " session is known for the `harness` given, or no identity holds the name asked for",
    409: "the request conflicts with the current state (`conflict`, `alias_conflict`)",
    413: "the body is over the request cap (`oversized_content`)",
    421: "the `Host` is not the broker's loopback address",
    429: "over a send rate (`rate_limited`, with `retry_after_s`; see docs/messaging.md)",
    503: "the broker cannot use its database right now (`unavailable`): its disk is full or"
    " failing, or the database is busy; the message says what to do",
}
#: Statuses every route may answer: the edge guard's refusals.
EDGE = (403, 421)
#: Statuses every route with a credential may answer: it reads or writes the store.
STORE = (503,)


@attrs.frozen
class Route:
    """One `/v1` route as the document describes it."""

    method: str
    path: str  # OpenAPI template: `{agent_id}`
    operation_id: str
    summary: str
    credential: str | None  # SECRET, SESSION or None
    ok: tuple[int, str, Schema | None]  # status, description, JSON schema (None: see `media`)
    errors: tuple[int, ...] = ()
    parameters: tuple[Schema, ...] = ()
    body: Schema | None = None
    body_required: bool = True
    media: str = "application/json"


def _agent_id() -> Schema:
    return {
        "name": "agent_id",
        "in": "path",
        "required": True,
        "description": "the agent's id (`agt_…`)",
        "schema": STRING,
    }


LIMIT = {
    "name": "limit",
    "in": "query",
    "required": False,
    "description": f"page size, 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})",
    "schema": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT, "default": DEFAULT_LIMIT},
}


def _cursor(view: str) -> Schema:
    return {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "`next_cursor` of the previous page of this view, unchanged (opaque)",
        "schema": {"type": "string", "pattern": cursor_pattern(view), "format": f"{view}-cursor"},
    }


ACTION_BODY = _ref("NoArguments")


def _action(name: str, summary: str, result: str, *, conflict: bool) -> Route:
    return Route(
        "post",
        f"/v1/agents/{{agent_id}}/{name}",
        f"{name}Agent",
        summary,
        SECRET,
        (200, f"the agent was {name}d", _ref(result)),
        errors=(400, 401, 404, *((409,) if conflict else ()), 413),
        parameters=(_agent_id(),),
        body=ACTION_BODY,
        body_required=False,
    )


def _query_of(cls: type) -> tuple[Schema, ...]:
    """Request class `cls` (`pager.requests`) as query parameters (the route reads its fields
    from the query string)."""
    schema = request_schema(cls)
    required = set(schema.get("required", []))
    return tuple(
        {"name": name, "in": "query", "required": name in required, "schema": field}
        for name, field in schema["properties"].items()
    )


def _me(
    method: str,
    path: str,
    operation_id: str,
    summary: str,
    result: str,
    *,
    body: type | None = None,
    query: tuple[Schema, ...] = (),
    errors: tuple[int, ...] = (400, 401, 404, 413),
) -> Route:
    """A `/v1/me/…` route; `body`: its request class (`pager.requests`), a tool's the same."""
    return Route(
        method,
        f"/v1/me{path}",
        operation_id,
        summary,
        SESSION_OR_SECRET,
        (200, summary, _ref(result)),
        errors=errors,
        parameters=query,
        body=None if body is None else request_schema(body),
    )


def _tool(spec: type[ToolSpec]) -> type:
    return spec.request


ME_ROUTES: tuple[Route, ...] = (
    Route(
        "get",
        "/v1/reservations",
        "listReservations",
        "Every workspace's edit reservations in force (the operator's view; the TUI's)",
        SECRET,
        (200, "the reservations, by workspace and pattern", _ref("Reservations")),
        errors=(400, 401),
    ),
    Route(
        "delete",
        "/v1/reservations/{reservation_id}",
        "breakReservation",
        "Break anyone's edit reservation (`pager reservations break`); the local secret only",
        SECRET,
        (200, "the reservation, ended", _ref("Reservation")),
        errors=(401, 404),
        parameters=(
            {
                "name": "reservation_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "maxLength": 64},
            },
        ),
    ),
    _me("get", "", "me", "Who this request acts as (a session, or the person)", "Me"),
    _me(
        "post",
        "/send",
        "meSend",
        "Send a message (the `send` tool)",
        "SendResult",
        body=_tool(Send),
        errors=(400, 401, 404, 409, 413, 429),
    ),
    _me(
        "get",
        "/inbox",
        "meInbox",
        "Waiting mail, oldest first, without claiming it",
        "MeInbox",
        query=_query_of(requests.ListingRequest),
    ),
    _me(
        "post",
        "/claim",
        "meClaim",
        "Claim waiting mail (the `fetch` tool); acknowledge each token after handling it",
        "Claims",
        body=_tool(Fetch),
    ),
    _me(
        "post", "/ack", "meAck", "Acknowledge claims (the `ack` tool)", "AckResult", body=_tool(Ack)
    ),
    _me(
        "get",
        "/roster",
        "meRoster",
        "Who can be reached, one page at a time (the `roster` tool)",
        "Roster",
        query=_query_of(_tool(Roster)),
    ),
    _me(
        "get",
        "/history",
        "meHistory",
        "Past messages, read-only (the `history` tool)",
        "MeHistory",
        query=_query_of(_tool(History)),
        errors=(400, 401, 404, 413),
    ),
    _me(
        "get",
        "/sent",
        "meSent",
        "The latest sends with their delivery state, newest first",
        "MeSent",
        query=_query_of(requests.ListingRequest),
    ),
    Route(
        "get",
        "/v1/me/sent/{message_id}",
        "meSentOne",
        "The delivery state of one message sent (the `message_status` tool)",
        SESSION_OR_SECRET,
        (200, "its delivery state", _ref("MessageStatus")),
        errors=(400, 401, 404, 413),
        parameters=({"name": "message_id", "in": "path", "required": True, "schema": STRING},),
    ),
    Route(
        "post",
        "/v1/me/claim-identity",
        "meClaimIdentity",
        "Take over the identity holding a name (`pager claim`): when its holder is not"
        " attached, or with `force`",
        SESSION_OR_SECRET,
        (200, "the identity now held", _ref("AliasResult")),
        errors=(400, 401, 404, 409, 413),
        body=request_schema(requests.ClaimIdentityRequest),
    ),
    Route(
        "post",
        "/v1/me/notify",
        "meNotify",
        "Page someone, or yourself, with a structured message (`pager notify`, `pager run`;"
        " docs/paging.md)",
        SESSION_OR_SECRET,
        (200, "the page was sent", _ref("SendResult")),
        errors=(400, 401, 404, 409, 413, 429),
        body=request_schema(requests.NotifyRequest),
    ),
    _me(
        "post",
        "/alias",
        "meAlias",
        "Rename (the `update_agent_alias` tool)",
        "AliasResult",
        body=_tool(UpdateAgentAlias),
        errors=(400, 401, 404, 409, 413),
    ),
    _me(
        "get",
        "/reservations",
        "meReservations",
        "Edit reservations in force, of this workspace or all (the `reservations` tool)",
        "Reservations",
        query=_query_of(_tool(Reservations)),
    ),
    _me(
        "post",
        "/reservations",
        "meReserve",
        "Reserve paths or globs, all or nothing (the `reserve` tool); 409 `conflict` names"
        " each holder",
        "Reserved",
        body=_tool(Reserve),
        errors=(400, 401, 404, 409, 413),
    ),
    *(
        attrs.evolve(
            _me(
                method,
                path,
                operation_id,
                "Release your reservations of these patterns, or all without a body (the"
                " `release` tool)",
                "Released",
                body=_tool(Release),
            ),
            body_required=False,
        )
        for method, path, operation_id in (
            ("delete", "/reservations", "meRelease"),
            ("post", "/reservations/release", "meReleasePost"),
        )
    ),
    _me(
        "post",
        "/reservations/check",
        "meCheckReservations",
        "What an edit hook asks before a tool writes: the exclusive reservations of other live"
        " agents holding these paths (none: go ahead); one read, no write",
        "ReservationCheck",
        body=requests.CheckReservationsRequest,
    ),
)


ROUTES: tuple[Route, ...] = (
    Route(
        "post",
        "/v1/register",
        "register",
        "Create or rejoin an identity and open a session (the identity rules decide which)",
        SECRET,
        (201, "a session of the identity", _ref("Registered")),
        errors=(400, 401, 409, 413),
        body=_ref("RegisterRequest"),
    ),
    Route(
        "post",
        "/v1/sessions/current/detach",
        "detach",
        "End the calling session gracefully (its identity and mail stay)",
        SESSION,
        (200, "the session is detached", _ref("Detached")),
        errors=(401, 413),
    ),
    Route(
        "post",
        "/v1/sessions/current/prompted",
        "prompted",
        "Say that the session's person typed a prompt into its harness: the session's next"
        " send starts a new chain (the loop guard), within the agent's budget of restarts"
        " (`chain_resets_per_hour`; past it 429). For plugins and extensions; never for a"
        " prompt Pager's own delivery caused",
        SESSION,
        (200, "the chain starts again", _ref("Prompted")),
        errors=(401, 413, 429),
    ),
    Route(
        "get",
        "/v1/sessions/current/events",
        "sessionEvents",
        "The session's event stream (SSE): holds the lease while open; `ready`, `mail` (mail"
        " waits that nobody took; nothing claimed), `ended`, `closing` events and heartbeat"
        " comments",
        SESSION,
        (200, "an open text/event-stream", None),
        errors=(401,),
        media="text/event-stream",
    ),
    Route(
        "post",
        "/v1/hook/claim",
        "hookClaim",
        "Claim waiting mail of a conversation's identity, rendered for a harness hook",
        SECRET,
        (200, "the rendered mail and the claim tokens to acknowledge", _ref("HookClaimed")),
        errors=(400, 401, 404, 413),
        body=_ref("HookClaimRequest"),
    ),
    Route(
        "post",
        "/v1/hook/ack",
        "hookAck",
        "Acknowledge claims a hook handed to its harness",
        SECRET,
        (200, "which tokens were applied", _ref("AckResult")),
        errors=(400, 401, 404, 413),
        body=_ref("HookAckRequest"),
    ),
    Route(
        "get",
        "/v1/snapshot",
        "snapshot",
        "The whole broker state: workspaces, agents (archived ones too), totals, latest event"
        " seq. Reading never changes delivery state",
        SECRET,
        (200, "the snapshot", _ref("Snapshot")),
        errors=(400, 401),
        parameters=(
            {
                "name": "agents",
                "in": "query",
                "required": False,
                "description": "`false`: only the totals and seq, `workspaces` left empty"
                " (cheap whatever the size of the store)",
                "schema": {"enum": ["true", "false"]},
            },
        ),
    ),
    Route(
        "get",
        "/v1/agents",
        "listAgents",
        "Agents in agent-id order, a page at a time",
        SECRET,
        (200, "one page of agents", _ref("AgentPage")),
        errors=(400, 401),
        parameters=(
            {
                "name": "workspace",
                "in": "query",
                "required": False,
                "description": "only agents of the workspace with this slug",
                "schema": {"type": "string", "minLength": 1},
            },
            {
                "name": "archived",
                "in": "query",
                "required": False,
                "description": "only archived (`true`) or only visible (`false`) agents",
                "schema": {"enum": ["true", "false"]},
            },
            LIMIT,
            _cursor("agents"),
        ),
    ),
    Route(
        "get",
        "/v1/agents/{agent_id}",
        "getAgent",
        "One agent",
        SECRET,
        (200, "the agent", _ref("Agent")),
        errors=(400, 401, 404),
        parameters=(_agent_id(),),
    ),
    Route(
        "get",
        "/v1/agents/{agent_id}/messages",
        "agentMessages",
        "An agent's messages, newest first, a page at a time (read-only)",
        SECRET,
        (200, "one page of messages", _ref("MessagePage")),
        errors=(400, 401, 404),
        parameters=(
            _agent_id(),
            {
                "name": "state",
                "in": "query",
                "required": False,
                "description": "only messages in this delivery state",
                "schema": {"enum": [state.value for state in MessageState]},
            },
            {
                "name": "direction",
                "in": "query",
                "required": False,
                "description": "received (`in`), sent (`out`) or both (default)",
                "schema": {"enum": ["in", "out", "both"], "default": "both"},
            },
            LIMIT,
            _cursor("messages"),
        ),
    ),
    _action(
        "archive",
        "Archive an agent: its sessions end (`ended`), it is hidden, its mail waits",
        "Archived",
        conflict=True,
    ),
    _action(
        "unarchive",
        "Show an archived agent again",
        "Unarchived",
        conflict=True,
    ),
    _action(
        "purge",
        "Delete an agent: its sessions end (`ended`, purged), its waiting mail is dead-lettered"
        " (`purged`); survivors keep their history",
        "Purged",
        conflict=False,
    ),
    Route(
        "get",
        "/v1/events",
        "operatorEvents",
        "The operator stream (SSE): events `{seq, at, type, data}`; with `Last-Event-ID: N`"
        " every retained event after N first (`0`: from the oldest), then live ones",
        SECRET,
        (200, "an open text/event-stream", None),
        errors=(400, 401),
        parameters=(
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": "resume after this event seq (a non-negative integer; `0`"
                " replays every retained event)",
                "schema": EVENT_ID,
            },
            {
                "name": "last_event_id",
                "in": "query",
                "required": False,
                "description": "the same, for clients that cannot set headers (the header"
                " wins when both are sent)",
                "schema": EVENT_ID,
            },
        ),
        media="text/event-stream",
    ),
    *ME_ROUTES,
    Route(
        "post",
        "/v1/notify",
        "notify",
        "Page the mailbox token's identity (docs/paging.md); answers 202 once the page is stored",
        MAILBOX,
        (202, "stored; delivered like any message", _ref("PageAccepted")),
        errors=(400, 401, 404, 413, 429),
        parameters=(
            {
                "name": "to",
                "in": "query",
                "required": False,
                "description": "whom the script means to page: refused unless it names the"
                " token's identity",
                "schema": TO_ADDRESS,
            },
        ),
        body=_ref("Page"),
    ),
    Route(
        "post",
        "/v1/tokens",
        "createToken",
        "Make a mailbox token for one identity (`pager token create`)",
        SECRET,
        (201, "the token, shown this once", _ref("NewMailboxToken")),
        errors=(400, 401, 404, 409, 413),
        body=request_schema(requests.CreateTokenRequest),
    ),
    Route(
        "get",
        "/v1/tokens",
        "listTokens",
        "The mailbox tokens (never the tokens themselves)",
        SECRET,
        (200, "the tokens, oldest first", _ref("MailboxTokens")),
        errors=(400, 401),
        parameters=(
            {
                "name": "revoked",
                "in": "query",
                "required": False,
                "description": "true: revoked ones too",
                "schema": {"enum": ["true", "false"]},
            },
        ),
    ),
    Route(
        "delete",
        "/v1/tokens/{token_id}",
        "revokeToken",
        "Revoke a mailbox token (`pager token revoke`)",
        SECRET,
        (200, "the token as it is now", _ref("MailboxToken")),
        errors=(401, 404),
        parameters=(
            {
                "name": "token_id",
                "in": "path",
                "required": True,
                "schema": {"type": "string", "pattern": MAILBOX_ID},
            },
        ),
    ),
    Route(
        "get",
        "/v1/wake",
        "listWake",
        "The agents with launch on mail on, each with its latest runs (`pager wake list`)",
        SECRET,
        (200, "every agent with launch on mail on", _ref("WakeAgents")),
        errors=(400, 401),
    ),
    Route(
        "put",
        "/v1/agents/{agent_id}/wake",
        "wakeOn",
        "Turn launch on mail on for an agent, or change its settings (`pager wake on`);"
        " the person only: a session token is refused",
        SECRET,
        (200, "its settings now", _ref("WakeAgent")),
        errors=(400, 401, 404, 409, 413),
        parameters=(_agent_id(),),
        body=_ref("WakeOn"),
    ),
    Route(
        "delete",
        "/v1/agents/{agent_id}/wake",
        "wakeOff",
        "Turn launch on mail off for an agent (`pager wake off`)",
        SECRET,
        (200, "whether it was on", _ref("WakeOff")),
        errors=(400, 401, 404),
        parameters=(_agent_id(),),
    ),
    Route(
        "get",
        "/v1/export",
        "export",
        "The whole store as JSON Lines, streamed: one record per identity, then per message"
        " (oldest first), each with its format version `v` (docs/cli.md)",
        SECRET,
        (200, "JSON Lines, one record per line", None),
        errors=(400, 401),
        parameters=(
            {
                "name": "since",
                "in": "query",
                "required": False,
                "description": "only messages sent at or after this time (ISO 8601; UTC when"
                " it names no offset)",
                "schema": {"type": "string", "format": "date-time"},
            },
        ),
        media="application/jsonl",
    ),
    Route(
        "get",
        "/v1/openapi.json",
        "openapi",
        "This document",
        None,
        (200, "the OpenAPI 3.1 document", {"type": "object"}),
    ),
)


def _security(credential: str | None) -> list[Schema]:
    if credential is None:
        return []
    if credential == MAILBOX:
        return [{MAILBOX: []}]
    if credential == SESSION_OR_SECRET:
        return [
            {SESSION: []},
            {SECRET: [], PERSON_WORKSPACE: []},
            {SECRET: [], HARNESS_PROCESS: []},
        ]
    return [{credential: []}]


def _operation(route: Route) -> Schema:
    status, description, schema = route.ok
    content: Schema = {route.media: {"schema": schema} if schema is not None else {}}
    if route.media == "text/event-stream":
        content = {route.media: {"schema": SSE_EVENT}}
    responses: dict[str, Schema] = {str(status): {"description": description, "content": content}}
    store = STORE if route.credential is not None else ()
    for code in sorted({*route.errors, *EDGE, *store}):
        responses[str(code)] = {
            "description": ERRORS[code],
            "content": {"application/json": {"schema": _ref("Error")}},
        }
    operation: Schema = {
        "operationId": route.operation_id,
        "summary": route.summary,
        "responses": responses,
        "security": _security(route.credential),
    }
    if route.parameters:
        operation["parameters"] = list(route.parameters)
    if route.body is not None:
        operation["requestBody"] = {
            "required": route.body_required,
            "content": {"application/json": {"schema": route.body}},
        }
    return operation


def build_document() -> Schema:
    paths: dict[str, Schema] = {}
    for route in ROUTES:
        paths.setdefault(route.path, {})[route.method] = _operation(route)
    return {
        "openapi": "3.1.0",
        "info": {
            "title": "Pager broker",
            "version": VERSION,
            "description": "The `/v1` HTTP API of the Pager broker (loopback only). Errors are"
            " `{error: {code, message, …}}`; codes: "
            + ", ".join(f"`{code.value}`" for code in ErrorCode)
            + ". See docs/http-api.md.",
        },
        "paths": paths,
        "components": {
            "schemas": SCHEMAS,
            "securitySchemes": {
                SECRET: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "the contents of `secret` in the state directory",
                },
                SESSION: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a session token from POST /v1/register",
                },
                PERSON_WORKSPACE: {
                    "type": "apiKey",
                    "in": "query",
                    "name": "workspace",
                    "description": "with the local secret on `/v1/me/…`: act as the person at"
                    " the terminal in this workspace (an existing directory, as an absolute"
                    " path); unused with a session token",
                },
                HARNESS_PROCESS: {
                    "type": "apiKey",
                    "in": "query",
                    "name": "harness",
                    "description": "with the local secret on `/v1/me/…`: act as the session"
                    " the hook of this harness process bound, `pid:start time` (404 when none"
                    f" is known; at most {HARNESS_MAX} characters matching `{HARNESS_PATTERN}`)",
                },
                MAILBOX: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "a mailbox token (`pmt_…`) from POST /v1/tokens: it pages"
                    " one identity (POST /v1/notify) and does nothing else",
                },
            },
        },
    }


def declared_query(document: Schema) -> dict[tuple[str, str], tuple[str, ...]]:
    """Each operation's query parameters, by (path, method): those it declares, and those its
    credentials are given in (`?workspace=`, `?harness=` with the local secret)."""
    in_query = {
        name: scheme["name"]
        for name, scheme in document["components"]["securitySchemes"].items()
        if scheme.get("in") == "query"
    }
    declared: dict[tuple[str, str], tuple[str, ...]] = {}
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            names = [p["name"] for p in operation.get("parameters", ()) if p["in"] == "query"]
            for requirement in operation.get("security", ()):
                names += [in_query[scheme] for scheme in requirement if scheme in in_query]
            declared[path, method] = tuple(dict.fromkeys(names))
    return declared


def openapi_blueprint() -> Blueprint:
    bp = Blueprint("v1_openapi", __name__, url_prefix="/v1")
    built = build_document()
    document = json.dumps(built)
    # Every described route refuses a query parameter it does not declare, before it runs.
    bp.before_app_request(refuse_undeclared(declared_query(built)))

    @bp.get("/openapi.json")
    async def openapi() -> Response:
        return Response(document, mimetype="application/json")

    return bp
