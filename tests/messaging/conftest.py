"""The messaging subtree in process: real SQLite (queries inline, the service's read-only
connection too), trio's mock clock, and a FAKE provider standing in for delivery addresses."""

from __future__ import annotations

import contextlib
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
from actors.identity import Deliver, ProviderMessage, Pushed, WakeSession
from actors.messaging import run_messaging
from pager.config import Config, Limits, Windows
from pager.domain.api import Caller
from pager.domain.clock import TrioWallClock
from pager.domain.workspace import Workspace, resolve_workspace
from pager.service import BrokerService
from pager.store.read_views import ReadViews
from pager.store.sqlite_backend import messaging_ports
from pager.store.sqlite_service import SqliteAccounts, SqliteListings, SqliteLookups
from pager.store.sqlite_writer import Checkpoint, CheckpointActor, QuickReads
from pager.wire import DeliveryRequest, RegisterRequest

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
        self.answer: Callable[[list[str]], tuple[list[str], list[str]]] = lambda t: (t, [])

    async def handle(self, message: ProviderMessage, reply: Reply[Any] | None) -> None:
        if isinstance(message, WakeSession):
            self.wakes.append(message)
            return
        self.pushes.append(message)
        tokens = [view.claim.token for view in message.claims]
        accepted, refused = self.answer(tokens)
        message.identity.try_cast(Pushed(message.push_id, tuple(accepted), tuple(refused)))


@attrs.define
class Harness:
    service: BrokerService
    inbox: FakeInbox
    workspace: Path
    checkpoint: Checkpoint

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
            lookups=SqliteLookups(checkpoint),
            listings=SqliteListings(checkpoint, reads),
            accounts=SqliteAccounts(checkpoint),
            resolve=_resolve_inline,
        )

    return service


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
) -> AsyncIterator[Harness]:
    """The subtree over `tmp_path/pager.db`; pass the same `clock` to reopen it later."""
    workspace = tmp_path / "repo"
    workspace.mkdir(exist_ok=True)
    reads = ReadViews(tmp_path / "pager.db", inline=True)
    async with reads_closed(reads), trio.open_nursery() as nursery:
        store = CheckpointActor(tmp_path / "pager.db", None, lambda: "now", inline=True)
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
        yield Harness(service, inbox, workspace, checkpoint)
        nursery.cancel_scope.cancel()


@pytest.fixture
async def harness(tmp_path: Path) -> AsyncIterator[Harness]:
    async with open_harness(tmp_path) as opened:
        yield opened


def http_delivery() -> DeliveryRequest:
    return DeliveryRequest(kind="http", url="http://127.0.0.1:9/inbox")
