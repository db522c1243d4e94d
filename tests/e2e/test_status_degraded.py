"""`pager status` and `/health` of a real broker say what is degraded (issue 13, item 6)."""

from __future__ import annotations

import json

import trio

from pager.client import request_json
from tests.e2e.conftest import Broker
from tests.e2e.test_http_edges import disk_full


async def test_status_reports_the_store_degraded_after_a_full_disk(broker: Broker) -> None:
    """Healthy: `status: ok`, no degraded line. A register refused for a full disk marks the
    store degraded: `/health` says so (still `ok: true`), `status --json` passes `status` and
    `degraded` through, and the human form has a line naming the kind and the message."""
    healthy = broker.home.run("status", "--json")
    assert healthy.returncode == 0, healthy.stderr
    report = json.loads(healthy.stdout)
    assert report["status"] == "ok"
    assert "degraded" not in report
    assert "degraded" not in broker.home.run("status").stdout

    with disk_full(broker), trio.fail_after(30):
        status, answer = await broker.post(
            "/v1/register",
            {"workspace": str(broker.workspace), "implementation": "shell"},
            token=broker.secret,
        )
    assert status == 503, answer
    refusal = answer["error"]["message"]

    code, health = request_json(broker.url, "GET", "/health")
    assert code == 200
    assert health["ok"] is True
    assert health["status"] == "degraded"
    [entry] = health["degraded"]
    assert (entry["kind"], entry["message"]) == ("store", refusal)

    result = broker.home.run("status", "--json")
    assert result.returncode == 0, result.stderr  # degraded is still running
    report = json.loads(result.stdout)
    assert report["status"] == "degraded"
    assert report["degraded"] == [entry]

    human = broker.home.run("status").stdout
    assert f"  degraded      store (since {entry['since']}): {refusal}\n" in human


async def test_health_is_ok_again_once_the_store_commits(broker: Broker) -> None:
    """The disk freed, the next committed write clears the store's degradation by itself: no
    restart, `/health` and `pager status` say ok again."""
    body = {"workspace": str(broker.workspace), "implementation": "shell"}
    with disk_full(broker), trio.fail_after(30):
        status, _ = await broker.post("/v1/register", body, token=broker.secret)
    assert status == 503
    _, health = request_json(broker.url, "GET", "/health")
    assert health["status"] == "degraded"

    with trio.fail_after(30):
        status, answer = await broker.post("/v1/register", body, token=broker.secret)
    assert status == 201, answer
    _, health = request_json(broker.url, "GET", "/health")
    assert health["status"] == "ok"
    assert "degraded" not in health
    report = json.loads(broker.home.run("status", "--json").stdout)
    assert report["status"] == "ok"
