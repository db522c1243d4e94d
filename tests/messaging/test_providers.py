"""Providers per implementation: a crashing one is restarted, then disabled, while the others
keep delivering (mock clock, real supervisors)."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from functools import partial
from pathlib import Path
from typing import Any

import trio
from trio.testing import MockClock

from actors._runtime import Actor, Reply, run_actor, start_actor
from actors.identity_delivery import ProviderMessage
from actors.providers import ProviderHub
from actors.store_writer import Checkpoint, CheckpointActor
from pager.broker.messaging import run_messaging
from pager.config import Config
from pager.domain.clock import TrioWallClock
from pager.service import BrokerService
from pager.store import events as ev
from pager.store.read_views import ReadViews
from pager.store.sql_messaging import messaging_ports
from pager.store.sql_operator import SqlOperatorViews
from pager.store.sqlite_writer import QuickReads, SqliteWriter
from supervisors import Supervisor
from tests.messaging.conftest import (
    WINDOWS,
    AnsweredAsJson,
    FakeInbox,
    Harness,
    http_delivery,
    inline_service,
    reads_closed,
)


class CrashingProvider(Actor[ProviderMessage]):
    """FAKE provider that raises on every wake."""

    async def handle(self, message: ProviderMessage, reply: Reply[Any] | None) -> None:
        raise RuntimeError("provider exploded")


@contextlib.asynccontextmanager
async def hub_harness(tmp_path: Path) -> AsyncIterator[tuple[Harness, ProviderHub, list[str]]]:
    """The messaging subtree with a real ProviderHub: `crashy` crashes, others use FakeInbox."""
    workspace = tmp_path / "repo"
    workspace.mkdir()
    disabled: list[str] = []
    inbox = FakeInbox()

    def factory(implementation: str) -> Callable[..., Awaitable[None]]:
        actor_class: Callable[[], Actor[ProviderMessage]] = (
            CrashingProvider if implementation == "crashy" else (lambda: inbox)
        )

        async def start(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
            await run_actor(
                actor_class(), name=f"provider:{implementation}", task_status=task_status
            )

        return start

    async def on_disabled(implementation: str, reason: str) -> None:
        disabled.append(implementation)

    reads = ReadViews(tmp_path / "pager.db", inline=True)
    async with reads_closed(reads), trio.open_nursery() as nursery:
        store = CheckpointActor(
            SqliteWriter(tmp_path / "pager.db", None, lambda: "now", inline=True)
        )
        checkpoint = Checkpoint(
            await start_actor(nursery, store, name="store"), QuickReads(tmp_path / "pager.db")
        )
        providers = Supervisor("providers", [])
        await nursery.start(providers.run)
        hub = ProviderHub(providers, factory, on_disabled=on_disabled)
        config, clock = Config(windows=WINDOWS), TrioWallClock()
        service: BrokerService = await nursery.start(
            partial(
                run_messaging,
                ports=lambda: messaging_ports(checkpoint, reads),
                providers=hub.get,
                config=config,
                clock=clock,
                service=inline_service(config, clock, reads, checkpoint),
            )
        )
        log = ev.EventLogReader(ev.open_read_only(tmp_path / "pager.db"))
        try:
            views = SqlOperatorViews(reads)
            yield (
                Harness(AnsweredAsJson(service), inbox, workspace, checkpoint, views, log),
                hub,
                disabled,
            )
        finally:
            log.close()
        nursery.cancel_scope.cancel()


async def test_crashing_provider_is_disabled_others_keep_working(
    tmp_path: Path, autojump_clock: MockClock
) -> None:
    """A provider raising on every wake is restarted, then disabled within its intensity;
    pushes for another implementation and fetches keep working."""
    with trio.fail_after(600):
        async with hub_harness(tmp_path) as (harness, hub, disabled):
            _, alice = await harness.register("alice")
            _, crashy = await harness.register(
                "crashy-agent", implementation="crashy", delivery=http_delivery()
            )
            for n in range(6):
                await harness.service.send(alice, to="crashy-agent", body=f"boom {n}")
                await trio.sleep(15)  # pushes time out, mail is requeued, pushes again
            assert disabled == ["crashy"]
            assert "crashy" in hub.disabled
            await harness.register("calm", delivery=http_delivery())
            sent = await harness.service.send(alice, to="calm", body="still delivered")
            assert sent["wake"] == "delivered"
            pushes = await harness.inbox.pushed(1)
            assert [v.claim.message.body for p in pushes for v in p.claims] == ["still delivered"]
            claims = (await harness.service.fetch(crashy, limit=100))["claims"]
            assert sorted(c["message"]["body"] for c in claims) == [f"boom {n}" for n in range(6)]
