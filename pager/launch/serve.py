"""`pager serve`: the broker process in the foreground (SPEC §5).

Order matters: the adoption lock is taken before anything else is touched, so a second broker
(or a foreign lock holder) never opens the database; `broker.json` appears only once the web
server answers, and goes away before the lock is released.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import os
import signal
import sys
import uuid
from collections.abc import AsyncIterator, Sequence
from datetime import UTC, datetime

import trio

from pager.broker import BrokerContext, broker_context, build_broker_tree
from pager.config import Config
from pager.launch.files import ensure_secret, read_json, write_private_json
from pager.launch.lock import BrokerLock, LockHeld, read_lock_identity
from pager.launch.paths import StateDirError, StatePaths, ensure_state_dir
from pager.store._errors import StoreError, StoreFault
from pager.store.sqlite_writer import BrokerRunInfo
from pager.versions import SCHEMA_VERSION, VERSION
from supervisors import ChildSpec, ChildStartFailed, SupervisorGaveUp

log = logging.getLogger("pager.broker")

#: After a shutdown starts, the web server gets this long before the tree is cancelled.
SHUTDOWN_BOUND = 2.0

#: The cyclic collector's thresholds for the broker process. Each MCP call allocates a few
#: thousand objects (pydantic models, dicts, frames), so Python's default (700, 10, 10) ran
#: the youngest generation several times a call. Measured with brokers side by side under one
#: 8-client load: (20,000, 20, 100) spent 0.95 of the default's CPU per call, while
#: (20,000, 10, 10) spent 1.03 (its more frequent full collections walk the whole heap).
GC_THRESHOLDS = (20_000, 20, 100)


def tune_gc() -> None:
    """Set the broker process's collector thresholds (`pager serve` calls it once)."""
    gc.set_threshold(*GC_THRESHOLDS)


def utc_now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def serve_main(
    paths: StatePaths, config: Config, *, extra_children: Sequence[ChildSpec] = ()
) -> int:
    """Run the broker until SIGINT/SIGTERM (exit 0) or until its tree gives up (exit 1)."""
    try:
        ensure_state_dir(paths)
        lock = BrokerLock.acquire(paths.lock)
    except StateDirError as exc:
        log.error("%s", exc)
        return 1
    except LockHeld:
        holder = read_lock_identity(paths.lock) or {}
        log.error(
            "%s is held by another process%s; a broker may already run (`pager status`). "
            "If none does, find the holder with `fuser %s` and stop it.",
            paths.lock,
            f" (pid {holder['pid']})" if "pid" in holder else "",
            paths.lock,
        )
        return 1
    try:
        secret = ensure_secret(paths.secret)
        run = BrokerRunInfo(
            instance_id=uuid.uuid4().hex, pid=os.getpid(), version=VERSION, started_at=utc_now()
        )
        lock.write_identity(
            {"instance_id": run.instance_id, "pid": run.pid, "schema_version": SCHEMA_VERSION}
        )
        ctx = broker_context(paths, config, run, secret=secret, utc_now=utc_now)
        return _run(ctx, extra_children)
    finally:
        _remove_broker_json(paths, lock_identity=read_lock_identity(paths.lock))
        lock.release()


def _run(ctx: BrokerContext, extra_children: Sequence[ChildSpec]) -> int:
    try:
        trio.run(_serve, ctx, extra_children)
    except BaseExceptionGroup as group:
        gave_up, rest = group.split(SupervisorGaveUp)
        failed, rest = rest.split(Exception) if rest is not None else (None, None)
        if rest is not None:  # KeyboardInterrupt and the like are not ours to report
            raise rest from None
        for exc in _leaves(gave_up):
            log.error("broker stopped: %s", exc)
        for exc in _leaves(failed):  # a child that failed to start: its error is the message
            log.error("broker could not start: %s", _in_words(exc))
        return 1
    return 0


def _in_words(exc: BaseException) -> BaseException | str:
    """A start failure as a person should read it: the error a child wrote for people (a port
    that is taken) by itself, not inside the supervisors' account of which child raised it."""
    from pager.web.server import PortInUse  # the web stack is loaded by now

    cause: BaseException | None = exc
    while isinstance(cause, ChildStartFailed):
        cause = cause.error
    # A port that is taken, a store that cannot be opened or reached (a wrong password): each
    # says what it is and what to do.
    written_for_people: tuple[type[BaseException], ...] = (PortInUse, StoreError, StoreFault)
    postgresql = sys.modules.get("pager.store.pg._database")  # loaded when that is the store
    if postgresql is not None:
        written_for_people += (postgresql.PgStoreError,)
    return str(cause) if isinstance(cause, written_for_people) else exc


def _leaves(group: BaseExceptionGroup[BaseException] | None) -> list[BaseException]:
    if group is None:
        return []
    leaves: list[BaseException] = []
    for exc in group.exceptions:
        leaves.extend(_leaves(exc) if isinstance(exc, BaseExceptionGroup) else [exc])
    return leaves


async def _serve(ctx: BrokerContext, extra_children: Sequence[ChildSpec]) -> None:
    root = build_broker_tree(ctx, extra_children)
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_watch_signals, signals, ctx, nursery.cancel_scope)
            await nursery.start(root.run)
            url = root.started_value("web")
            assert isinstance(url, str)
            write_private_json(ctx.paths.broker_json, {**ctx.health, "url": url})
            log.info("broker ready at %s (pid %d)", url, ctx.run.pid)
            await ctx.shutdown.wait()
            # Graceful: the web server finishes in-flight requests, then the tree stops in
            # reverse order (the store checkpoints last).
            with trio.move_on_after(SHUTDOWN_BOUND):
                await ctx.web_stopped.wait()
            nursery.cancel_scope.cancel()


async def _watch_signals(
    signals: AsyncIterator[int], ctx: BrokerContext, scope: trio.CancelScope
) -> None:
    async for signum in signals:
        if ctx.shutdown.is_set():
            log.warning("second %s: stopping now", signal.Signals(signum).name)
            scope.cancel()
            return
        log.info("%s: shutting down", _why(signum, ctx))
        ctx.shutdown.set()


def _why(signum: int, ctx: BrokerContext) -> str:
    """The signal, and who sent it when a `pager` command did (it leaves a note first)."""
    name = signal.Signals(signum).name
    note = read_json(ctx.paths.stop_note)
    with contextlib.suppress(FileNotFoundError):
        ctx.paths.stop_note.unlink()
    if signum == signal.SIGTERM and note and note.get("instance_id") == ctx.run.instance_id:
        return f"{name} from {note.get('by')}"
    return name


def _remove_broker_json(paths: StatePaths, *, lock_identity: dict[str, object] | None) -> None:
    info = read_json(paths.broker_json)
    if info is None or lock_identity is None:
        return
    if info.get("instance_id") == lock_identity.get("instance_id"):
        with contextlib.suppress(FileNotFoundError):
            paths.broker_json.unlink()
