"""The broker's supervision tree (ARCHITECTURE.md, Supervisors).

root (rest_for_one): store → listener (the bound port) → providers (one_for_one: the
delivery provider; later one per implementation in use) → messaging (timers, directory,
identity actors) → events (the operator event feed, told of each commit by the store) → web.
A child that fails restarts with everything started after it, so every later child sees the
current store and service.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable, Sequence
from functools import partial
from typing import Any, Generic, TypeVar, overload

import attrs
import trio

from actors._runtime import ActorRef
from actors.directory import DirectoryMessage
from actors.events import CommitSignal, EventFeed
from actors.identities import Identities
from actors.providers import ProviderHub, disabled_event
from actors.store_writer import serve_sqlite_writer
from actors.wake_run import WakeRuns
from pager.broker.messaging import run_messaging
from pager.broker.providers import delivery_provider, manifest_of, never_shown_mail_at_turns
from pager.config import Config, is_loopback, remote_warning
from pager.domain.clock import SystemClock, WallClock
from pager.health import HealthBoard
from pager.launch.paths import StatePaths
from pager.service import BrokerService
from pager.store._meta import meta_value, put_meta
from pager.store.backend import Backend, StoreAccess, open_backend
from pager.store.events import record_event
from pager.store.sql_messaging import messaging_ports
from pager.store.sql_reservations import StoreReservations
from pager.store.sql_service import SqlAccounts, SqlListings, SqlLookups
from pager.store.sqlite_writer import BrokerRunInfo
from pager.versions import SCHEMA_VERSION, VERSION
from supervisors import ChildSpec, Restart, Strategy, Supervisor

log = logging.getLogger("pager.broker")

#: Restart intensity of the root: nested limits multiply, so the root's stays low.
ROOT_MAX_RESTARTS = 3
ROOT_PERIOD = 30.0

T = TypeVar("T")


class _Slot(Generic[T]):
    """One child's started value, typed: like ``Supervisor.started_value(child_id)`` (typed
    ``object``), the value its latest incarnation passed to ``task_status.started()``."""

    def __init__(self, child_id: str) -> None:
        self.child_id = child_id
        self._value: tuple[T] | None = None

    def status(self, outer: trio.TaskStatus[Any]) -> trio.TaskStatus[T]:
        """The ``task_status`` to hand the child: keeps its value, passes it on to ``outer``."""
        return _Keeping(self, outer)

    def keep(self, value: T) -> None:
        self._value = (value,)

    def get(self) -> T:
        if self._value is None:
            raise KeyError(f"supervisor 'broker' has no started child {self.child_id!r}")
        return self._value[0]


class _Keeping(trio.TaskStatus[T]):
    def __init__(self, slot: _Slot[T], outer: trio.TaskStatus[Any]) -> None:
        self._slot = slot
        self._outer = outer

    @overload
    def started(self: _Keeping[None]) -> None: ...

    @overload
    def started(self, value: T) -> None: ...

    def started(self, value: Any = None) -> None:
        self._outer.started(value)  # the supervisor first: it refuses a second started()
        self._slot.keep(value)


@attrs.define
class BrokerContext:
    """What the children of one broker process share."""

    paths: StatePaths
    config: Config
    run: BrokerRunInfo
    health: dict[str, Any]
    utc_now: Callable[[], str]
    secret: str = ""
    clock: WallClock = attrs.field(factory=SystemClock)
    shutdown: trio.Event = attrs.field(factory=trio.Event)
    web_stopped: trio.Event = attrs.field(factory=trio.Event)
    #: What `GET /health` reports degraded; children mark and clear it (pager/health.py).
    board: HealthBoard = attrs.field(
        default=attrs.Factory(lambda ctx: HealthBoard(ctx.clock.now), takes_self=True)
    )
    #: The store (pager/store/backend.py); by default the one the configuration names, whose
    #: clock `clock` should be (serve.py builds the backend first and passes both).
    backend: Backend = attrs.field(
        default=attrs.Factory(
            lambda ctx: open_backend(
                ctx.config,
                ctx.paths,
                ctx.run,
                ctx.utc_now,
                ctx.clock,
                serve_sqlite=serve_sqlite_writer,
            ),
            takes_self=True,
        )
    )


def broker_context(
    paths: StatePaths,
    config: Config,
    run: BrokerRunInfo,
    *,
    secret: str,
    utc_now: Callable[[], str],
) -> BrokerContext:
    """What the children of the broker process `run` share: its health, and the store the
    configuration names (nothing opened yet), whose clock is the broker's."""
    health: dict[str, Any] = {
        "instance_id": run.instance_id,
        "pid": run.pid,
        "version": VERSION,
        "schema_version": SCHEMA_VERSION,
        "started_at": run.started_at,
    }
    backend = open_backend(
        config, paths, run, utc_now, SystemClock(), serve_sqlite=serve_sqlite_writer
    )
    return BrokerContext(
        paths=paths,
        config=config,
        run=run,
        health=health,
        utc_now=utc_now,
        secret=secret,
        clock=backend.clock,
        backend=backend,
    )


def build_broker_tree(ctx: BrokerContext, extra_children: Sequence[ChildSpec] = ()) -> Supervisor:
    """The root supervisor; `extra_children` start after the store (tests inject faults)."""
    # The started values the children hand each other, typed (the tree's own wiring).
    store: _Slot[StoreAccess] = _Slot("store")
    listener: _Slot[socket.socket] = _Slot("listener")
    messaging: _Slot[BrokerService] = _Slot("messaging")
    events: _Slot[EventFeed] = _Slot("events")
    backend = ctx.backend
    commits = CommitSignal()  # the store tells it each commit; the event feed reads on

    async def start_store(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        await backend.run(
            on_commit=commits.notify, board=ctx.board, task_status=store.status(task_status)
        )

    async def start_events(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        feed = EventFeed(
            backend.event_log,
            commits,
            buffer=ctx.config.limits.event_buffer,
        )
        await feed.run(shutdown=ctx.shutdown.wait, task_status=events.status(task_status))

    async def start_listener(
        *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Binds the port before the messaging actors load sessions, so that when the kept
        port is squatted every earlier session token is revoked before anyone can use it."""
        from pager.launch.squat import REVOKED_REASON, port_owner, squat_warning
        from pager.store.messaging import revoke_sessions
        from pager.web.server import bind_listener

        kept = await store.get().read(lambda conn: meta_value(conn, backend.port_key))
        taken: list[int] = []
        sock = bind_listener(
            ctx.config.host,
            ctx.config.port,
            int(kept) if kept else None,
            on_kept_taken=taken.append,
        )
        try:
            port = str(sock.getsockname()[1])
            if port != kept:  # the port is kept across restarts so URLs handed out stay valid
                await store.get().write(lambda conn: put_meta(conn, backend.port_key, port))
            # Warnings go into /health, broker.json and so `pager start` and `pager status`.
            warnings: list[str] = []
            if not is_loopback(ctx.config.host):
                warnings.append(remote_warning(ctx.config.host))
                log.warning("%s", warnings[-1])
            if taken:
                warnings.append(squat_warning(ctx.config.host, taken[0], port_owner(taken[0])))
                now = ctx.clock.now()
                revoked = await store.get().write(
                    lambda conn: revoke_sessions(conn, now, REVOKED_REASON)
                )
                log.warning("%s (%d session tokens revoked)", warnings[-1], revoked)
            if warnings:
                ctx.health["warnings"] = warnings
            listener.status(task_status).started(sock)
            await trio.sleep_forever()
        finally:
            sock.close()

    async def start_web(*, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED) -> None:
        from pager.operator import OperatorService  # the server stack, lazily
        from pager.store.sql_operator import SqlOperatorViews
        from pager.store.wake_book import StoreWakeBook
        from pager.wake_service import WakeService
        from pager.web.openapi import openapi_blueprint
        from pager.web.routes_events import events_blueprint
        from pager.web.routes_export import export_blueprint
        from pager.web.routes_me import me_blueprint
        from pager.web.routes_operator import operator_blueprint
        from pager.web.routes_paging import paging_blueprint
        from pager.web.routes_reservations import reservations_blueprint
        from pager.web.routes_v1 import v1_blueprint
        from pager.web.routes_wake import wake_blueprint
        from pager.web.server import run_web_server

        sock = listener.get()
        reads = backend.read_side()  # the operator's read-only connection
        try:
            service = messaging.get()
            feed = events.get()
            wake = WakeService(
                StoreWakeBook(store.get()),
                service.identities,
                ctx.clock,
                manifests=manifest_of,
                wakeups=backend.wakeups,
            )
            operator = OperatorService(
                service.directory,
                SqlOperatorViews(reads),
                ctx.health,
                ctx.board,
                hosts=backend.hosts,
                store=backend.status(),
            )
            await run_web_server(
                host=ctx.config.host,
                sock=sock,
                health=ctx.health,
                request_cap=ctx.config.limits.request_cap,
                shutdown_trigger=ctx.shutdown.wait,
                secret=ctx.secret,
                api=service,
                blueprints=[
                    v1_blueprint(service, ctx.secret, ctx.shutdown.wait),
                    me_blueprint(service, ctx.secret),
                    paging_blueprint(service, ctx.secret),
                    reservations_blueprint(service, ctx.secret),
                    export_blueprint(backend.exports(), ctx.secret),
                    operator_blueprint(operator, ctx.secret),
                    wake_blueprint(wake, ctx.secret),
                    openapi_blueprint(),
                    events_blueprint(
                        feed, ctx.secret, heartbeat=ctx.config.windows.event_heartbeat
                    ),
                ],
                display_cap=ctx.config.limits.display_cap,
                board=ctx.board,
                task_status=task_status,
            )
        finally:
            with trio.CancelScope(shield=True):
                await reads.aclose()
            ctx.web_stopped.set()

    providers = Supervisor("providers", [], strategy=Strategy.ONE_FOR_ONE)

    async def provider_disabled(implementation: str, reason: str) -> None:
        kind, data = disabled_event(implementation, reason)
        now = ctx.clock.now()
        await store.get().write(lambda conn: record_event(conn, now, kind, data))

    def own_url() -> str:
        host, port = ctx.config.host, listener.get().getsockname()[1]
        return f"http://{host if ':' not in host else f'[{host}]'}:{port}"

    wake_runs = WakeRuns(
        clock=ctx.clock,
        state_dir=ctx.paths.root,
        max_runs=ctx.config.limits.wake_runs,
        kill_after=ctx.config.windows.wake_kill_after,
        log_max_bytes=ctx.config.limits.wake_log_cap,
        url=own_url,
    )
    hub = ProviderHub(
        providers, partial(delivery_provider, wake_runs=wake_runs), on_disabled=provider_disabled
    )

    async def start_messaging(
        *, task_status: trio.TaskStatus[Any] = trio.TASK_STATUS_IGNORED
    ) -> None:
        # The service's own read-only connection (the roster), apart from the operator's,
        # and the sweeper's (its plan scans every identity).
        reads = backend.read_side()
        sweep_reads = backend.read_side()
        never_shown_mail = await trio.to_thread.run_sync(never_shown_mail_at_turns)  # files

        def service(directory: ActorRef[DirectoryMessage], identities: Identities) -> BrokerService:
            checkpoint = store.get()
            return BrokerService(
                directory,
                identities,
                ctx.config,
                ctx.clock,
                lookups=SqlLookups(checkpoint),
                listings=SqlListings(reads),
                accounts=SqlAccounts(checkpoint),
                hosts=backend.hosts,
                never_shown_mail=never_shown_mail,
                reservation_store=StoreReservations(checkpoint),
            )

        try:
            await run_messaging(
                ports=lambda: messaging_ports(
                    store.get(),
                    sweep_reads,
                    host=backend.store_host,
                    wakeups=backend.wakeups,
                    leadership=backend.leadership,
                    hosts=backend.hosts,
                    wake_in_write=backend.wake_in_write,
                ),
                providers=hub.get,
                config=ctx.config,
                clock=ctx.clock,
                service=service,
                wake_runs=wake_runs,
                task_status=messaging.status(task_status),
            )
        finally:
            with trio.CancelScope(shield=True):
                await reads.aclose()
                await sweep_reads.aclose()

    root = Supervisor(
        "broker",
        [
            ChildSpec("store", start_store),
            *extra_children,
            ChildSpec("listener", start_listener),
            ChildSpec("providers", providers.run),
            ChildSpec("messaging", start_messaging),
            ChildSpec("events", start_events),
            ChildSpec("web", start_web, restart=Restart.TRANSIENT),
        ],
        strategy=Strategy.REST_FOR_ONE,
        max_restarts=ROOT_MAX_RESTARTS,
        period=ROOT_PERIOD,
    )
    return root
