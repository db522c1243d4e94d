"""Edit reservations over plain HTTP (docs/reservations.md): `/v1/me/reservations` acts as the
caller (a session token, or the person with the local secret and `?workspace=`, as every
`/v1/me` route); `GET /v1/reservations` lists every workspace's and `DELETE
/v1/reservations/{id}` breaks anyone's, with the local secret only (the operator's).

The list, reserve and release routes parse their arguments with the MCP tools' request classes
and make the tools' calls (pager/web/mcp_tools.py), so their validation, errors and answers are
the tools' own. `POST /v1/me/reservations/check` is what edit hooks ask before a tool writes:
one indexed read, no write.
"""

from __future__ import annotations

from quart import Blueprint, Response, request

from pager.domain.json_bounds import dumps
from pager.requests import CheckReservationsRequest
from pager.service import BrokerService
from pager.web.mcp_tools import Release, Reservations, Reserve
from pager.web.query_guard import query
from pager.web.routes_me import me_caller
from pager.web.routes_v1 import json_body, require_secret
from pager.wire import structure, structure_query, unstructure


def _answer(result: object, status: int = 200) -> tuple[Response, int]:
    return Response(dumps(unstructure(result)), mimetype="application/json"), status


def reservations_blueprint(service: BrokerService, secret: str) -> Blueprint:
    bp = Blueprint("v1_reservations", __name__, url_prefix="/v1")

    @bp.get("/me/reservations")
    async def listing() -> tuple[Response, int]:
        caller, _ = await me_caller(service, secret)
        query = {k: v for k, v in request.args.items() if k not in ("workspace", "harness")}
        spec = Reservations(structure_query(query, Reservations.request, what="reservations"))
        return _answer(await spec.call(service, caller))

    @bp.post("/me/reservations")
    async def reserve() -> tuple[Response, int]:
        caller, _ = await me_caller(service, secret)
        spec = Reserve.parse(await json_body())  # type: ignore[arg-type]  # a non-object is refused
        return _answer(await spec.call(service, caller))

    async def release() -> tuple[Response, int]:
        caller, _ = await me_caller(service, secret)
        body = await json_body() if await request.get_data() else {}
        spec = Release.parse(body)  # type: ignore[arg-type]  # a non-object is refused
        return _answer(await spec.call(service, caller))

    bp.add_url_rule("/me/reservations", "release", release, methods=["DELETE"])
    bp.add_url_rule("/me/reservations/release", "release_post", release, methods=["POST"])

    @bp.post("/me/reservations/check")
    async def check() -> tuple[Response, int]:
        caller, _ = await me_caller(service, secret)
        args = structure(await json_body(), CheckReservationsRequest, what="check")
        return _answer(await service.check_reservations(caller, paths=list(args.paths)))

    @bp.get("/reservations")
    async def every() -> tuple[Response, int]:
        require_secret(secret, request.headers)  # the operator's view (the TUI)
        query(())
        return _answer(await service.every_reservation())

    @bp.delete("/reservations/<reservation_id>")
    async def break_one(reservation_id: str) -> tuple[Response, int]:
        require_secret(secret, request.headers)  # the operator's alone: never a session's
        return _answer(await service.break_reservation(reservation_id))

    return bp
