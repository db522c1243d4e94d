"""`/v1` operator routes (SPEC §6): the snapshot, read views of agents and their messages, and
the archive / unarchive / purge actions. Every route needs the local secret.

Query strings are validated strictly: an unknown or repeated parameter, or a bad value, is
answered with 400 `validation_failed` naming the parameter, and nothing is read or changed.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from quart import Blueprint, Response, request

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.json_bounds import dumps, read_json
from pager.domain.records import MessageState
from pager.domain.views import DEFAULT_LIMIT, MAX_LIMIT, decode_cursor
from pager.operator import OperatorService
from pager.requests import cursor_pattern
from pager.web.query_guard import invalid, query
from pager.web.routes_v1 import require_secret
from pager.wire import unstructure

DIRECTIONS = ("in", "out", "both")
STATES = tuple(state.value for state in MessageState)


def parse_limit(args: dict[str, str]) -> int:
    text = args.get("limit")
    if text is None:
        return DEFAULT_LIMIT
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= MAX_LIMIT):
        raise invalid("limit", f"limit must be a whole number from 1 to {MAX_LIMIT}")
    return int(text)


def parse_choice(args: dict[str, str], name: str, choices: tuple[str, ...]) -> str | None:
    value = args.get(name)
    if value is not None and value not in choices:
        raise invalid(name, f"{name} must be one of {', '.join(choices)}, not {value[:64]!r}")
    return value


_CURSOR_SHAPES = {view: re.compile(cursor_pattern(view)) for view in ("agents", "messages")}
#: A messages cursor holds a message's rowid: an SQLite integer.
_ROWIDS = range(-(2**63), 2**63)


def parse_cursor(args: dict[str, str], view: str) -> str | None:
    """The cursor, if it has the shape of one of `view`'s (the document's pattern); whether
    it decodes is `decode_cursor`'s to say."""
    value = args.get("cursor")
    if value is None:
        return None
    if not value:
        raise invalid("cursor", "cursor is empty; leave it out to start from the first page")
    # A key no page could end on is refused here, not met by SQLite (an int it cannot hold).
    if _CURSOR_SHAPES[view].fullmatch(value) is None or (
        view == "messages" and decode_cursor(view, value, int) not in _ROWIDS
    ):
        raise invalid(
            "cursor",
            "cursor is not a cursor this view handed out; pass next_cursor from the previous"
            " page unchanged, or leave it out to start from the first page",
        )
    return value


async def empty_body() -> None:
    """Actions take no arguments: the body is empty or `{}`."""
    raw = await request.get_data(as_text=False)
    if not raw.strip():
        return
    try:
        body = read_json(raw)
    except PagerError:
        body = None  # whatever is wrong with it, the answer is the same
    if body != {}:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            "this action takes no arguments: send an empty body or {}",
        )


def _json(value: object) -> Response:
    return Response(dumps(unstructure(value)), mimetype="application/json")


def operator_blueprint(operator: OperatorService, secret: str) -> Blueprint:
    bp = Blueprint("v1_operator", __name__, url_prefix="/v1")

    @bp.get("/snapshot")
    async def snapshot() -> Response:
        require_secret(secret, request.headers)
        agents = parse_choice(query(("agents",)), "agents", ("true", "false"))
        return _json(await operator.snapshot(agents=agents != "false"))

    @bp.get("/agents")
    async def agents() -> Response:
        require_secret(secret, request.headers)
        args = query(("workspace", "archived", "limit", "cursor"))
        workspace = args.get("workspace")
        if workspace is not None and not workspace:
            raise invalid("workspace", "workspace must be a workspace slug (e.g. api-3f9a1c)")
        archived = parse_choice(args, "archived", ("true", "false"))
        page = await operator.agents(
            workspace=workspace,
            archived=None if archived is None else archived == "true",
            limit=parse_limit(args),
            cursor=parse_cursor(args, "agents"),
        )
        return _json(page)

    @bp.get("/agents/<agent_id>")
    async def agent(agent_id: str) -> Response:
        require_secret(secret, request.headers)
        query(())
        return _json(await operator.agent(agent_id))

    @bp.get("/agents/<agent_id>/messages")
    async def messages(agent_id: str) -> Response:
        require_secret(secret, request.headers)
        args = query(("state", "direction", "limit", "cursor"))
        state = parse_choice(args, "state", STATES)
        page = await operator.messages(
            agent_id,
            state=None if state is None else MessageState(state),
            direction=parse_choice(args, "direction", DIRECTIONS) or "both",
            limit=parse_limit(args),
            cursor=parse_cursor(args, "messages"),
        )
        return _json(page)

    def action(name: str, run: Callable[[str], Awaitable[Any]]) -> None:
        async def act(agent_id: str) -> Response:
            require_secret(secret, request.headers)
            query(())
            await empty_body()
            return _json(await run(agent_id))

        bp.add_url_rule(f"/agents/<agent_id>/{name}", f"agent_{name}", act, methods=["POST"])

    action("archive", operator.archive)
    action("unarchive", operator.unarchive)
    action("purge", operator.purge)
    return bp
