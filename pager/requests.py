"""The one definition of every request shape: what a client may send to an edge.

Each request is a frozen attrs class. `pager.wire.structure` builds it from JSON (strictly:
unknown fields refused, no type coercion, the `check` bounds below enforced), and
`pager.schema.request_schema` writes its JSON Schema, which the MCP tools advertise as their
`inputSchema` and the OpenAPI document as their request bodies and query parameters. So a
schema and its parser cannot disagree.

A field's metadata (set by `arg`):

- `check`: JSON Schema keywords the structurer enforces (lengths, bounds, patterns, items);
- `schema`: keywords for the schema only, enforced later by the domain in its own words (an
  address, a workspace directory) or merely descriptive;
- `wire`: the field's JSON name where it is no Python name (`with`).
"""

from __future__ import annotations

import base64
from typing import Any, Literal

import attrs

from pager.config import Limits
from pager.domain.harness_process import HARNESS_MAX, HARNESS_PATTERN
from pager.domain.job_ids import JOB_ID_MAX, JOB_ID_PATTERN
from pager.domain.names import ALIAS_MAX
from pager.domain.pages import EXIT_CODE_RANGE, FIELDS_MAX, KEY_PATTERN, STATUS_MAX
from pager.domain.wake import (
    MAX_COMMAND_CHARS,
    MAX_COMMAND_PARTS,
    MAX_RUNS_PER_HOUR,
    MAX_TIMEOUT,
    MIN_TIMEOUT,
)

Schema = dict[str, Any]

#: The default body cap (SPEC §9), in the schema as characters (the broker counts UTF-8 bytes).
BODY_CAP = Limits().body_cap
#: The longest long poll (`fetch`, the hook's claim).
MAX_WAIT_S = 60.0
#: Page sizes of the listings that have no tool (`inbox`, `sent`).
LIST_MAX = 200
#: The longest a mailbox token may live (ten years): `expires_s` beyond is surely a mistake.
EXPIRES_MAX_S = 10 * 365 * 86400
LABEL_PATTERN = r"^[^\x00-\x1f\x7f]{1,64}$"
LOOPBACK_URL = "^http://(127\\.0\\.0\\.1|localhost|\\[::1\\]):"


def arg(
    default: Any = attrs.NOTHING,
    *,
    check: Schema | None = None,
    schema: Schema | None = None,
    description: str | None = None,
    wire: str | None = None,
) -> Any:
    """A request field; see the module doc for what each keyword becomes."""
    metadata: dict[str, Any] = {"check": check or {}}
    documented = {**(schema or {}), **({"description": description} if description else {})}
    if documented:
        metadata["schema"] = documented
    if wire is not None:
        metadata["wire"] = wire
    return attrs.field(default=default, metadata=metadata)


def cursor_pattern(view: str) -> str:
    """The shape of the cursors `view` hands out (`views.encode_cursor`: unpadded URL-safe
    base64 of `{"v":"<view>","k":…}`, so its first characters spell the view)."""
    head = f'{{"v":"{view}","k":'.encode()
    fixed = base64.urlsafe_b64encode(head[: len(head) // 3 * 3]).decode()
    return f"^{fixed}[A-Za-z0-9_-]+$"


# What the domain enforces beyond the structurer, said in JSON Schema so that a value the
# schemas accept is one the broker accepts (tests/e2e/test_openapi_properties.py sends what
# the document allows). What no schema can say has a `format` of its own: `existing-directory`
# and the cursors.

NAME: Schema = {"minLength": 1, "maxLength": 200}
#: `names.parse_address`: an alias, `alias@slug` or an agent id.
ADDRESS: Schema = {
    "pattern": "^(agt_[0-9a-hjkmnp-tv-z]{16}|(?![Aa][Gg][Tt]_)[A-Za-z0-9][A-Za-z0-9._-]"
    f"{{0,{ALIAS_MAX - 1}}}(@[A-Za-z0-9._-]{{1,40}}-[0-9A-Fa-f]{{6}})?)$",
}
#: `names.validate_alias` (SPEC §7): the prefix `agt_` is kept for agent ids.
ALIAS: Schema = {
    "maxLength": ALIAS_MAX,
    "pattern": f"^(?![Aa][Gg][Tt]_)[A-Za-z0-9][A-Za-z0-9._-]{{0,{ALIAS_MAX - 1}}}$",
}
#: `resolve_workspace`: an absolute path, no NUL, naming an existing directory.
WORKSPACE_PATH: Schema = {
    "pattern": "^/[^\\u0000]*$",
    "format": "existing-directory",
    "description": "an existing directory on the broker's machine, as an absolute path",
}
#: `service._implementation`: 1-64 of `A-Z a-z 0-9 _ -`, with a letter or digit.
IMPLEMENTATION_ID: Schema = {
    "maxLength": 64,
    "pattern": "^[A-Za-z0-9_-]*[A-Za-z0-9][A-Za-z0-9_-]*$",
    "description": "an implementation id, e.g. `claude`, `shell`",
}
#: A page's own fields (`pages.parse_page`); any other field is kept as given.
PAGE_TEXT: Schema = {"type": "string", "pattern": "\\S", "maxLength": BODY_CAP}
PAGE: Schema = {
    "type": "object",
    "description": "a page (docs/paging.md): `message` (or `body`) and any fields, shown to the"
    " reader as `key: value` lines and `logs` as a block",
    "properties": {
        "message": PAGE_TEXT,
        "body": PAGE_TEXT,
        "job_id": {"type": "string", "minLength": 1, "maxLength": JOB_ID_MAX,
                   "pattern": JOB_ID_PATTERN,
                   "description": "the job this page is about; it becomes the thread"},
        "status": {"type": "string", "minLength": 1, "maxLength": STATUS_MAX},
        "exit_code": {"type": "integer", "minimum": EXIT_CODE_RANGE[0],
                      "maximum": EXIT_CODE_RANGE[1]},
        "logs": {"type": "string", "maxLength": BODY_CAP},
        "project": {"type": "string", "maxLength": BODY_CAP},
    },
    "oneOf": [{"required": ["message"]}, {"required": ["body"]}],
    "propertyNames": {"pattern": f"^{KEY_PATTERN.pattern}$"},
    "maxProperties": FIELDS_MAX + 2,
    "additionalProperties": True,
}  # fmt: skip


# -- the MCP tools' arguments (the same on `/v1/me/…`)


@attrs.frozen
class WhoamiRequest:
    pass


@attrs.frozen
class SendRequest:
    to: str = arg(check=NAME, schema=ADDRESS)
    # Schema only: the broker refuses an empty body and one over its byte cap itself, saying
    # why in words.
    body: str = arg(schema={"pattern": r"\S", "maxLength": BODY_CAP})
    thread: str | None = arg(None, check={"maxLength": 200})
    reply_to: str | None = arg(
        None, check={"maxLength": 200}, description="id of the message this answers"
    )
    idempotency_key: str | None = arg(
        None, check=NAME, description="a resend with the same key returns the original"
    )


@attrs.frozen
class FetchRequest:
    limit: int = arg(10, check={"minimum": 1, "maximum": 100})
    wait_s: float = arg(
        0.0,
        check={"minimum": 0, "maximum": MAX_WAIT_S},
        description="seconds to wait if none is waiting",
    )


@attrs.frozen
class AckRequest:
    tokens: list[str] = arg(
        check={"minItems": 1, "maxItems": 100, "items": NAME},
        description="claim tokens from fetch",
    )


@attrs.frozen
class RosterRequest:
    scope: Literal["workspace", "all"] = arg("workspace")
    limit: int = arg(100, check={"minimum": 1, "maximum": 500})
    cursor: str | None = arg(
        None,
        check={"pattern": cursor_pattern("roster"), "maxLength": 1000},
        schema={"format": "roster-cursor"},
        description="next_cursor of the previous page, unchanged",
    )


@attrs.frozen
class HistoryRequest:
    # `with` is a Python keyword: the field is `with_` (the API's keyword), the wire name `with`.
    with_: str | None = arg(
        None,
        check={"maxLength": 200},
        schema=ADDRESS,
        description="address or id of the other agent",
        wire="with",
    )
    thread: str | None = arg(None, check={"maxLength": 200})
    limit: int = arg(50, check={"minimum": 1, "maximum": 200})
    full: bool = arg(False, description="show each body whole (not cut); use a small limit")


@attrs.frozen
class MessageStatusRequest:
    message_id: str = arg(check=NAME)


@attrs.frozen
class UpdateAgentAliasRequest:
    alias: str = arg(check={"minLength": 1, "maxLength": 64}, schema=ALIAS)
    force: bool = arg(
        False,
        description="become the agent holding the alias (its id, inbox, history); its session"
        " ends and your current identity is left behind",
    )


@attrs.frozen
class MoveToWorkspaceRequest:
    path: str = arg(check={"minLength": 1, "maxLength": 4096})


#: A path or pattern given to a reservation tool: the bounds the structurer enforces, and
#: (schema only) what pager/domain/reservations.py refuses in its own words: control
#: characters, and in a pattern character classes, brace lists and backslashes. What no schema
#: can say (inside the workspace, no `..`) is its `format`.
RESERVATION_PATH: Schema = {"minLength": 1, "maxLength": 1024}
_NO_CONTROL = "\\x00-\\x1f\\x7f"
CHECKED_PATHS: Schema = {"minItems": 1, "maxItems": 100, "items": RESERVATION_PATH}
PATH_ITEMS: Schema = {
    "items": {
        **RESERVATION_PATH,
        "pattern": f"^[^{_NO_CONTROL}]*$",
        "format": "workspace-path",
        "description": "a path in the workspace, relative to its top or absolute under it",
    }
}
PATTERN_ITEMS: Schema = {
    "items": {
        **RESERVATION_PATH,
        "pattern": f"^[^{_NO_CONTROL}\\[\\]{{}}\\\\]*$",
        "format": "workspace-pattern",
        "description": "a path or glob in the workspace (* and ? within a directory, ** across"
        " them), relative to its top or absolute under it",
    }
}


@attrs.frozen
class ReserveRequest:
    paths: list[str] = arg(
        check=CHECKED_PATHS,
        schema=PATTERN_ITEMS,
        description="paths or globs relative to the workspace's top (src/api/**, README.md,"
        " *.py; * and ? stay within a directory, ** spans them; a path holds what is beneath"
        " it), or absolute under it",
    )
    shared: bool = arg(
        False, description="share it: others may reserve it shared too, none exclusively"
    )
    ttl_s: float | None = arg(
        None,
        check={"minimum": 60, "maximum": 86400},
        description="how long it lasts, 60-86400 s (default 3600); reserve again to renew",
    )
    reason: str | None = arg(
        None, check={"maxLength": 500}, schema={"pattern": "^[^\\x00]*$"}, description="why"
    )


@attrs.frozen
class ReleaseRequest:
    paths: list[str] | None = arg(
        None,
        check=CHECKED_PATHS,
        schema=PATTERN_ITEMS,
        description="the patterns to release, as reserved; absent: all of yours",
    )


@attrs.frozen
class ReservationsRequest:
    scope: Literal["workspace", "all"] = arg("workspace")


@attrs.frozen
class CheckReservationsRequest:
    """`POST /v1/me/reservations/check`: what an edit hook asks before a tool writes."""

    paths: list[str] = arg(
        check=CHECKED_PATHS,
        schema=PATH_ITEMS,
        description="the paths a tool is about to write, absolute or relative to the"
        " workspace's top",
    )


# -- `/v1/me/…` routes that have no tool


@attrs.frozen
class ListingRequest:
    """`?limit=` of `inbox` and `sent`."""

    limit: int = arg(50, check={"minimum": 1, "maximum": LIST_MAX})


@attrs.frozen
class ClaimIdentityRequest:
    """`POST /v1/me/claim-identity`: `pager claim NAME [--force]`."""

    name: str = arg(check={"minLength": 1, "maxLength": 64}, schema=ALIAS)
    force: bool = arg(False)


@attrs.frozen
class NotifyRequest:
    """`POST /v1/me/notify`: `pager notify` and `pager run` (SPEC §8.2)."""

    page: dict[str, Any] = arg(schema=PAGE)  # its fields are `pages.parse_page`'s to check
    to: str | None = arg(
        None,
        check=NAME,
        schema=ADDRESS,
        description="alias, alias@slug or agent id; null: yourself",
    )
    run: bool = arg(
        False, description="a page about a job `pager run` watched: script origin, hop 0"
    )


@attrs.frozen
class CreateTokenRequest:
    """`POST /v1/tokens`: `pager token create TO [--label L] [--expires D]`."""

    to: str = arg(check=NAME, schema=ADDRESS)
    # Where a bare alias in `to` is looked up (the person's directory); needed, so that a
    # token never pages someone of the same name in another workspace by surprise.
    workspace: str = arg(check={"minLength": 1, "maxLength": 4096}, schema=WORKSPACE_PATH)
    label: str | None = arg(None, check={"pattern": LABEL_PATTERN})
    expires_s: float | None = arg(None, check={"exclusiveMinimum": 0, "maximum": EXPIRES_MAX_S})


# -- the wrapper's and hooks' requests (`/v1/register`, `/v1/hook/…`), launch on mail


@attrs.frozen
class HttpDelivery:
    kind: Literal["http"] = arg()
    url: str = arg(schema={"pattern": LOOPBACK_URL})
    path: None = arg(None)


@attrs.frozen
class UnixDelivery:
    kind: Literal["unix"] = arg()
    path: str = arg(schema={"pattern": "^/"})
    url: None = arg(None)


@attrs.frozen
class RegisterRequest:
    """The body of `POST /v1/register` (SPEC §6)."""

    workspace: str = arg(schema=WORKSPACE_PATH)
    implementation: str = arg(schema=IMPLEMENTATION_ID)
    session_name: str | None = arg(None, schema=ALIAS)
    conversation_key: str | None = arg(None, schema={"minLength": 1, "maxLength": 256})
    delivery: HttpDelivery | UnixDelivery | None = arg(None)
    force: bool = arg(False)
    resume_token: str | None = arg(None)


@attrs.frozen
class HookClaimRequest:
    """The body of `POST /v1/hook/claim`."""

    implementation: str = arg()
    conversation_key: str = arg()
    max_chars: int = arg(9000, schema={"minimum": 200, "maximum": 1_000_000})
    # Long poll: answer as soon as mail waits, or after this long.
    wait_s: float = arg(0.0, schema={"minimum": 0, "maximum": MAX_WAIT_S})
    # The wrapper's session token from the hook's environment: binds a conversation the
    # broker does not know yet (a harness whose ids the wrapper cannot choose) to its session.
    session_token: str | None = arg(None)
    # A person typed a prompt into the harness (not a wake Pager caused): the identity's next
    # send starts a new chain (SPEC §8.1).
    prompted: bool = arg(False)
    # The harness process the hook runs under (`pid:start time`): commands its agent runs find
    # the session through it (SPEC §4.2, rule 2).
    harness: str | None = arg(
        None,
        schema={
            "maxLength": HARNESS_MAX,
            "pattern": HARNESS_PATTERN,
            "description": "a harness process as `pager hook` names it: `pid:start time`",
        },
    )


@attrs.frozen
class HookAckRequest:
    """The body of `POST /v1/hook/ack`."""

    agent_id: str = arg()
    tokens: list[str] = arg()


@attrs.frozen
class WakeOnRequest:
    """The body of `PUT /v1/agents/{id}/wake` (`pager wake on`); bounds are the domain's
    (`pager.domain.wake.check_settings`)."""

    command: list[str] | None = arg(
        None,
        schema={
            "items": {"minLength": 1, "maxLength": MAX_COMMAND_CHARS, "pattern": "^[^\\x00]+$"},
            "minItems": 1,
            "maxItems": MAX_COMMAND_PARTS,
        },
        description="the headless arguments instead of the manifest's [wake.launch] args"
        " (templates: {conversation_key}, {prompt}, …); null or absent: the manifest's (each"
        " field: null is the same as absent, the default)",
    )
    max_runs_per_hour: int | None = arg(None, schema={"minimum": 1, "maximum": MAX_RUNS_PER_HOUR})
    timeout_s: float | None = arg(None, schema={"minimum": MIN_TIMEOUT, "maximum": MAX_TIMEOUT})
