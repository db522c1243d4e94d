"""Launch on mail (docs/wake.md): `GET /v1/wake`, `PUT` and `DELETE /v1/agents/{id}/wake`,
with the local secret only (a session token is refused: an agent cannot turn it on)."""

from __future__ import annotations

from quart import Blueprint, Response, request

from pager.domain.json_bounds import dumps
from pager.requests import WakeOnRequest
from pager.wake_service import WakeService
from pager.web.query_guard import query
from pager.web.routes_v1 import json_body, require_secret
from pager.wire import structure


def _answer(result: object) -> Response:
    return Response(dumps(result), mimetype="application/json")


def wake_blueprint(wake: WakeService, secret: str) -> Blueprint:
    bp = Blueprint("v1_wake", __name__, url_prefix="/v1")

    @bp.get("/wake")
    async def listing() -> Response:
        require_secret(secret, request.headers)
        query(())
        return _answer(await wake.listing())

    @bp.put("/agents/<agent_id>/wake")
    async def turn_on(agent_id: str) -> Response:
        require_secret(secret, request.headers)
        query(())
        args = structure(await json_body(), WakeOnRequest)
        return _answer(
            await wake.turn_on(
                agent_id,
                command=args.command,
                max_runs_per_hour=args.max_runs_per_hour,
                timeout_s=args.timeout_s,
            )
        )

    @bp.delete("/agents/<agent_id>/wake")
    async def turn_off(agent_id: str) -> Response:
        require_secret(secret, request.headers)
        query(())
        return _answer(await wake.turn_off(agent_id))

    return bp
