"""The QuartTrio application behind the edge guard (ARCHITECTURE.md, Web)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, cast

from quart import Blueprint, Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from pager.domain.errors import ErrorCode, PagerError
from pager.domain.json_bounds import dumps
from pager.health import HealthBoard
from pager.launch.proof import CHALLENGE_BYTES
from pager.web.guard import ASGIApp, EdgeGuard, allowed_hosts
from pager.web.health_first import HealthAnswer, HealthFirst
from pager.web.store_trouble import unavailable_cause

log = logging.getLogger("pager.web")

#: HTTP statuses Werkzeug raises, as the codes of SPEC §8 (`not_found` and
#: `method_not_allowed` are Werkzeug's own names, kept: docs/decisions.md).
_HTTP_CODES: dict[int, ErrorCode] = {
    400: ErrorCode.VALIDATION_FAILED,
    413: ErrorCode.OVERSIZED_CONTENT,
    429: ErrorCode.RATE_LIMITED,
    500: ErrorCode.INTERNAL,
    503: ErrorCode.UNAVAILABLE,
}

_INTERNAL = PagerError(
    ErrorCode.INTERNAL,
    "the broker failed to handle this request; try again, and if it keeps failing, look at"
    " logs/broker.log in the state directory",
)


def _error_response(error: PagerError) -> Response:
    body = dumps({"error": error.to_json()})
    return Response(body, status=error.http_status, mimetype="application/json")


def create_quart_app(
    health: dict[str, Any],
    blueprints: Sequence[Blueprint] = (),
    prove: Callable[[str], str] | None = None,
    board: HealthBoard | None = None,
) -> QuartTrio:
    """The routes served by Quart; `health` is the broker's identity for `GET /health`,
    `board` what it reports degraded (a store failure a route meets marks it), and `prove`
    answers its `challenge` (pager/launch/proof.py)."""
    board = HealthBoard() if board is None else board
    app = QuartTrio("pager")
    app.config["RESPONSE_TIMEOUT"] = None  # long-lived streams end on shutdown, not on a timer
    for blueprint in blueprints:
        app.register_blueprint(blueprint)

    answer = HealthAnswer(health, board, prove)

    @app.get("/health")
    async def get_health() -> Response:
        # The plain forms are answered before Quart (pager/web/health_first.py); the rest here.
        challenge = request.args.get("challenge")
        if not answer.answers(challenge):
            raise PagerError(
                ErrorCode.VALIDATION_FAILED,
                f"challenge must be {2 * CHALLENGE_BYTES} lower-case hex digits",
            )
        return jsonify(answer(challenge))

    @app.errorhandler(PagerError)
    async def pager_error(exc: PagerError) -> Response:
        return _error_response(exc)

    @app.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> tuple[Response, int, dict[str, str]]:
        code = error.code or 500
        known = _HTTP_CODES.get(code)
        name = known.value if known else (error.name or "error").lower().replace(" ", "_")
        message = _INTERNAL.message if code == 500 else error.description
        # A 405 names the methods the route takes (RFC 9110 §15.5.6).
        allow = {k: v for k, v in error.get_headers() if k.lower() == "allow"}
        return jsonify({"error": {"code": name, "message": message}}), code, allow

    @app.errorhandler(Exception)
    async def unexpected_error(error: Exception) -> Response:
        """Anything else a route raised: still the JSON error of SPEC §6, never Quart's page."""
        unavailable = unavailable_cause(error, board=board)
        where = f"{request.method} {request.path}"
        if unavailable is not None:  # the store's fault, by kind: one line, no traceback
            log.warning("%s: unavailable: %s", where, unavailable.message)
            return _error_response(unavailable)
        log.error("%s failed", where, exc_info=error)
        return _error_response(_INTERNAL)

    return app


def create_app(
    health: dict[str, Any],
    *,
    host: str,
    port: int,
    request_cap: int,
    blueprints: Sequence[Blueprint] = (),
    prove: Callable[[str], str] | None = None,
    board: HealthBoard | None = None,
) -> ASGIApp:
    """The whole ASGI application: the edge guard in front of every route, then the plain
    forms of `GET /health`, then Quart (the web server puts the `/mcp` dispatcher behind the
    guard when it serves MCP)."""
    board = HealthBoard() if board is None else board
    quart = cast(ASGIApp, create_quart_app(health, blueprints, prove, board))
    app = HealthFirst(quart, HealthAnswer(health, board, prove))
    return EdgeGuard(app, hosts=allowed_hosts(host, port), request_cap=request_cap)
