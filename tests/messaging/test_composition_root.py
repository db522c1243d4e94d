"""The broker's tree is built whole before any of it starts (pager/broker): each child and each
part of the messaging subtree gets all it needs at construction, nothing is wired in later."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import trio

from actors._runtime import ActorRef, start_actor
from actors.identity_delivery import ProviderMessage
from actors.store_writer import Checkpoint, CheckpointActor
from actors.wake_run import WakeRuns
from pager.broker import broker_context, build_broker_tree
from pager.broker.messaging import build_messaging, run_messaging
from pager.config import Config
from pager.domain.clock import TrioWallClock
from pager.launch.paths import StatePaths
from pager.service import BrokerService
from pager.store.read_views import ReadViews
from pager.store.sql_messaging import messaging_ports
from pager.store.sqlite_writer import BrokerRunInfo, QuickReads, SqliteWriter
from tests.messaging.conftest import WINDOWS, inline_service, reads_closed


def test_the_tree_is_built_from_a_config_without_starting_anything(tmp_path: Path) -> None:
    run = BrokerRunInfo(instance_id="i", pid=os.getpid(), version="v", started_at="now")
    ctx = broker_context(StatePaths(tmp_path), Config(), run, secret="s", utc_now=lambda: "now")
    root = build_broker_tree(ctx)
    assert root.which_children() == []  # no child started
    assert not (tmp_path / "pager.db").exists()  # the store opens when its child starts
    with pytest.raises(KeyError):
        root.started_value("store")


async def test_messaging_parts_get_all_they_need_before_any_starts(tmp_path: Path) -> None:
    """Launch on mail included: the identities' wake book is theirs from construction, and
    the wake runs reach this incarnation's directory before any identity starts."""

    async def no_provider(implementation: str) -> ActorRef[ProviderMessage] | None:
        return None

    config, clock = Config(windows=WINDOWS), TrioWallClock()
    runs = WakeRuns(clock=clock, state_dir=tmp_path)
    reads = ReadViews(tmp_path / "pager.db", inline=True)
    with trio.fail_after(10):
        async with reads_closed(reads), trio.open_nursery() as nursery:
            store = CheckpointActor(
                SqliteWriter(tmp_path / "pager.db", None, lambda: "now", inline=True)
            )
            checkpoint = Checkpoint(
                await start_actor(nursery, store, name="store"), QuickReads(tmp_path / "pager.db")
            )
            ports = messaging_ports(checkpoint, reads)
            parts = build_messaging(
                ports, nursery, providers=no_provider, config=config, clock=clock, wake_runs=runs
            )
            assert parts.identity_deps.wake is ports.wake
            assert parts.identity_deps.timers is parts.timers
            assert parts.directory.deps.identities is parts.identities
            assert parts.directory.deps.wake_runs is runs
            assert parts.launching == (runs, ports.wake)
            assert parts.identities.active_ids() == frozenset()  # nothing started
            with pytest.raises(RuntimeError, match="no messaging subtree serves"):
                runs.directory  # noqa: B018  # served once the subtree starts

            service: BrokerService = await nursery.start(
                lambda task_status: run_messaging(
                    ports=lambda: ports,
                    providers=no_provider,
                    config=config,
                    clock=clock,
                    service=inline_service(config, clock, reads, checkpoint),
                    wake_runs=runs,
                    task_status=task_status,
                )
            )
            assert runs.directory is service.directory
            assert runs.identities is service.identities
            assert runs.book is ports.wake
            nursery.cancel_scope.cancel()
