"""The messaging subtree's body: the timer service, the directory and its identity actors, and
the sweeper that applies the retention windows.

Started as one child of the broker tree; its started value is what `service` builds from the
directory and the checkpoint: the tree passes a factory of the `BrokerService` the web edge
calls, so this module does not import `pager.service` (which imports the actors). A crash
anywhere in here fails the child as a whole, and the supervisor restarts it (with the web
child after it); state comes back from the store.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import TypeVar

import trio

from actors._runtime import ActorRef, start_actor
from actors.checkpoint import Checkpoint
from actors.directory import DirectoryActor, DirectoryDeps, DirectoryMessage
from actors.identity import IdentityDeps, ProviderMessage
from actors.provider import DeliveryProvider
from actors.sweeper import SweeperActor, SweeperDeps
from actors.timers import TimerService
from pager.config import Config
from pager.domain.clock import WallClock
from pager.implementations.manifest import Wake
from pager.store import messaging as ms

S = TypeVar("S")


async def run_messaging(
    *,
    checkpoint: Callable[[], Checkpoint],
    providers: Callable[[str], Awaitable[ActorRef[ProviderMessage] | None]],
    config: Config,
    clock: WallClock,
    service: Callable[[ActorRef[DirectoryMessage], Checkpoint], S],
    task_status: trio.TaskStatus[S] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start the subtree; report ready with `service(directory, checkpoint)`."""
    store = checkpoint()
    async with trio.open_nursery() as nursery:
        timers: TimerService = await nursery.start(TimerService().run)
        identity_deps = IdentityDeps(
            checkpoint=store,
            timers=timers,
            clock=clock,
            windows=config.windows,
            providers=providers,
            on_passivate=lambda _agent_id: None,  # replaced by the directory
            send_limits=ms.SendLimits(
                max_hops=config.limits.max_hops,
                agent_per_hour=config.limits.agent_sends_per_hour,
                pair_per_hour=config.limits.pair_sends_per_hour,
                script_per_hour=config.limits.token_sends_per_hour,
            ),
        )
        directory_deps = DirectoryDeps(
            store, timers, clock, config.windows, identity_deps, allow_force=config.allow_force
        )
        directory = await start_actor(
            nursery, DirectoryActor(nursery, directory_deps), name="directory"
        )
        sweeper_deps = SweeperDeps(directory, store, timers, clock, config.windows)
        # Its first sweep runs before the service is handed out.
        await start_actor(nursery, SweeperActor(sweeper_deps), name="sweeper")
        task_status.started(service(directory, store))


def _wake_of(implementation: str) -> Wake | None:
    """The wake helper its manifest declares, if any (read when its provider first starts)."""
    from pager.implementations import UnknownImplementation, discover

    try:
        return discover().get(implementation).manifest.wake
    except UnknownImplementation:
        return None


def delivery_provider(implementation: str) -> Callable[..., Awaitable[None]]:
    """The start function of an implementation's provider: writes claims to `http`/`unix`
    delivery addresses (wake helpers per implementation come with their connectors)."""

    async def run(
        *, task_status: trio.TaskStatus[ActorRef[ProviderMessage]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        wake = await trio.to_thread.run_sync(_wake_of, implementation)  # reads manifest files
        async with trio.open_nursery() as nursery:
            actor = DeliveryProvider(nursery, wake=wake)
            ref = await start_actor(nursery, actor, name=f"provider:{implementation}")
            task_status.started(ref)

    return run
