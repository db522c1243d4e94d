"""Paging from scripts (SPEC §8.2, §6): `POST /v1/notify` with a mailbox token, and the
person's `POST/GET/DELETE /v1/tokens` with the local secret.

A mailbox token is good for `/v1/notify` only: every other route takes a session token or the
local secret, and the token is neither, so it reads nothing and pages nobody but its identity.
"""

from __future__ import annotations

from quart import Blueprint, Response, request

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.json_bounds import dumps
from pager.domain.pages import parse_page
from pager.requests import CreateTokenRequest
from pager.service import BrokerService
from pager.web.query_guard import query
from pager.web.routes_v1 import bearer, json_body, require_secret
from pager.wire import structure


def _answer(result: object, status: int = 200) -> tuple[Response, int]:
    return Response(dumps(result), mimetype="application/json"), status


def paging_blueprint(service: BrokerService, secret: str) -> Blueprint:
    bp = Blueprint("v1_paging", __name__, url_prefix="/v1")

    @bp.post("/notify")
    async def notify() -> tuple[Response, int]:
        token = bearer(request.headers)
        if token is None:
            raise PagerError(
                ErrorCode.UNAUTHENTICATED,
                "send `Authorization: Bearer pmt_…`, a mailbox token (`pager token create TO`)",
            )
        mailbox = await service.mailbox(token)  # before the body: a stranger learns nothing more
        to = query(("to",)).get("to")  # optional: a script may say whom it means to page
        page = parse_page(await json_body())
        sent = await service.notify_with_token(mailbox, page, to=to)
        return _answer({"message_id": sent.message_id}, 202)

    @bp.post("/tokens")
    async def create() -> tuple[Response, int]:
        require_secret(secret, request.headers)
        args = structure(await json_body(), CreateTokenRequest, what="tokens")
        made = await service.create_token(
            to=args.to, workspace=args.workspace, label=args.label, expires_s=args.expires_s
        )
        return _answer(made, 201)

    @bp.get("/tokens")
    async def listing() -> tuple[Response, int]:
        require_secret(secret, request.headers)
        revoked = query(("revoked",)).get("revoked", "false")
        if revoked not in ("true", "false"):
            raise PagerError(ErrorCode.VALIDATION_FAILED, "revoked must be true or false")
        return _answer(await service.list_tokens(revoked=revoked == "true"))

    @bp.delete("/tokens/<token_id>")
    async def revoke(token_id: str) -> tuple[Response, int]:
        require_secret(secret, request.headers)
        return _answer(await service.revoke_token(token_id))

    return bp
