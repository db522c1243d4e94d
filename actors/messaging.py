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

import contextlib
import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import trio

from actors._runtime import ActorError, ActorRef, start_actor
from actors.directory import DirectoryActor, DirectoryDeps, DirectoryMessage
from actors.identities import MAX_RESTARTS, PERIOD, Identities
from actors.identity import IdentityActor, IdentityDeps
from actors.identity_delivery import ProviderMessage
from actors.identity_launch import LaunchRun
from actors.identity_protocol import IdentityMessage, Poke
from actors.provider import DeliveryProvider
from actors.scheduler import DueScheduler
from actors.sessions import SessionIndex
from actors.sweeper import SweeperActor, SweeperDeps
from actors.timers import TimerService
from actors.wake_run import RunEnded, WakeRuns, run_wake
from pager.config import Config
from pager.domain.clock import WallClock
from pager.domain.errors import PagerError
from pager.domain.wake import RunOutcome
from pager.implementations.manifest import Manifest
from pager.store import messaging as ms
from pager.store._errors import StoreFault
from pager.store.ports import MessagingPorts, WakeBook
from pager.store.wake_ports import CUT_SHORT
from supervisors import ChildSpec, DynamicSupervisor, Restart

log = logging.getLogger("pager.messaging")

S = TypeVar("S")


async def run_messaging(
    *,
    ports: Callable[[], MessagingPorts],
    providers: Callable[[str], Awaitable[ActorRef[ProviderMessage] | None]],
    config: Config,
    clock: WallClock,
    service: Callable[[ActorRef[DirectoryMessage], Identities], S],
    wake_runs: WakeRuns | None = None,
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
                send_limits=ms.SendLimits.of(config.limits),
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
            if wake_runs is not None and store.wake is not None:
                await _end_cut_short_runs(store.wake, store.host, clock)
            for agent_id in sessions.attached_ids():
                try:
                    await identities.activate(agent_id)
                except (PagerError, StoreFault) as exc:  # the scheduler or a request retries
                    log.error("identity %s did not start: %s", agent_id, exc)
            scheduler.append(await nursery.start(DueScheduler(inbox, identities, clock).run))
            directory_deps = DirectoryDeps(
                store.directory,
                identities,
                clock,
                config.windows,
                allow_force=config.allow_force,
                wakeups=store.wakeups,
                wake_runs=wake_runs,
            )
            directory = await start_actor(
                nursery, DirectoryActor(nursery, directory_deps), name="directory"
            )
            if wake_runs is not None and store.wake is not None:
                # Launch on mail from here on: the runs register through the directory.
                wake_runs.book, wake_runs.directory = store.wake, directory
                wake_runs.identities = identities
                identity_deps.wake = store.wake
                for agent_id in store.wake.enabled_ids():
                    identities.tell(agent_id, Poke())  # mail that waits may start a run
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


async def _end_cut_short_runs(book: WakeBook, host: str, clock: WallClock) -> None:
    """Runs a killed broker never saw end: their guards stopped them when it died; their
    sessions end now (not a lease later), so mail that waits may start a run again."""
    for run in book.unfinished(host):
        log.warning("wake run %s of %s was cut short by the broker's stop", run.id, run.agent_id)
        await book.end(
            run.id, outcome=RunOutcome.STOPPED, exit_code=None, detail=CUT_SHORT, now=clock.now()
        )


def manifest_of(implementation: str) -> Manifest | None:
    """Its manifest, if one is found (read when its provider first starts)."""
    from pager.implementations import UnknownImplementation, discover

    try:
        return discover().get(implementation).manifest
    except UnknownImplementation:
        return None


#: Wake runs of one provider that crash (they never restart) before its supervisor gives up.
RUN_MAX_RESTARTS = 100


def delivery_provider(
    implementation: str, wake_runs: WakeRuns | None = None
) -> Callable[..., Awaitable[None]]:
    """The start function of an implementation's provider: writes claims to `http`/`unix`
    delivery addresses, runs its manifest's wake helper, and starts wake runs (docs/wake.md)
    as temporary children of a one_for_one supervisor of its own."""

    async def run(
        *, task_status: trio.TaskStatus[ActorRef[ProviderMessage]] = trio.TASK_STATUS_IGNORED
    ) -> None:
        manifest = await trio.to_thread.run_sync(manifest_of, implementation)  # reads files
        async with trio.open_nursery() as nursery:
            runs: DynamicSupervisor = await nursery.start(
                DynamicSupervisor(f"wake-runs:{implementation}", max_restarts=RUN_MAX_RESTARTS).run
            )
            launch = None
            if manifest is not None and wake_runs is not None:
                launch = partial(_start_run, runs, wake_runs, manifest)
            actor = DeliveryProvider(
                nursery, wake=None if manifest is None else manifest.wake, launch=launch
            )
            ref = await start_actor(nursery, actor, name=f"provider:{implementation}")
            task_status.started(ref)

    return run


async def _start_run(
    runs: DynamicSupervisor, wake_runs: WakeRuns, manifest: Manifest, request: LaunchRun
) -> None:
    """One wake run as a temporary child; a second for the same identity is never started."""
    from pager.implementations.launching import launch_spec

    child_id = f"run:{request.agent_id}"
    if runs.running(child_id):
        with contextlib.suppress(ActorError):
            request.identity.try_cast(RunEnded(None, detail="a wake run is going"))
        return
    start = partial(run_wake, wake_runs, manifest, launch_spec(manifest), request.identity,
                    request.agent_id)  # fmt: skip
    spec = ChildSpec(
        child_id, start, restart=Restart.TEMPORARY, shutdown_timeout=wake_runs.kill_after + 5.0
    )
    try:
        await runs.start_child(spec)
    except (ValueError, RuntimeError) as exc:  # one started meanwhile, or the provider stops
        log.info("wake run for %s not started: %s", request.agent_id, exc)
        with contextlib.suppress(ActorError):
            request.identity.try_cast(RunEnded(None, detail=str(exc)))
