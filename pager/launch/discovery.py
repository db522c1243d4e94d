"""Find the running broker (SPEC §5, §12). Stdlib-only.

A broker is adopted only when the kernel says the adoption lock is held, the lock's identity,
`broker.json` and `/health` agree, and the process answering `/health` proves it knows the local
secret (pager/launch/proof.py). Nothing sends a credential to a URL this module did not return.
"""

from __future__ import annotations

from pager.client import BrokerUnreachable, Connection
from pager.launch.files import read_json, read_secret
from pager.launch.lock import holder_alive, read_lock_identity
from pager.launch.paths import BROKER_JSON, LOCK, SECRET
from pager.launch.proof import new_challenge, proof_holds
from pager.versions import identity_mismatch

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any

    from pager.launch.paths import StatePaths


#: What a `RunningBroker` is: the fields its equality, hash and repr compare.
_IDENTITY = ("instance_id", "pid", "schema_version", "started_at", "url", "version", "warnings")


class RunningBroker:
    """A broker whose lock, `broker.json` and `/health` agree. A plain class, not a dataclass
    or a NamedTuple: `dataclasses` and `typing` cost every quick command milliseconds.

    `connection`: the connection it proved itself on, kept open when `discover` was asked to
    (`keep_open`), for the command's request to follow on it; None otherwise."""

    __slots__ = (*_IDENTITY, "connection")

    def __init__(
        self,
        *,
        url: str,
        pid: int,
        instance_id: str,
        version: str,
        schema_version: int,
        started_at: str,
        warnings: tuple[str, ...] = (),  # what the broker wants its user told (a squatted port)
    ) -> None:
        self.url, self.pid, self.instance_id, self.version = url, pid, instance_id, version
        self.schema_version, self.started_at, self.warnings = schema_version, started_at, warnings
        self.connection: Connection | None = None

    def _key(self) -> tuple[object, ...]:
        return tuple(getattr(self, name) for name in _IDENTITY)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, RunningBroker) and other._key() == self._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in _IDENTITY)
        return f"RunningBroker({fields})"

    @property
    def mcp_url(self) -> str:
        return f"{self.url}/mcp"


class Discovery:
    """What `discover` found: the broker, or why none was adopted."""

    __slots__ = ("broker", "reason")

    def __init__(self, broker: RunningBroker | None, reason: str) -> None:
        self.broker = broker
        self.reason = reason  # why no broker was adopted ("" when one was)


def discover(paths: StatePaths, *, timeout: float = 1.0, keep_open: bool = False) -> Discovery:
    """Whether a broker runs for this state directory, and why not when it does not.
    `keep_open`: the broker found keeps the connection it proved itself on
    (`RunningBroker.connection`); a process that does not prove itself keeps none."""
    # Paths as strings (`StatePaths.file`): `pathlib` costs a quick command milliseconds.
    info = read_json(paths.file(BROKER_JSON))
    if info is None:
        return Discovery(None, f"no {BROKER_JSON}")
    url = info.get("url")
    if not isinstance(url, str):
        return Discovery(None, f"{BROKER_JSON} has no url")
    lock_file = paths.file(LOCK)
    if not holder_alive(lock_file):
        return Discovery(None, f"{LOCK} is not held: the last broker is gone (it may have crashed)")
    lock = read_lock_identity(lock_file)
    if lock is None:
        return Discovery(None, f"{LOCK} is held but names no broker yet")
    try:
        secret = read_secret(paths.file(SECRET))
    except OSError as exc:
        return Discovery(None, f"cannot read {SECRET} ({exc.strerror})")
    connection = Connection(url)
    found = _proved(url, info, lock, secret, connection, timeout=timeout, keep_open=keep_open)
    if found.broker is not None and keep_open:
        found.broker.connection = connection
    else:
        connection.close()  # a process that did not prove itself is asked nothing more
    return found


def _proved(
    url: str,
    info: dict[str, Any],
    lock: dict[str, Any],
    secret: str,
    connection: Connection,
    *,
    timeout: float,
    keep_open: bool,
) -> Discovery:
    """The broker at `url` if it proves, over `connection`, that it holds the lock and knows
    the secret; else why not."""
    challenge = new_challenge()
    path = f"/health?challenge={challenge}"
    try:
        status, health = connection.request("GET", path, timeout=timeout, last=not keep_open)
    except BrokerUnreachable as exc:
        return Discovery(None, f"nothing answers at {url} ({exc.__cause__ or exc})")
    if status != 200 or not isinstance(health, dict) or health.get("ok") is not True:
        return Discovery(None, f"{url}/health answered {status}, not a Pager broker")
    mismatch = identity_mismatch(lock, health) or identity_mismatch(info, health)
    if mismatch:
        return Discovery(None, f"the process at {url} is not the lock holder: {mismatch}")
    address = url.removeprefix("http://").rstrip("/")
    if not proof_holds(secret, challenge, str(health["instance_id"]), address, health.get("proof")):
        return Discovery(
            None,
            f"the process at {url} did not prove that it is this user's broker, so nothing was"
            " sent to it: another user's program may hold the port, or the secret file was"
            f" replaced after broker pid {lock.get('pid')} started (then stop that process)",
        )
    return Discovery(_running(url, health), "")


def still_running(paths: StatePaths, broker: RunningBroker) -> bool:
    """Whether the broker `discover` returned still holds its lock (and so its port): a cheap
    check, without a request, for callers that keep a broker's URL between requests."""
    if not holder_alive(paths.file(LOCK)):
        return False
    lock = read_lock_identity(paths.file(LOCK))
    return lock is not None and lock.get("instance_id") == broker.instance_id


def _running(url: str, health: dict[str, Any]) -> RunningBroker:
    warnings = health.get("warnings")
    return RunningBroker(
        url=url,
        pid=int(health["pid"]),
        instance_id=str(health["instance_id"]),
        version=str(health.get("version", "")),
        schema_version=int(health["schema_version"]),
        started_at=str(health.get("started_at", "")),
        warnings=tuple(str(w) for w in warnings) if isinstance(warnings, list) else (),
    )


class BrokerLocator:
    """The URL to send a credential to, asked each time: the verified broker's while it still
    holds its lock, else whichever broker `discover` verifies now, else None (nothing is sent)."""

    def __init__(self, paths: StatePaths, broker: RunningBroker) -> None:
        self.paths = paths
        self.broker: RunningBroker | None = broker

    def url(self) -> str | None:
        if self.broker is not None and still_running(self.paths, self.broker):
            return self.broker.url
        self.broker = discover(self.paths).broker
        return None if self.broker is None else self.broker.url
