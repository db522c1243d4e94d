"""The messaging subtree in process: real SQLite (queries inline, the service's read-only
connection too), trio's mock clock, and a FAKE provider standing in for delivery addresses."""

from __future__ import annotations

import contextlib
import functools
import inspect
import json
import sqlite3
from collections.abc import AsyncIterator, Callable
from functools import partial
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from actors._runtime import Actor, ActorRef, Reply, start_actor
from actors.directory import DirectoryMessage
from actors.identities import Identities
from actors.identity_delivery import Deliver, ProviderMessage, WakeSession
from actors.identity_protocol import Pushed
from actors.provider import notification
from actors.store_writer import Checkpoint, CheckpointActor
from pager.broker.messaging import run_messaging
from pager.broker.providers import never_shown_mail_at_turns
from pager.config import Config, Limits
from pager.domain import results
from pager.domain.api import Caller
from pager.domain.clock import TrioWallClock
from pager.domain.views import AgentView, MessageView
from pager.domain.windows import Windows
from pager.domain.workspace import Workspace, resolve_workspace
from pager.health import HealthBoard
from pager.requests import HttpDelivery, RegisterRequest
from pager.service import BrokerService
from pager.store import events as ev
from pager.store import messaging as ms
from pager.store.operator_ports import OperatorViews
from pager.store.read_views import ReadViews
from pager.store.sql_messaging import messaging_ports
from pager.store.sql_operator import SqlOperatorViews
from pager.store.sql_reservations import StoreReservations
from pager.store.sql_service import SqlAccounts, SqlListings, SqlLookups
from pager.store.sqlite_writer import QuickReads, SqliteWriter
from pager.wire import unstructure

WINDOWS = Windows(
    lease_ttl=90.0,
    ack_wait=60.0,
    redelivery=(2.0, 10.0),
    max_attempts=5,
    message_expiry=7 * 86400.0,
)


class FakeInbox(Actor[ProviderMessage]):
    """FAKE provider: records each push (answered with `self.answer(tokens)`) and wake."""

    def __init__(self) -> None:
        self.pushes: list[Deliver] = []
        self.wakes: list[WakeSession] = []
        # (accepted, refused) for a push's tokens; None: the address never answers (hung).
        self.answer: Callable[[list[str]], tuple[list[str], list[str]] | None] = lambda t: (
            t,
            [],
        )
        self._arrived = trio.Event()

    async def pushed(self, count: int) -> list[Deliver]:
        """The pushes once there are at least `count` (a sender is answered at the commit,
        before the provider has the push)."""
        while len(self.pushes) < count:
            await self._arrived.wait()
        return self.pushes

    def bodies_pushed_to(self, session_id: str | None) -> list[str]:
        """The bodies of every push to `session_id`, in the order pushed."""
        return [
            view.claim.message.body
            for push in self.pushes
            if push.session_id == session_id
            for view in push.claims
        ]

    async def handle(self, message: ProviderMessage, reply: Reply[Any] | None) -> None:
        if isinstance(message, WakeSession):
            self.wakes.append(message)
            return
        if not isinstance(message, Deliver):
            self.unhandled(message)
        self.pushes.append(message)
        self._arrived.set()
        self._arrived = trio.Event()
        # What the real provider leaves out of the notification, it reports as unrenderable.
        _, unrenderable = notification(message)
        tokens = [view.claim.token for view in message.claims]
        answered = self.answer([token for token in tokens if token not in unrenderable])
        if answered is not None:
            message.identity.try_cast(Pushed(message.push_id, tuple(answered[1]), unrenderable))


class AnsweredAsJson:
    """The service as the edges answer for it: each answer of `pager.domain.results` in its
    JSON form (the one converter), so tests read what MCP and `/v1` send."""

    def __init__(self, service: BrokerService) -> None:
        self.unwrapped = service

    def __getattr__(self, name: str) -> Any:
        found = getattr(self.unwrapped, name)
        if not inspect.iscoroutinefunction(found):
            return found

        async def answered(*args: Any, **kwargs: Any) -> Any:
            answer = await found(*args, **kwargs)
            is_answer = type(answer).__module__ == results.__name__
            return unstructure(answer) if is_answer else answer

        return answered


@attrs.define
class Harness:
    """The subtree and what tests observe it through: the store's views and its event log
    (ports a second backend provides too), never SQL against the schema."""

    service: AnsweredAsJson
    inbox: FakeInbox
    workspace: Path
    checkpoint: Checkpoint
    views: OperatorViews
    event_log: ev.EventLogReader  # blocking: a test reads it in place
    #: The SQLite writer itself (a fault can be injected under it: tests/fakes/failing_store.py).
    writer: SqliteWriter | None = None

    def events(self) -> list[tuple[str, dict[str, Any]]]:
        """Every operator event retained, as (type, data), in seq order."""
        found: list[tuple[str, dict[str, Any]]] = []
        after = 0
        while rows := self.event_log.rows_after(after, 1000):
            found += [(kind, json.loads(data)) for _, _, kind, data in rows]
            after = rows[-1][0]
        return found

    def events_of(self, kind: str) -> list[dict[str, Any]]:
        return [data for found, data in self.events() if found == kind]

    async def agent(self, agent_id: str) -> AgentView | None:
        return await self.views.agent(agent_id)

    async def message(self, message_id: str) -> MessageView:
        """One message as the operator views show it (looked up through every agent's list)."""
        agents = await self.views.agents(workspace=None, archived=None, limit=1000, after=None)
        for agent in agents.rows:
            for message in await self.messages(agent.agent_id):
                if message.message_id == message_id:
                    return message
        raise LookupError(f"no message {message_id} in the views")

    async def messages(self, agent_id: str, direction: str = "both") -> list[MessageView]:
        """The agent's messages as the operator views them, oldest first."""
        page = await self.views.messages(
            agent_id, state=None, direction=direction, limit=1000, before=None
        )
        return [] if page is None else list(reversed(page.rows))

    async def register(
        self, name: str | None = None, **kwargs: Any
    ) -> tuple[dict[str, Any], Caller]:
        request = RegisterRequest(
            workspace=str(kwargs.pop("workspace", self.workspace)),
            implementation=kwargs.pop("implementation", "shell"),
            session_name=name,
            **kwargs,
        )
        result = await self.service.register(request)
        return result, await self.service.authenticate(result["token"])


async def _resolve_inline(path: str) -> Workspace:
    return resolve_workspace(path)


def inline_service(
    config: Config, clock: TrioWallClock, reads: ReadViews, checkpoint: Checkpoint
) -> Callable[[ActorRef[DirectoryMessage], Identities], BrokerService]:
    """The `service` factory `run_messaging` is given: workspaces resolved inline."""

    def service(directory: ActorRef[DirectoryMessage], identities: Identities) -> BrokerService:
        return BrokerService(
            directory,
            identities,
            config,
            clock,
            lookups=SqlLookups(checkpoint),
            listings=SqlListings(reads),
            accounts=SqlAccounts(checkpoint),
            resolve=_resolve_inline,
            never_shown_mail=_never_shown_mail(),
            reservation_store=StoreReservations(checkpoint),
        )

    return service


@functools.cache
def _never_shown_mail() -> frozenset[str]:
    return never_shown_mail_at_turns()  # the manifests, read once for every test


@contextlib.asynccontextmanager
async def reads_closed(reads: ReadViews) -> AsyncIterator[ReadViews]:
    """`reads`, its connection closed on the way out."""
    try:
        yield reads
    finally:
        with trio.CancelScope(shield=True):
            await reads.aclose()


@contextlib.asynccontextmanager
async def open_harness(
    tmp_path: Path,
    windows: Windows = WINDOWS,
    clock: TrioWallClock | None = None,
    *,
    allow_force: bool = True,
    limits: Limits | None = None,
    board: HealthBoard | None = None,
) -> AsyncIterator[Harness]:
    """The subtree over `tmp_path/pager.db`; pass the same `clock` to reopen it later, and a
    `board` to see the writer mark the store degraded."""
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    reads = ReadViews(tmp_path / "pager.db", inline=True)
    async with reads_closed(reads), trio.open_nursery() as nursery:
        store = CheckpointActor(
            SqliteWriter(tmp_path / "pager.db", None, lambda: "now", inline=True, board=board)
        )
        store_ref = await start_actor(nursery, store, name="store")
        inbox = FakeInbox()
        inbox_ref: ActorRef[ProviderMessage] = await start_actor(nursery, inbox, name="fake-inbox")
        checkpoint = Checkpoint(store_ref, QuickReads(tmp_path / "pager.db"))

        async def providers(implementation: str) -> ActorRef[ProviderMessage] | None:
            return inbox_ref

        config = Config(windows=windows, allow_force=allow_force, limits=limits or Limits())
        clock = clock or TrioWallClock()
        service: BrokerService = await nursery.start(
            partial(
                run_messaging,
                ports=lambda: messaging_ports(checkpoint, reads),
                providers=providers,
                config=config,
                clock=clock,
                service=inline_service(config, clock, reads, checkpoint),
            )
        )
        log = ev.EventLogReader(ev.open_read_only(tmp_path / "pager.db"))
        try:
            yield Harness(
                AnsweredAsJson(service),
                inbox,
                workspace,
                checkpoint,
                SqlOperatorViews(reads),
                log,
                store.writer,
            )
        finally:
            log.close()
        nursery.cancel_scope.cancel()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with open_harness(tmp_path) as opened:
        yield opened


def http_delivery() -> HttpDelivery:
    return HttpDelivery(kind="http", url="http://127.0.0.1:9/inbox")


def crash_on_mail_to(monkeypatch: pytest.MonkeyPatch, agent_id: str) -> None:
    """The next send to `agent_id` breaks an invariant inside its actor's handling (a bug, not
    the store's fault: no StoreFault), once."""
    insert = ms.add_message  # what a send inserts its message with
    tripped = False

    def failing(conn: sqlite3.Connection, **kwargs: Any) -> Any:
        nonlocal tripped
        if kwargs["recipient_id"] == agent_id and not tripped:
            tripped = True
            raise RuntimeError("a broken invariant")
        return insert(conn, **kwargs)

    monkeypatch.setattr(ms, "add_message", failing)
