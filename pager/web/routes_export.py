"""`GET /v1/export` (local secret): the whole store as JSON Lines, streamed (SPEC §6).

The records come through the store's `Exports` port, one consistent read per export, pulled a
batch at a time in a worker thread, so memory stays constant whatever the store holds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from datetime import UTC, datetime
from typing import Any

import trio
from quart import Blueprint, Response, request

from pager.domain.display import json_for_terminal
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.exports import Exports
from pager.domain.json_bounds import dumps
from pager.web.query_guard import query
from pager.web.routes_v1 import require_secret

#: Records per batch pulled from the store (and per write to the client).
BATCH = 1000
MEDIA = "application/jsonl"


def parse_since(text: str | None) -> float | None:
    """`since` as epoch seconds: an ISO 8601 date or time (UTC when it names no offset)."""
    if text is None:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise PagerError(
            ErrorCode.VALIDATION_FAILED,
            f"since must be an ISO 8601 date or time such as 2026-12-01T09:00:00Z, not"
            f" {text[:64]!r}",
            parameter="since",
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.timestamp()


def export_blueprint(exports: Exports, secret: str) -> Blueprint:
    bp = Blueprint("v1_export", __name__, url_prefix="/v1")

    @bp.get("/export")
    async def export() -> Response:
        require_secret(secret, request.headers)
        since = parse_since(query(("since",)).get("since"))
        response = Response(_stream(exports, since), mimetype=MEDIA)
        response.timeout = None  # Quart's RESPONSE_TIMEOUT would cut a large export
        return response

    return bp


async def _stream(exports: Exports, since: float | None) -> AsyncIterator[bytes]:
    reader = await exports.open(since=since)

    def encoded(records: list[dict[str, Any]]) -> bytes:  # in a worker thread, off the loop
        # `pager export` may print to a terminal: what could drive one is a `\uXXXX` escape.
        return b"".join(
            json_for_terminal(dumps(record, ensure_ascii=False)).encode() + b"\n"
            for record in records
        )

    try:
        while records := await reader.batch(BATCH):
            yield await trio.to_thread.run_sync(encoded, records)
    finally:
        await reader.close()  # shielded: it closes on the way out of a cancelled stream too
