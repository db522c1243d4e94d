"""Launch on mail (docs/wake.md): `GET /v1/wake`, `PUT` and `DELETE /v1/agents/{id}/wake`,
with the local secret only (a session token is refused: an agent cannot turn it on)."""

from __future__ import annotations

import json
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, ValidationError
from quart import Blueprint, Response, request

from pager.domain.wake import (
    MAX_COMMAND_CHARS,
    MAX_COMMAND_PARTS,
    MAX_RUNS_PER_HOUR,
    MAX_TIMEOUT,
    MIN_TIMEOUT,
)
from pager.wake_service import WakeService
from pager.web.mcp_tools import validation_failed
from pager.web.routes_operator import query
from pager.web.routes_v1 import json_body, require_secret

CommandPart = Annotated[str, Field(min_length=1, max_length=MAX_COMMAND_CHARS)]


class WakeOn(BaseModel):
    """`PUT /v1/agents/{id}/wake`: `pager wake on NAME [--command …] [--max-runs-per-hour N]
    [--timeout D]`; what is not given takes its default."""

    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)

    command: Annotated[
        list[CommandPart] | None, Field(min_length=1, max_length=MAX_COMMAND_PARTS)
    ] = None
    max_runs_per_hour: Annotated[int | None, Field(ge=1, le=MAX_RUNS_PER_HOUR)] = None
    timeout_s: Annotated[float | None, Field(ge=MIN_TIMEOUT, le=MAX_TIMEOUT)] = None


def _answer(result: object) -> Response:
    return Response(json.dumps(result), mimetype="application/json")


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
        try:
            args = WakeOn.model_validate(await json_body())
        except ValidationError as exc:
            raise validation_failed("wake", exc) from None
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
