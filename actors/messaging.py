"""The messaging subtree's body: the timer service, the identity actors (under their dynamic
supervisor), the scheduler that wakes identities falling due, the directory, and the sweeper
that applies the retention windows.

Started as one child of the broker tree on the store's ports (the tree builds them for its
backend); its started value is what `service` builds from the directory and the identities:
the tree passes a factory of the `BrokerService` the web edge calls, so this module does not
import `pager.service` (which imports the actors). A crashed identity actor restarts alone; a
crash anywhere else (or too many identity crashes) fails the child as a whole, and the
supervisor restarts it (with the web child after it); state comes back from the store.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import trio

from actors._runtime import ActorRef, start_actor
from actors.directory import DirectoryActor, DirectoryDeps, DirectoryMessage
from actors.identities import MAX_RESTARTS, PERIOD, Identities
from actors.identity import IdentityActor, IdentityDeps, IdentityMessage, ProviderMessage
from actors.provider import DeliveryProvider
from actors.scheduler import DueScheduler
from actors.sessions import SessionIndex
from actors.sweeper import SweeperActor, SweeperDeps
from actors.timers import TimerService
from pager.config import Config
from pager.domain.clock import WallClock
from pager.domain.errors import PagerError
from pager.implementations.manifest import Wake
from pager.store import messaging as ms
from pager.store.ports import MessagingPorts
from supervisors import DynamicSupervisor

log = logging.getLogger("pager.messaging")

S = TypeVar("S")


async def run_messaging(
    *,
    ports: Callable[[], MessagingPorts],
    providers: Callable[[str], Awaitable[ActorRef[ProviderMessage] | None]],
    config: Config,
    clock: WallClock,
    service: Callable[[ActorRef[DirectoryMessage], Identities], S],
    task_status: trio.TaskStatus[S] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Start the subtree on the store's `ports`; report ready with
    `service(directory, identities)`."""
    store = ports()
    try:
        async with trio.open_nursery() as nursery:
            timers: TimerService = await nursery.start(TimerService().run)
            supervisor: DynamicSupervisor = await nursery.start(
                DynamicSupervisor("identities", max_restarts=MAX_RESTARTS, period=PERIOD).run
            )
            scheduler: list[DueScheduler] = []  # made below; passivations before it need none

            def passivated(
                agent_id: str, ref: ActorRef[IdentityMessage], due: float | None
            ) -> None:
                identities.passivated(agent_id, ref)
                for one in scheduler:
                    one.note(due)

            index = SessionIndex()
            inbox, sessions = store.inbox, store.sessions
            identity_deps = IdentityDeps(
                inbox=inbox,
                sessions=sessions,
                timers=timers,
                clock=clock,
                windows=config.windows,
                providers=providers,
                index=index,
                on_passivate=passivated,
                send_limits=ms.SendLimits(
                    max_hops=config.limits.max_hops,
                    agent_per_hour=config.limits.agent_sends_per_hour,
                    pair_per_hour=config.limits.pair_sends_per_hour,
                    script_per_hour=config.limits.token_sends_per_hour,
                ),
                host=store.host,
                wakeups=store.wakeups,
            )
            identities = Identities(
                supervisor,
                partial(IdentityActor, deps=identity_deps),
                index=index,
                sessions=sessions,
                clock=clock,
                windows=config.windows,
                nursery=nursery,
                host=store.host,
            )
            # Other brokers sharing the store tell this one of identities they changed.
            store.wakeups.on_wake(identities.poke)
            # At start only attached identities activate (they hold leases), then the scheduler
            # those already due; every other identity stays in the store until it is needed.
            for agent_id in sessions.attached_ids():
                try:
                    await identities.activate(agent_id)
                except PagerError as exc:
                    log.error("identity %s did not start: %s", agent_id, exc)
            scheduler.append(await nursery.start(DueScheduler(inbox, identities, clock).run))
            directory_deps = DirectoryDeps(
                store.directory,
                identities,
                clock,
                config.windows,
                allow_force=config.allow_force,
                wakeups=store.wakeups,
            )
            directory = await start_actor(
                nursery, DirectoryActor(nursery, directory_deps), name="directory"
            )
            sweeper_deps = SweeperDeps(
                store.retention,
                identities,
                timers,
                clock,
                config.windows,
                leadership=store.leadership,
                hosts=store.hosts,
            )
            # Its first sweep runs before the service is handed out.
            await start_actor(nursery, SweeperActor(sweeper_deps), name="sweeper")
            task_status.started(service(directory, identities))
    finally:
        store.wakeups.on_wake(None)  # its identities are gone


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
