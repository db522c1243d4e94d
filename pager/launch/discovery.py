"""Find the running broker: adopt only when the lock and `/health` agree (SPEC §5). Stdlib-only."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pager.client import BrokerUnreachable, request_json
from pager.launch.files import read_json
from pager.launch.lock import read_lock_identity
from pager.launch.paths import StatePaths
from pager.versions import identity_mismatch


@dataclass(frozen=True)
class RunningBroker:
    """A broker whose lock, `broker.json` and `/health` agree."""

    url: str
    pid: int
    instance_id: str
    version: str
    schema_version: int
    started_at: str

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"


@dataclass(frozen=True)
class Discovery:
    broker: RunningBroker | None
    reason: str  # why no broker was adopted ("" when one was)


def discover(paths: StatePaths, *, timeout: float = 1.0) -> Discovery:
    """Whether a broker runs for this state directory, and why not when it does not."""
    info = read_json(paths.broker_json)
    if info is None:
        return Discovery(None, f"no {paths.broker_json.name}")
    url = info.get("url")
    if not isinstance(url, str):
        return Discovery(None, f"{paths.broker_json.name} has no url")
    lock = read_lock_identity(paths.lock)
    if lock is None:
        return Discovery(None, f"{paths.lock.name} is not held by a broker")
    try:
        status, health = request_json(url, "GET", "/health", timeout=timeout)
    except BrokerUnreachable as exc:
        return Discovery(None, f"nothing answers at {url} ({exc.__cause__ or exc})")
    if status != 200 or not isinstance(health, dict) or health.get("ok") is not True:
        return Discovery(None, f"{url}/health answered {status}, not a Pager broker")
    mismatch = identity_mismatch(lock, health) or identity_mismatch(info, health)
    if mismatch:
        return Discovery(None, f"the process at {url} is not the lock holder: {mismatch}")
    return Discovery(_running(url, health), "")


def _running(url: str, health: dict[str, Any]) -> RunningBroker:
    return RunningBroker(
        url=url,
        pid=int(health["pid"]),
        instance_id=str(health["instance_id"]),
        version=str(health.get("version", "")),
        schema_version=int(health["schema_version"]),
        started_at=str(health.get("started_at", "")),
    )
