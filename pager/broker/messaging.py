"""The messaging subtree: the timer service, the identity actors (under their dynamic
supervisor), the scheduler that wakes identities falling due, the directory, and the sweeper
that applies the retention windows.

Started as one child of the broker tree on the store's ports (the tree builds them for its
backend); its started value is what `service` builds from the directory and the identities:
the tree passes a factory of the `BrokerService` the web edge calls. A crashed identity actor
restarts alone; a crash anywhere else (or too many identity crashes) fails the child as a
whole, and the supervisor restarts it (with the web child after it); state comes back from
the store.

`build_messaging` makes every part with all it needs before any part starts; `run_messaging`
then starts them in order. The parts that need each other are made together (an identity that
passivates tells the scheduler, which activates identities); the directory starts before any
identity, so the wake runs an identity may ask for from its start can register through it.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from functools import partial
from typing import TypeVar

import attrs
import trio

from actors._runtime import ActorRef, start_actor
from actors.directory import DirectoryActor, DirectoryDeps, DirectoryMessage
from actors.identities import MAX_RESTARTS, PERIOD, Identities
from actors.identity import IdentityActor, IdentityDeps
from actors.identity_delivery import ProviderMessage
from actors.identity_protocol import IdentityMessage, Poke
from actors.scheduler import DueScheduler
from actors.sessions import SessionIndex
from actors.sweeper import SweeperActor, SweeperDeps
from actors.timers import TimerService
from actors.wake_run import RunPorts, WakeRuns
from pager.config import Config
from pager.domain.clock import WallClock
from pager.domain.errors import PagerError
from pager.domain.wake import RunOutcome
from pager.store._errors import StoreFault
from pager.store.ports import MessagingPorts, WakeBook
from pager.store.wake_book import CUT_SHORT
from supervisors import DynamicSupervisor

log = logging.getLogger("pager.messaging")

S = TypeVar("S")


@attrs.frozen
class Messaging:
    """The parts of one incarnation of the subtree, each with all it needs; none started."""

    store: MessagingPorts
    timers: TimerService
    supervisor: DynamicSupervisor  # of the identity actors
    identities: Identities
    identity_deps: IdentityDeps
    scheduler: DueScheduler
    directory: DirectoryActor
    sweeper: SweeperActor
    #: Launch on mail (docs/wake.md): the broker's runs and the store's wake book, or None.
    launching: tuple[WakeRuns, WakeBook] | None


def build_messaging(
    store: MessagingPorts,
    nursery: trio.Nursery,
    *,
    providers: Callable[[str], Awaitable[ActorRef[ProviderMessage] | None]],
    config: Config,
    clock: WallClock,
    wake_runs: WakeRuns | None = None,
) -> Messaging:
    """Every part of the subtree over the store's ports, its tasks to run in `nursery`."""
    launching = None if wake_runs is None or store.wake is None else (wake_runs, store.wake)
    timers = TimerService()
    supervisor = DynamicSupervisor("identities", max_restarts=MAX_RESTARTS, period=PERIOD)

    def passivated(agent_id: str, ref: ActorRef[IdentityMessage], due: float | None) -> None:
        identities.passivated(agent_id, ref)
        scheduler.note(due)  # a note before the scheduler runs is dropped: it reads the store

    index = SessionIndex()
    inbox, sessions = store.inbox, store.sessions
    identity_deps = IdentityDeps(
        inbox=inbox,
        sessions=sessions,
        timers=timers,
        clock=clock,
        windows=config.windows,
        policy=config.windows.claim_policy,
        providers=providers,
        index=index,
        on_passivate=passivated,
        tell=lambda agent_id, message: identities.tell(agent_id, message),
        send_limits=config.limits.send,
        host=store.host,
        wakeups=store.wakeups,
        wake=None if launching is None else launching[1],
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
    scheduler = DueScheduler(inbox, identities, clock)
    directory_deps = DirectoryDeps(
        store.directory,
        identities,
        clock,
        config.windows,
        allow_force=config.allow_force,
        wakeups=store.wakeups,
        wake_runs=wake_runs,
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
    return Messaging(
        store=store,
        timers=timers,
        supervisor=supervisor,
        identities=identities,
        identity_deps=identity_deps,
        scheduler=scheduler,
        directory=DirectoryActor(nursery, directory_deps),
        sweeper=SweeperActor(sweeper_deps),
        launching=launching,
    )


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
    """Build the subtree on the store's `ports`, start it; report ready with
    `service(directory, identities)`."""
    store = ports()
    try:
        async with trio.open_nursery() as nursery:
            parts = build_messaging(
                store,
                nursery,
                providers=providers,
                config=config,
                clock=clock,
                wake_runs=wake_runs,
            )
            identities = parts.identities
            await nursery.start(parts.timers.run)
            await nursery.start(parts.supervisor.run)
            # Other brokers sharing the store tell this one of identities they changed.
            await store.wakeups.on_wake(identities.poke)
            directory = await start_actor(nursery, parts.directory, name="directory")
            if parts.launching is not None:
                runs, book = parts.launching
                # Launch on mail: this incarnation's runs register through its directory.
                runs.serve(RunPorts(book, directory, identities))
                await _end_cut_short_runs(book, store.host, clock)
            # At start only attached identities activate (they hold leases), then the scheduler
            # those already due; every other identity stays in the store until it is needed.
            for agent_id in await store.sessions.attached_ids():
                try:
                    await identities.activate(agent_id)
                except (PagerError, StoreFault) as exc:  # the scheduler or a request retries
                    log.error("identity %s did not start: %s", agent_id, exc)
            await nursery.start(parts.scheduler.run)
            if parts.launching is not None:
                for agent_id in await parts.launching[1].enabled_ids():
                    identities.tell(agent_id, Poke())  # mail that waits may start a run
            # Its first sweep runs before the service is handed out.
            await start_actor(nursery, parts.sweeper, name="sweeper")
            task_status.started(service(directory, identities))
    finally:
        await store.wakeups.on_wake(None)  # its identities are gone


async def _end_cut_short_runs(book: WakeBook, host: str, clock: WallClock) -> None:
    """Runs a killed broker never saw end: their guards stopped them when it died; their
    sessions end now (not a lease later), so mail that waits may start a run again."""
    for run in await book.unfinished(host):
        log.warning("wake run %s of %s was cut short by the broker's stop", run.id, run.agent_id)
        await book.end(
            run.id, outcome=RunOutcome.STOPPED, exit_code=None, detail=CUT_SHORT, now=clock.now()
        )
