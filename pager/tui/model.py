"""What the TUI shows, parsed from the `/v1` JSON: the snapshot and an agent's messages.

Plain frozen dataclasses (no attrs/cattrs: the TUI is a client and parses leniently, so a
broker that adds fields does not break it). Times stay ISO 8601 strings until shown.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass(frozen=True)
class Inbox:
    queued: int = 0
    claimed: int = 0
    dead: int = 0


@dataclass(frozen=True)
class Session:
    session_id: str
    epoch: int
    created_at: str | None
    lease_expires_at: str | None


@dataclass(frozen=True)
class Agent:
    agent_id: str
    alias: str
    address: str
    workspace: str
    implementation: str
    durable: bool
    archived: bool
    attached: bool
    inbox: Inbox
    last_seen: str | None
    created_at: str | None = None
    archived_at: str | None = None
    sessions: tuple[Session, ...] = ()
    #: Its workspace's host, and whether that host's broker runs (SPEC §13).
    host: str = ""
    host_alive: bool = True
    #: Launch on mail is on; a wake run of it is going (docs/wake.md).
    wake: bool = False
    waking: bool = False
    #: Its edit reservations in force (docs/reservations.md): each pattern, and whether it
    #: is stale (its holder has no live session: it blocks nothing).
    reservations: tuple[tuple[str, bool], ...] = ()
    #: Their ids, for the operator's break (`b`).
    reservation_ids: tuple[str, ...] = ()

    @property
    def label(self) -> str:
        """How a person names it: the address, else the alias, else the id."""
        return self.address or self.alias or self.agent_id


@dataclass(frozen=True)
class Workspace:
    slug: str
    path: str
    agents: tuple[Agent, ...]

    @property
    def active(self) -> tuple[Agent, ...]:
        return tuple(agent for agent in self.agents if not agent.archived)

    @property
    def archive(self) -> tuple[Agent, ...]:
        return tuple(agent for agent in self.agents if agent.archived)


@dataclass(frozen=True)
class Broker:
    instance_id: str = ""
    pid: int = 0
    version: str = ""
    schema_version: int = 0
    started_at: str | None = None


@dataclass(frozen=True)
class Snapshot:
    broker: Broker
    workspaces: tuple[Workspace, ...]
    totals: dict[str, int] = field(default_factory=dict)
    seq: int = 0

    def agents(self) -> dict[str, Agent]:
        return {agent.agent_id: agent for ws in self.workspaces for agent in ws.agents}


@dataclass(frozen=True)
class Party:
    agent_id: str
    alias: str
    address: str

    @property
    def label(self) -> str:
        return self.address or self.alias or self.agent_id


@dataclass(frozen=True)
class Message:
    message_id: str
    direction: str  # "in" or "out", seen from the agent whose view this is
    sender: Party
    recipient: Party
    body: str
    thread: str | None
    reply_to: str | None
    sent_at: str | None
    state: str
    attempts: int
    dead_reason: str | None
    settled_at: str | None

    @property
    def peer(self) -> Party:
        return self.sender if self.direction == "in" else self.recipient


@dataclass(frozen=True)
class MessagePage:
    messages: tuple[Message, ...]
    next_cursor: str | None


def parse_snapshot(data: dict[str, Any], reservations: Any = None) -> Snapshot:
    """The snapshot, with each agent's reservations from `GET /v1/reservations`'s list."""
    broker = data.get("broker") or {}
    held: dict[str, list[tuple[str, bool, str]]] = {}
    for item in reservations if isinstance(reservations, list) else []:
        if isinstance(item, dict):
            pattern = str(item.get("pattern") or "")
            one = (pattern, item.get("state") == "stale", str(item.get("id") or ""))
            held.setdefault(str(item.get("agent_id") or ""), []).append(one)
    return Snapshot(
        broker=Broker(
            instance_id=str(broker.get("instance_id", "")),
            pid=_int(broker.get("pid")),
            version=str(broker.get("version", "")),
            schema_version=_int(broker.get("schema_version")),
            started_at=_opt(broker.get("started_at")),
        ),
        workspaces=tuple(
            _workspace(ws, held) for ws in sorted(data.get("workspaces") or [], key=_ws_order)
        ),
        totals={str(k): _int(v) for k, v in (data.get("totals") or {}).items()},
        seq=_int(data.get("seq")),
    )


def parse_messages(data: dict[str, Any]) -> MessagePage:
    return MessagePage(
        messages=tuple(_message(item) for item in data.get("messages") or []),
        next_cursor=_opt(data.get("next_cursor")),
    )


def _ws_order(ws: dict[str, Any]) -> str:
    return str(ws.get("slug", ""))


def _workspace(ws: dict[str, Any], held: dict[str, list[tuple[str, bool, str]]]) -> Workspace:
    slug = str(ws.get("slug", ""))
    agents = [_agent(item, slug, held) for item in ws.get("agents") or []]
    agents.sort(key=lambda agent: (agent.alias.lower(), agent.agent_id))
    return Workspace(slug=slug, path=str(ws.get("path", "")), agents=tuple(agents))


def _agent(item: dict[str, Any], slug: str, held: dict[str, list[tuple[str, bool, str]]]) -> Agent:
    inbox = item.get("inbox") or {}
    its = held.get(str(item.get("agent_id", "")), [])
    return Agent(
        reservations=tuple((pattern, stale) for pattern, stale, _ in its),
        reservation_ids=tuple(rid for _, _, rid in its if rid),
        agent_id=str(item.get("agent_id", "")),
        alias=str(item.get("alias") or ""),
        address=str(item.get("address") or ""),
        workspace=str(item.get("workspace") or slug),
        implementation=str(item.get("implementation") or ""),
        durable=bool(item.get("durable")),
        archived=bool(item.get("archived")),
        attached=bool(item.get("attached")),
        inbox=Inbox(
            queued=_int(inbox.get("queued")),
            claimed=_int(inbox.get("claimed")),
            dead=_int(inbox.get("dead")),
        ),
        last_seen=_opt(item.get("last_seen")),
        created_at=_opt(item.get("created_at")),
        archived_at=_opt(item.get("archived_at")),
        host=str(item.get("host") or ""),
        host_alive=item.get("host_alive") is not False,
        wake=item.get("wake") is True,
        waking=item.get("waking") is True,
        sessions=tuple(
            Session(
                session_id=str(s.get("session_id", "")),
                epoch=_int(s.get("epoch")),
                created_at=_opt(s.get("created_at")),
                lease_expires_at=_opt(s.get("lease_expires_at")),
            )
            for s in item.get("sessions") or []
        ),
    )


def wake_notice(kind: str, data: Any) -> str | None:
    """What a wake run's operator event tells the person (docs/wake.md), or None."""
    if not isinstance(data, dict):
        return None
    who = str(data.get("address") or data.get("agent_id") or "?")
    if kind == "wake.started":
        return f"{who}: wake run started (pid {data.get('pid')})"
    if kind == "wake.ended":
        acked = data.get("acknowledged")
        count = len(acked) if isinstance(acked, list) else 0
        status = data.get("exit_code")
        how = str(data.get("outcome") or "ended").replace("_", " ")
        return (
            f"{who}: wake run {how}"
            + ("" if status is None else f" (status {status})")
            + f" after {data.get('duration_s')} s, {count} message(s) acknowledged"
        )
    if kind == "wake.deferred":
        return f"{who}: wake run put off {data.get('retry_after_s')} s: {data.get('reason')}"
    return None


def _party(item: Any) -> Party:
    item = item if isinstance(item, dict) else {}
    return Party(
        agent_id=str(item.get("agent_id") or ""),
        alias=str(item.get("alias") or ""),
        address=str(item.get("address") or ""),
    )


def _message(item: dict[str, Any]) -> Message:
    return Message(
        message_id=str(item.get("message_id", "")),
        direction=str(item.get("direction", "")),
        sender=_party(item.get("sender")),
        recipient=_party(item.get("recipient")),
        body=str(item.get("body") or ""),
        thread=_opt(item.get("thread")),
        reply_to=_opt(item.get("reply_to")),
        sent_at=_opt(item.get("sent_at")),
        state=str(item.get("state", "")),
        attempts=_int(item.get("attempts")),
        dead_reason=_opt(item.get("dead_reason")),
        settled_at=_opt(item.get("settled_at")),
    )


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return 0


def _opt(value: Any) -> str | None:
    return None if value is None or value == "" else str(value)


def parse_time(text: str | None) -> datetime | None:
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def ago(text: str | None, now: datetime) -> str:
    """`3m ago`, `2h ago`, `4d ago`; `just now` under a minute; `-` when unknown.

    Minutes at the finest: a column of second counts would change on every row at every
    refresh, and "seen 12 s ago" tells an operator nothing "just now" does not."""
    moment = parse_time(text)
    if moment is None:
        return "-"
    seconds = int((now - moment).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit} ago"
    return "just now"


def local_time(text: str | None) -> str:
    """An ISO timestamp as local `YYYY-MM-DD HH:MM:SS`, for detail views."""
    moment = parse_time(text)
    return "-" if moment is None else moment.astimezone().strftime("%Y-%m-%d %H:%M:%S")
