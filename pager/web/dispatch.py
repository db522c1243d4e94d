"""The ASGI dispatcher behind the edge guard: `/mcp` to the MCP SDK, everything else to Quart.

Every `/mcp` request is authenticated here from its own session token (SPEC §6, §12), never
from `Mcp-Session-Id`. The Caller reaches the tools through `current_caller`, a ContextVar:
the SDK hands each inbound JSON-RPC message to its handler in a copy of the context of the
ASGI task that received it (`JSONRPCDispatcher._spawn`, the same path its own
`auth_context_var` takes), and the 2026-07-28 JSON path runs the handler in that task.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from typing import Any

import trio

from pager.domain.api import Caller, MessagingApi
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.hints import Edge
from pager.domain.json_bounds import dumps, read_json
from pager.health import HealthBoard
from pager.web.guard import ASGIApp, Message, Receive, Scope, Send
from pager.web.store_trouble import unavailable_cause

log = logging.getLogger("pager.web.mcp")

#: The paths served by the MCP SDK.
MCP_PATHS = frozenset({"/mcp", "/mcp/"})

#: The authenticated session of the `/mcp` request being handled.
current_caller: contextvars.ContextVar[Caller | None] = contextvars.ContextVar(
    "pager_current_caller", default=None
)

#: Returns once the client of the `/mcp` request being handled hangs up. A tool that may wait
#: (a long-polling `fetch`) races its call against it: the SDK's JSON mode never reads again
#: once it has the body, so without this a poll would go on after its client left and claim
#: mail arriving later for nobody (offered again only after the ack wait). Only waiting calls
#: watch, because a watcher task per request costs every short call too.
current_hangup: contextvars.ContextVar[Callable[[], Awaitable[None]] | None] = (
    contextvars.ContextVar("pager_current_hangup", default=None)
)

#: A 401 must carry a challenge (RFC 9110 §11.6.1); this one names no OAuth resource
#: metadata, so clients keep using the static header they were configured with (SPEC §6).
_CHALLENGE = (b"www-authenticate", b'Bearer realm="pager"')

#: Request bodies up to this size are parsed on the event loop (well under a millisecond);
#: larger ones in a worker thread, so that parsing never holds up other requests.
READ_INLINE_MAX = 64 * 1024

#: JSON-RPC's code for JSON text the server refuses to parse, as the SDK answers it.
_PARSE_ERROR = -32700

_HOW_TO_AUTHENTICATE = (
    "send `Authorization: Bearer <session token>`; get a token by registering with "
    "POST /v1/register (or start the session with `pager <implementation>`)"
)


def bearer_token(values: Iterable[str | bytes]) -> str | None:
    """The token of a request's `Authorization` header, given all its values (the raw bytes
    of ASGI or the text of Quart's headers): None unless there is exactly one, and it is
    `Bearer` (any case) and one token without spaces. The one bearer parser of `/mcp` and
    every `/v1` route."""
    found = list(values)
    if len(found) != 1:
        return None  # none, or two credentials: which would the request act as?
    value = found[0]
    text = value.decode("latin-1") if isinstance(value, bytes) else value
    scheme, _, token = text.strip().partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or token.split() != [token]:  # none, or with a space
        return None
    return token


class McpDispatcher:
    """Routes `/mcp` (authenticated) to the MCP app and every other request to `web`."""

    def __init__(
        self, *, web: ASGIApp, mcp: ASGIApp, api: MessagingApi, board: HealthBoard | None = None
    ) -> None:
        self.web = web
        self.mcp = mcp
        self.api = api
        self.board = board  # marked when the store fails under an authentication

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] not in MCP_PATHS:
            await self.web(scope, receive, send)
            return
        caller = await self._authenticate(scope, send)
        if caller is None:
            return
        if scope["method"] != "POST":
            # Stateless JSON mode has no standalone stream and no session to delete; the SDK
            # would open a GET stream that never carries anything yet holds up shutdown.
            # 405 is the transport's sanctioned answer, and clients then just POST.
            await send_json(
                send,
                405,
                {"error": {"code": "method_not_allowed", "message": "/mcp takes POST only"}},
                extra_headers=[(b"allow", b"POST")],
            )
            return
        body = await _whole_body(receive)
        if body is None:
            return  # the client left, or the guard answers 413
        try:
            await read_request_json(body)
        except PagerError as err:
            # Bounded before the SDK parses it (pager/domain/json_bounds.py): a JSON-RPC error
            # shaped as the SDK's own parse errors, with Pager's code beside.
            error = {
                "code": _PARSE_ERROR,
                "message": err.text(Edge.MCP),
                "data": {"code": err.code},
            }
            await send_json(send, 400, {"jsonrpc": "2.0", "id": None, "error": error})
            return
        reset_caller = current_caller.set(caller)
        reset_hangup = current_hangup.set(partial(_until_hangup, receive))
        try:
            await self.mcp(scope, _replay(body, receive), send)
        finally:
            current_hangup.reset(reset_hangup)
            current_caller.reset(reset_caller)

    async def _authenticate(self, scope: Scope, send: Send) -> Caller | None:
        """The request's Caller, or None after answering with the error."""
        token = bearer_token(v for k, v in scope["headers"] if k.lower() == b"authorization")
        if token is None:
            await send_json(
                send,
                401,
                {
                    "error": {
                        "code": ErrorCode.UNAUTHENTICATED.value,
                        "message": f"/mcp needs a session token: {_HOW_TO_AUTHENTICATE}",
                    }
                },
                extra_headers=[_CHALLENGE],
            )
            return None
        try:
            return await self.api.authenticate(token)
        except PagerError as err:
            headers = [_CHALLENGE] if err.http_status == 401 else []
            await send_json(
                send, err.http_status, {"error": err.to_json(Edge.MCP)}, extra_headers=headers
            )
        except Exception as exc:
            unavailable = unavailable_cause(exc, board=self.board)
            if unavailable is not None:  # the store's fault, by kind: one line, no traceback
                log.warning("authenticating an /mcp request: unavailable: %s", unavailable.message)
                await send_json(
                    send, unavailable.http_status, {"error": unavailable.to_json(Edge.MCP)}
                )
                return None
            # The traceback stays in the log; the token never goes there.
            log.exception("authenticating an /mcp request failed")
            await send_json(
                send,
                500,
                {"error": {"code": ErrorCode.INTERNAL.value, "message": "the broker failed"}},
            )
        return None


async def read_request_json(raw: bytes | str) -> object:
    """A request's JSON body by the bounded reader: every `/v1` route's and `/mcp`'s."""
    if len(raw) <= READ_INLINE_MAX:
        return read_json(raw)
    return await trio.to_thread.run_sync(read_json, raw)


async def _whole_body(receive: Receive) -> bytes | None:
    """The request body (the guard caps its size), or None if the client left first."""
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] != "http.request":
            return None
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """`receive` for the SDK: the body already read, then whatever comes next."""
    pending = [{"type": "http.request", "body": body, "more_body": False}]

    async def replayed() -> Message:
        return pending.pop() if pending else await receive()

    return replayed


async def _until_hangup(receive: Receive) -> None:
    """Return once the client hangs up; only called after the SDK has read the whole body."""
    while (await receive())["type"] != "http.disconnect":
        pass


async def send_json(
    send: Send,
    status: int,
    body: dict[str, Any],
    *,
    extra_headers: Iterable[tuple[bytes, bytes]] = (),
) -> None:
    data = dumps(body).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(data)).encode()),
                *extra_headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": data})
