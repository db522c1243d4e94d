"""What `pager status` (and `pager doctor`) report of the state directory and its broker: its
identity from broker.json, its health (`GET /health`) and the store's counts (the snapshot's
totals), each part saying why when it cannot be read."""

from __future__ import annotations

from typing import Any

from pager.versions import SCHEMA_VERSION, VERSION


def status_report(paths: Any, broker: Any, reason: str) -> dict[str, Any]:
    """The report: `running`, where the state is, and for a running broker its identity,
    health and counts (`reason` says why none runs)."""
    from datetime import UTC, datetime

    report: dict[str, Any] = {
        "running": broker is not None,
        "state_dir": str(paths.root),
        "database": str(paths.database),
        "installed_version": VERSION,
        "installed_schema_version": SCHEMA_VERSION,
    }
    if broker is None:
        report["reason"] = reason
        return report
    started = datetime.fromisoformat(broker.started_at)
    report.update(
        pid=broker.pid,
        url=broker.url,
        mcp_url=broker.mcp_url,
        broker_version=broker.version,
        schema_version=broker.schema_version,
        instance_id=broker.instance_id,
        started_at=broker.started_at,
        uptime_s=round((datetime.now(UTC) - started).total_seconds(), 3),
        warnings=list(broker.warnings),
    )
    report.update(_health(broker.url))
    report.update(_counts(paths, broker.url))
    return report


def _health(url: str) -> dict[str, Any]:
    """The broker's `status` (`ok` or `degraded`) and, when any, its `degraded` list as
    `GET /health` gives them (no credential, no store read), or `health_error` saying why
    not. A broker older than the health board gives neither field."""
    from pager.client import BrokerUnreachable, request_json

    try:
        status, answer = request_json(url, "GET", "/health", timeout=5.0)
    except BrokerUnreachable as exc:
        return {"health_error": f"could not read the broker's health: {exc}"}
    if status != 200 or not isinstance(answer, dict):
        return {"health_error": f"the broker answered {status} to GET /health"}
    return {key: answer[key] for key in ("status", "degraded") if key in answer}


def _counts(paths: Any, url: str) -> dict[str, Any]:
    """`counts` from the snapshot's totals (aggregates only), or `counts_error` saying why not:
    the broker's identity above is worth reporting even when this part fails."""
    from pager.client import BrokerUnreachable, request_json

    try:
        secret = paths.secret.read_text().strip()
        status, answer = request_json(
            url, "GET", "/v1/snapshot?agents=false", token=secret, timeout=5.0
        )
    except (OSError, BrokerUnreachable) as exc:
        return {"counts_error": f"could not read the counts: {exc}"}
    if status != 200 or not isinstance(answer, dict) or "totals" not in answer:
        return {"counts_error": f"the broker answered {status} to GET /v1/snapshot"}
    totals = answer["totals"]
    found: dict[str, Any] = {"counts": {key: totals.get(key) for key in _COUNT_KEYS}}
    broker = answer.get("broker")
    if isinstance(broker, dict):  # the store and, when shared, its hosts (SPEC §13)
        found.update({key: broker[key] for key in ("store", "hosts") if key in broker})
    return found


#: What `pager status` shows of the snapshot's totals (SPEC §6 names them).
_COUNT_KEYS = ("workspaces", "agents", "attached", "archived", "queued", "claimed", "dead")
