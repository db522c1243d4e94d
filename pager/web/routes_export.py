"""`GET /v1/export` (local secret): the whole store as JSON Lines, streamed (SPEC §6).

One read-only connection and one read transaction per export, so the records are one
consistent view while the writer goes on; the records are pulled a batch at a time in a worker
thread, so memory stays constant whatever the store holds."""

from __future__ import annotations

import itertools
import json
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import trio
from quart import Blueprint, Response, request

from pager.domain.errors import ErrorCode, PagerError
from pager.store import messaging as ms
from pager.store._database import open_read_only
from pager.web.routes_operator import query
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


def export_blueprint(database: Path, secret: str) -> Blueprint:
    bp = Blueprint("v1_export", __name__, url_prefix="/v1")

    @bp.get("/export")
    async def export() -> Response:
        require_secret(secret, request.headers)
        since = parse_since(query(("since",)).get("since"))
        response = Response(_stream(database, since), mimetype=MEDIA)
        response.timeout = None  # Quart's RESPONSE_TIMEOUT would cut a large export
        return response

    return bp


async def _stream(database: Path, since: float | None) -> AsyncIterator[bytes]:
    conn = await trio.to_thread.run_sync(open_read_only, database)
    try:
        await trio.to_thread.run_sync(conn.execute, "BEGIN")
        records = ms.export_records(conn, since=since)
        while batch := await trio.to_thread.run_sync(_batch, records):
            yield batch
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(conn.close)


def _batch(records: Iterator[Any]) -> bytes:
    return b"".join(
        json.dumps(record, ensure_ascii=False).encode() + b"\n"
        for record in itertools.islice(records, BATCH)
    )
