"""`/v1/me/…`: the everyday commands of SPEC §4.1 over plain HTTP (SPEC §6).

A request acts as the session of its bearer token, or, with the local secret and the
`workspace` query parameter, as the person at the terminal in that workspace (SPEC §4.2;
`workspace` is unused with a session token, whose identity is already known). Each
route that has an MCP tool parses its arguments with that tool's request class and calls the
tool's operation (pager/web/mcp_tools.py), so its validation, errors and results are the tool's
own: a JSON body for POST, the query string for GET. Every request shape is `pager.requests`'s.
"""

from __future__ import annotations

import hmac

import attrs
from quart import Blueprint, Response, request

from pager.domain.api import Caller
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.harness_process import check_harness
from pager.domain.json_bounds import dumps
from pager.domain.pages import parse_page
from pager.domain.results import ActingAs, Claims, HistoryPage, MeActing
from pager.requests import ClaimIdentityRequest, ListingRequest, NotifyRequest
from pager.service import BrokerService
from pager.web.mcp_tools import (
    Ack,
    Fetch,
    History,
    MessageStatus,
    Roster,
    Send,
    ToolSpec,
    UpdateAgentAlias,
    envelope,
)
from pager.web.routes_v1 import bearer, json_body
from pager.wire import structure, structure_query, unstructure


async def me_caller(service: BrokerService, secret: str) -> tuple[Caller, str]:
    """Who the request acts as, and as what (`session` or `person`)."""
    credential = bearer(request.headers)
    workspace = request.args.get("workspace")
    if credential is None:
        raise PagerError(
            ErrorCode.UNAUTHENTICATED,
            "send `Authorization: Bearer <session token>` to act as a session, or the local"
            " secret with `?workspace=<directory>` to act as the person at the terminal",
        )
    if hmac.compare_digest(credential.encode(), secret.encode()):
        harness = request.args.get("harness")
        if harness is not None:
            found = service.harness_caller(check_harness(harness))
            if found is None:
                raise PagerError(
                    ErrorCode.NOT_FOUND,
                    f"no Pager session is known for the harness process {harness}: its hook has"
                    " not run (yet), or the harness was not set up for Pager",
                    harness=harness,
                )
            return found, "harness"
        if not workspace:
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                "with the local secret, name the workspace the person acts in:"
                " `?workspace=<absolute path of a directory>` (one identity per workspace)",
                arguments=["workspace"],
            )
        return await service.person(workspace), "person"
    return await service.authenticate(credential), "session"  # its token names its identity


def _query() -> dict[str, str]:
    return {k: v for k, v in request.args.items() if k not in ("workspace", "harness")}


def _from_query(spec: type[ToolSpec]) -> ToolSpec:
    """The tool's call with its arguments from the query string (numbers and booleans as text)."""
    return spec(structure_query(_query(), spec.request, what=spec.name))


def _listing(name: str) -> ListingRequest:
    return structure_query(_query(), ListingRequest, what=name)


async def _from_body(spec: type[ToolSpec]) -> ToolSpec:
    return spec.parse(await json_body())  # type: ignore[arg-type]  # structure refuses a non-object


def _answer(result: object) -> Response:
    """An answer (`pager.domain.results`) as JSON, by the one converter."""
    return Response(dumps(unstructure(result)), mimetype="application/json")


def me_blueprint(service: BrokerService, secret: str) -> Blueprint:
    bp = Blueprint("v1_me", __name__, url_prefix="/v1/me")
    whole = service.config.limits.body_cap  # never cut: the reader asked for the message

    @bp.get("")
    async def whoami() -> Response:
        caller, acting_as = await me_caller(service, secret)
        me = await service.whoami(caller)
        return _answer(MeActing(**attrs.asdict(me, recurse=False), acting_as=ActingAs(acting_as)))

    @bp.post("/send")
    async def send() -> Response:
        caller, _ = await me_caller(service, secret)
        return _answer(await (await _from_body(Send)).call(service, caller))

    @bp.post("/notify")
    async def notify() -> Response:
        caller, _ = await me_caller(service, secret)
        args = structure(await json_body(), NotifyRequest, what="notify")
        page = parse_page(args.page)
        return _answer(await service.notify(caller, to=args.to, page=page, run=args.run))

    @bp.get("/inbox")
    async def inbox() -> Response:
        caller, _ = await me_caller(service, secret)
        return _answer(await service.inbox(caller, limit=_listing("inbox").limit))

    @bp.post("/claim")
    async def claim() -> Response:
        caller, _ = await me_caller(service, secret)
        fetched: Claims = await (await _from_body(Fetch)).call(service, caller)
        claims = (  # whole, in the SPEC §8 envelope, for `pager read`
            attrs.evolve(claim, envelope=envelope(unstructure(claim.message), whole))
            for claim in fetched.claims
        )
        return _answer(Claims(claims=tuple(claims)))

    @bp.post("/ack")
    async def ack() -> Response:
        caller, _ = await me_caller(service, secret)
        return _answer(await (await _from_body(Ack)).call(service, caller))

    @bp.get("/roster")
    async def roster() -> Response:
        caller, _ = await me_caller(service, secret)
        return _answer(await _from_query(Roster).call(service, caller))

    @bp.get("/history")
    async def history() -> Response:
        caller, _ = await me_caller(service, secret)
        args = _from_query(History)
        listed: HistoryPage = await args.call(service, caller)
        if args.args.full:  # whole, for `pager history --full`
            messages = (
                attrs.evolve(message, envelope=envelope(unstructure(message), whole))
                for message in listed.messages
            )
            listed = HistoryPage(messages=tuple(messages))
        return _answer(listed)

    @bp.get("/sent")
    async def sent() -> Response:
        caller, _ = await me_caller(service, secret)
        return _answer(await service.sent(caller, limit=_listing("sent").limit))

    @bp.get("/sent/<message_id>")
    async def sent_one(message_id: str) -> Response:
        caller, _ = await me_caller(service, secret)
        args = MessageStatus.parse({"message_id": message_id})
        return _answer(await args.call(service, caller))

    @bp.post("/alias")
    async def alias() -> Response:
        caller, _ = await me_caller(service, secret)
        return _answer(await (await _from_body(UpdateAgentAlias)).call(service, caller))

    @bp.post("/claim-identity")
    async def claim_identity() -> Response:
        caller, _ = await me_caller(service, secret)
        args = structure(await json_body(), ClaimIdentityRequest, what="claim-identity")
        return _answer(await service.claim_identity(caller, name=args.name, force=args.force))

    return bp
