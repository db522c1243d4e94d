"""`/v1` routes for connectors: register, detach, and the session's event stream (SPEC §6)."""

from __future__ import annotations

import hmac
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from typing import Any

import trio
from quart import Blueprint, Response, request

from pager.domain.api import Caller
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.json_bounds import dumps
from pager.requests import HookAckRequest, HookClaimRequest, RegisterRequest
from pager.service import BrokerService
from pager.sse import HEARTBEAT, frame
from pager.web.dispatch import bearer_token, read_request_json
from pager.wire import structure, unstructure

#: Comment lines on an idle event stream, so proxies and clients see it is alive.
HEARTBEAT_S = 15.0


def bearer(headers: Any) -> str | None:
    """The bearer token of a Quart request's headers (`bearer_token`: exactly one
    `Authorization: Bearer <token>`), or None."""
    return bearer_token(headers.getlist("Authorization"))


def require_secret(secret: str, headers: Any) -> None:
    """The local operator credential, compared in constant time."""
    given = bearer(headers)
    if given is None or not hmac.compare_digest(given.encode(), secret.encode()):
        raise PagerError(
            ErrorCode.UNAUTHENTICATED,
            "this route needs the local secret: send `Authorization: Bearer <contents of the"
            " secret file in the state directory>`",
        )


async def session_caller(service: BrokerService, headers: Any) -> Caller:
    token = bearer(headers)
    if token is None:
        raise PagerError(
            ErrorCode.UNAUTHENTICATED,
            "send `Authorization: Bearer <session token>`; POST /v1/register gives one",
        )
    return await service.authenticate(token)


async def json_body() -> object:
    """The request's JSON body through the one bounded reader (`read_request_json`): past a
    bound, `400 validation_failed` naming it, before anything is stored."""
    return await read_request_json(await request.get_data(as_text=False))


def v1_blueprint(
    service: BrokerService, secret: str, shutdown: Callable[[], Awaitable[None]]
) -> Blueprint:
    bp = Blueprint("v1_sessions", __name__, url_prefix="/v1")

    @bp.post("/register")
    async def register() -> tuple[Response, int]:
        require_secret(secret, request.headers)
        body = structure(await json_body(), RegisterRequest)
        result = await service.register(body)
        return Response(dumps(result), mimetype="application/json"), 201

    @bp.post("/hook/claim")
    async def hook_claim() -> Response:
        require_secret(secret, request.headers)
        body = structure(await json_body(), HookClaimRequest)
        result = await service.hook_claim(
            implementation=body.implementation,
            conversation_key=body.conversation_key,
            max_chars=body.max_chars,
            wait_s=body.wait_s,
            session_token=body.session_token,
            prompted=body.prompted,
            harness=body.harness,
        )
        return Response(dumps(result), mimetype="application/json")

    @bp.post("/hook/ack")
    async def hook_ack() -> Response:
        require_secret(secret, request.headers)
        body = structure(await json_body(), HookAckRequest)
        result = await service.hook_ack(agent_id=body.agent_id, tokens=list(body.tokens))
        return Response(dumps(unstructure(result)), mimetype="application/json")

    @bp.post("/sessions/current/detach")
    async def detach() -> Response:
        caller = await session_caller(service, request.headers)
        return Response(dumps(await service.detach(caller)), mimetype="application/json")

    @bp.post("/sessions/current/prompted")
    async def prompted() -> Response:
        caller = await session_caller(service, request.headers)
        return Response(dumps(await service.prompted(caller)), mimetype="application/json")

    @bp.get("/sessions/current/events")
    async def events() -> Response:
        caller = await session_caller(service, request.headers)
        response = Response(
            _session_stream(service, caller, request.headers, shutdown),
            mimetype="text/event-stream",
            headers={"Cache-Control": "no-store"},
        )
        response.timeout = None  # Quart's RESPONSE_TIMEOUT would cut the stream
        return response

    return bp


#: Why the stream of a session whose identity was taken over ends (its token lives on).
TAKEN_OVER = "its identity was taken over by another session; its calls now act as a new agent"


async def _session_stream(
    service: BrokerService,
    caller: Caller,
    headers: Any,
    shutdown: Callable[[], Awaitable[None]],
) -> AsyncIterator[bytes]:
    """Holds the lease while open (said again at each heartbeat, so an identity actor started
    again meanwhile learns of it); tells the connector when mail waits that nobody waits for
    (`mail`: it claims nothing) and when its session ends."""
    stream = object()
    ended = await service.stream_opened(caller, stream)
    bell = service.mail_bell(caller)
    seen = bell.rung
    try:
        yield frame("ready", {"session_id": caller.session_id, "epoch": caller.epoch})
        while True:
            outcome = await _next_event(ended, shutdown, partial(bell.wait_past, seen))
            if outcome == "mail":
                seen = bell.rung
                yield frame("mail", {})
                await service.stream_opened(caller, stream)  # as at a heartbeat
                continue
            if outcome == "closing":
                yield frame("closing", {"reason": "broker shutting down"})
                return
            if outcome == "ended":
                try:
                    await session_caller(service, headers)
                except PagerError as exc:
                    yield frame("ended", exc.to_json())
                    return
                # The token lives on (a forced takeover handed it a fresh identity).
                yield frame("ended", {"code": "ended", "message": "this session was replaced",
                                     "reason": TAKEN_OVER})  # fmt: skip
                return
            yield HEARTBEAT
            await service.stream_opened(caller, stream)
    finally:
        with trio.CancelScope(shield=True):
            await service.stream_closed(caller, stream)


async def _next_event(
    ended: trio.Event,
    shutdown: Callable[[], Awaitable[None]],
    mail: Callable[[], Awaitable[None]],
) -> str:
    """ "ended", "closing", "mail" or "heartbeat", whichever comes first."""
    outcome = "heartbeat"
    async with trio.open_nursery() as nursery:

        async def wait(what: str, fn: Callable[[], Awaitable[object]]) -> None:
            nonlocal outcome
            await fn()
            outcome = what
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait, "ended", ended.wait)
        nursery.start_soon(wait, "closing", shutdown)
        nursery.start_soon(wait, "mail", mail)
        nursery.start_soon(wait, "heartbeat", partial(trio.sleep, HEARTBEAT_S))
    return outcome
