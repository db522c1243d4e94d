"""Failures a route did not expect still answer the JSON error of SPEC §6 over real HTTP:
`unavailable` naming the disk when the store cannot write (and `/health` then says the store
is degraded), `internal` for anything else."""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

import httpx2
import pytest
import trio
from quart import Blueprint

from pager.health import HealthBoard
from pager.launch.broker_log import CappedLogFile, install_bounds
from pager.store import StoreUnwritable, as_fault
from pager.web.server import bind_listener, run_web_server

HEALTH = {"instance_id": "i1", "pid": 1, "version": "0", "schema_version": 2, "started_at": "t"}


def _disk_full(tmp_path: Path) -> sqlite3.Error:
    """A real SQLITE_FULL: a database that may not grow past its size, written on until it
    would have to."""
    conn = sqlite3.connect(tmp_path / "full.db")
    try:
        conn.execute("CREATE TABLE t (x BLOB)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        for _ in range(100):
            conn.execute("INSERT INTO t VALUES (zeroblob(1000))")
    except sqlite3.Error as exc:
        return exc
    finally:
        conn.close()
    raise AssertionError("the database never filled up")


@pytest.fixture
def board() -> HealthBoard:
    return HealthBoard()


@pytest.fixture
async def url(tmp_path: Path, board: HealthBoard) -> AsyncIterator[str]:
    full = _disk_full(tmp_path)
    bp = Blueprint("failing", __name__)

    @bp.get("/v1/bug")
    async def bug() -> str:
        raise RuntimeError("a bug, with a secret-looking detail: pst_xyz")

    @bp.post("/v1/full")
    async def full_disk() -> str:
        raise as_fault(full)  # what the writer raises where the COMMIT failed

    @bp.get("/v1/deep-bug")
    async def deep_bug() -> str:
        return str(_ping(0))  # a RecursionError of a thousand alternating frames, as cattrs's

    @bp.post("/v1/unwritable")
    async def unwritable() -> str:
        raise StoreUnwritable(tmp_path / "pager.db", "disk I/O error", fix="free space there")

    sock = bind_listener("127.0.0.1", None, None)
    stop = trio.Event()
    async with trio.open_nursery() as nursery:

        async def serve(*, task_status: trio.TaskStatus[str] = trio.TASK_STATUS_IGNORED) -> None:
            await run_web_server(
                host="127.0.0.1",
                sock=sock,
                health=HEALTH,
                request_cap=1024,
                shutdown_trigger=stop.wait,
                blueprints=[bp],
                board=board,
                task_status=task_status,
            )

        yield await nursery.start(serve)
        stop.set()
    sock.close()


def _ping(depth: int) -> int:
    return _pong(depth + 1) + 1


def _pong(depth: int) -> int:
    return _ping(depth + 1) + 1


async def _call(url: str, method: str, path: str) -> httpx2.Response:
    with trio.fail_after(10):
        async with httpx2.AsyncClient(timeout=10) as http:
            return await http.request(method, url + path)


async def test_app_unexpected_error_is_json_internal_and_logged(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A route's bug answers 500 `internal` as JSON, without its details; the log has them."""
    with caplog.at_level(logging.ERROR, logger="pager.web"):
        response = await _call(url, "GET", "/v1/bug")
    assert response.status_code == 500
    assert response.headers["content-type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == "internal"
    assert "pst_xyz" not in error["message"]
    assert any(record.exc_info and "GET /v1/bug" in record.message for record in caplog.records)


async def test_app_full_disk_is_unavailable_naming_the_disk(
    url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """SQLite's `database or disk is full`, raised by the store as `StoreFull`, is 503
    `unavailable` naming the disk; the log says so in one line (a fault of the kind, not a
    bug: no traceback)."""
    with caplog.at_level(logging.WARNING, logger="pager.web"):
        response = await _call(url, "POST", "/v1/full")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "unavailable"
    assert "disk" in error["message"]
    assert "full" in error["message"]
    [record] = [r for r in caplog.records if "/v1/full" in r.getMessage()]
    assert record.levelno == logging.WARNING
    assert record.exc_info is None


async def test_app_store_error_is_unavailable_with_its_fix(url: str) -> None:
    """A store error answers 503 `unavailable` with the store's own sentence (file, fix)."""
    response = await _call(url, "POST", "/v1/unwritable")
    assert response.status_code == 503
    error = response.json()["error"]
    assert error["code"] == "unavailable"
    assert "pager.db" in error["message"]
    assert "free space there" in error["message"]


async def test_app_store_trouble_marks_the_store_degraded_on_health(
    url: str, board: HealthBoard
) -> None:
    """An `unavailable` answer for a store cause marks `store` degraded with the same sentence;
    `/health` says so and still answers `ok: true` (the broker answers)."""
    refused = (await _call(url, "POST", "/v1/full")).json()["error"]
    health = (await _call(url, "GET", "/health")).json()
    assert health["ok"] is True
    assert health["status"] == "degraded"
    [entry] = health["degraded"]
    assert entry["kind"] == "store"
    assert entry["message"] == refused["message"]
    assert entry["since"] == board.snapshot()["degraded"][0]["since"]


async def test_app_bug_leaves_health_ok(url: str) -> None:
    """A route's bug (`internal`) is not infrastructure: health stays `ok`, no list."""
    assert (await _call(url, "GET", "/v1/bug")).status_code == 500
    health = (await _call(url, "GET", "/health")).json()
    assert health["status"] == "ok"
    assert "degraded" not in health


async def test_app_repeated_internal_errors_cost_one_bounded_traceback(
    url: str, tmp_path: Path
) -> None:
    """A request that fails the same way 200 times, each with a RecursionError (~130 KB of
    traceback in full), grows the broker's log file by one bounded traceback, not 200."""
    log = tmp_path / "logs" / "broker.log"
    log.parent.mkdir()
    handler = CappedLogFile(log)
    install_bounds(handler)
    web = logging.getLogger("pager.web")
    web.addHandler(handler)
    web.propagate = False  # pytest's own capture would format 200 full tracebacks
    try:
        with trio.fail_after(60):
            async with httpx2.AsyncClient(timeout=10) as http:
                for _ in range(200):
                    assert (await http.get(url + "/v1/deep-bug")).status_code == 500
    finally:
        web.propagate = True
        web.removeHandler(handler)
        handler.close()
    text = log.read_text()
    assert len(text) < 10_000
    assert text.count("RecursionError: maximum recursion depth") == 1
    assert "lines of this traceback left out" in text
    assert '"GET /v1/deep-bug failed" (RecursionError) repeated 199 more times' in text
