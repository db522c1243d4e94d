"""The QuartTrio application behind the edge guard (ARCHITECTURE.md, Web)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, cast

from quart import Blueprint, Response, jsonify
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException

from pager.domain.errors import PagerError
from pager.web.guard import ASGIApp, EdgeGuard, allowed_hosts


def create_quart_app(health: dict[str, Any], blueprints: Sequence[Blueprint] = ()) -> QuartTrio:
    """The routes served by Quart; `health` is the broker's identity for `GET /health`."""
    app = QuartTrio("pager")
    app.config["RESPONSE_TIMEOUT"] = None  # long-lived streams end on shutdown, not on a timer
    for blueprint in blueprints:
        app.register_blueprint(blueprint)

    @app.get("/health")
    async def get_health() -> Response:
        return jsonify({"ok": True, **health})

    @app.errorhandler(PagerError)
    async def pager_error(exc: PagerError) -> Response:
        body = json.dumps({"error": exc.to_json()})
        return Response(body, status=exc.http_status, mimetype="application/json")

    @app.errorhandler(HTTPException)
    async def http_error(error: HTTPException) -> tuple[Response, int, dict[str, str]]:
        code = error.code or 500
        name = (error.name or "error").lower().replace(" ", "_")
        # A 405 names the methods the route takes (RFC 9110 §15.5.6).
        allow = {k: v for k, v in error.get_headers() if k.lower() == "allow"}
        return jsonify({"error": {"code": name, "message": error.description}}), code, allow

    return app


def create_app(
    health: dict[str, Any],
    *,
    host: str,
    port: int,
    request_cap: int,
    blueprints: Sequence[Blueprint] = (),
) -> ASGIApp:
    """The whole ASGI application: the edge guard in front of every route (the web server
    puts the `/mcp` dispatcher behind it when it serves MCP)."""
    app = cast(ASGIApp, create_quart_app(health, blueprints))
    return EdgeGuard(app, hosts=allowed_hosts(host, port), request_cap=request_cap)
