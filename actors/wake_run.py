"""Wake runs (docs/wake.md): an identity with launch on mail on and mail waiting, but no
session, has its provider resume its conversation headless and supervise the run.

`WakeRuns` is what the broker's providers share: the bound on runs at once, the ports, and the
runs going (so a person attaching can wait for the run it ended). Each run is a temporary
child of its implementation's provider (`run_wake`), in this order:

1. wait for a slot (at most `max_runs` at once per broker);
2. register a session for the identity, which the store refuses while one is attached, when
   the identity is archived, or over the hourly bound (`Registration.wake`: one commit);
3. start the harness under `pager.launch.wake_guard` in a process group of its own, in the
   identity's workspace, its output into `logs/wake-<alias>-<time>.log`;
4. hold the session's lease while it runs; stop it (SIGTERM to the group, SIGKILL after
   `kill_after`) at its timeout, when its session ends (a person attached, an archive), or
   when the broker stops;
5. end the session, record the run's end (outcome, status, duration, the messages it
   acknowledged: the `wake.ended` event) and tell the identity, which offers what is left on
   the redelivery schedule.
"""

from __future__ import annotations

import contextlib
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

import attrs
import trio

from pager.domain import ids
from pager.domain.errors import ErrorCode, PagerError
from pager.domain.records import SessionState
from pager.domain.registration import Registered, WakeStart
from pager.domain.wake import HOUR, RunOutcome, WakeTarget
from pager.launch.files import write_private_text
from pager.store._errors import StoreFault
from pager.store._wake import RUN_OVER

if TYPE_CHECKING:
    from actors._runtime import ActorRef
    from actors.directory import DirectoryMessage
    from actors.identities import Identities
    from actors.identity_protocol import IdentityMessage
    from pager.domain.clock import WallClock
    from pager.implementations.manifest import Manifest
    from pager.launch.wrapper import HarnessCommand, LaunchSpec
    from pager.store.ports import WakeBook

log = logging.getLogger("pager.wake")

#: Runs at once per broker (`[wake] max_runs`).
MAX_RUNS = 2
#: After SIGTERM, how long a run has before SIGKILL (`[wake] kill_after`).
KILL_AFTER = 10.0
#: How long past `kill_after` the guard has to end the run's processes and exit by itself.
GUARD_GRACE = 2.0
#: Each run's log is cut at this size; this many logs are kept per identity.
LOG_MAX_BYTES = 1024 * 1024
LOGS_KEPT = 20
#: A run the store's fault kept from starting is asked for again this long later.
FAULT_RETRY = 5.0


@attrs.frozen
class RunEnded:
    """What the identity hears when a run it asked for is over (or never started): how it
    ended, how many messages it acknowledged, and when another may start at the earliest
    (`retry_after`, seconds: the hourly bound)."""

    outcome: RunOutcome | None  # None: no run started (refused, or nothing to do)
    acknowledged: int = 0
    retry_after: float | None = None
    detail: str = ""


@attrs.frozen
class RunPorts:
    """What a run needs of the messaging subtree: the wake book (its target, start and end),
    the directory (its session registers there) and the identities (its lease and end)."""

    book: WakeBook
    directory: ActorRef[DirectoryMessage]
    identities: Identities


@attrs.define
class WakeRuns:
    """The broker's runs: its bound, its ports, and those going (by session id).

    Built by the broker's tree before anything starts and shared by the providers, whose
    runs outlive a restart of the messaging subtree they work through. So that side is a
    small lookup, not a field set once: each incarnation of the subtree registers its
    `RunPorts` (`serve`) before any of its identities starts, and a run reaches the latest
    (as a process is found by its registered name)."""

    clock: WallClock
    state_dir: Path
    max_runs: int = MAX_RUNS
    kill_after: float = KILL_AFTER
    log_max_bytes: int = LOG_MAX_BYTES
    #: The broker's own URL (known once its listener is bound).
    url: Callable[[], str] = lambda: ""
    environ: dict[str, str] = attrs.Factory(lambda: dict(os.environ))
    limiter: trio.CapacityLimiter = attrs.field(init=False)
    going: dict[str, trio.Event] = attrs.Factory(dict)  # session id -> set when it is over
    _ports: RunPorts | None = attrs.field(default=None, init=False)

    def __attrs_post_init__(self) -> None:
        self.limiter = trio.CapacityLimiter(self.max_runs)

    def serve(self, ports: RunPorts) -> None:
        """The messaging subtree that is starting: runs work through it from now on."""
        self._ports = ports

    def _served(self) -> RunPorts:
        if self._ports is None:
            raise RuntimeError("no messaging subtree serves the wake runs yet")
        return self._ports

    @property
    def book(self) -> WakeBook:
        return self._served().book

    @property
    def directory(self) -> ActorRef[DirectoryMessage]:
        return self._served().directory

    @property
    def identities(self) -> Identities:
        return self._served().identities

    async def wait_over(self, session_id: str) -> None:
        """Until the run of this session (if one goes) is over: the process group gone."""
        over = self.going.get(session_id)
        if over is not None:
            with trio.move_on_after(self.kill_after + 5.0):
                await over.wait()


async def run_wake(
    runs: WakeRuns,
    manifest: Manifest,
    spec: LaunchSpec,
    identity: ActorRef[IdentityMessage],
    agent_id: str,
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """One run, start to end; whatever happens, the identity hears `RunEnded` once."""
    task_status.started()
    ended = RunEnded(None, detail="not started")
    try:
        async with runs.limiter:
            ended = await _run(runs, manifest, spec, agent_id)
    except StoreFault as exc:  # before the run started (its end is recorded in `_finish`)
        log.warning("wake run for %s not started: %s", agent_id, exc)
        ended = RunEnded(None, retry_after=FAULT_RETRY, detail=str(exc))
    finally:
        with contextlib.suppress(Exception):
            identity.try_cast(ended)


async def _run(runs: WakeRuns, manifest: Manifest, spec: LaunchSpec, agent_id: str) -> RunEnded:
    from actors.directory import RegisterCommand
    from pager.launch.wake_command import wake_args, why_not

    now = runs.clock.now()
    target = await runs.book.target(agent_id, now=now)
    if target is None or target.available == 0:
        return RunEnded(None, detail="nothing to do")
    settings = target.settings
    refusal = why_not(manifest, settings.command, target.conversation_key)
    if refusal is not None:  # e.g. its conversation moved to another agent since
        log.warning("wake run for %s cannot start: %s", target.address, refusal)
        await runs.book.deferred(agent_id, retry_after=HOUR, why=refusal, now=now)
        return RunEnded(None, retry_after=HOUR, detail=refusal)
    args = wake_args(manifest, settings.command)
    assert args is not None
    run_id = ids.new_run_id()
    command = RegisterCommand(
        workspace=target.workspace,
        implementation=target.identity.implementation,
        session_name=None,
        conversation_key=target.conversation_key,
        delivery=None,
        force=False,
        wake=WakeStart(agent_id, run_id, settings.max_runs_per_hour),
    )
    try:
        registered = await runs.directory.call(command)
    except PagerError as exc:
        if exc.code is not ErrorCode.RATE_LIMITED:
            return RunEnded(None, detail=exc.message)  # attached meanwhile, archived, gone
        retry = float(exc.details.get("retry_after_s", HOUR))
        await runs.book.deferred(agent_id, retry_after=retry, why=exc.message, now=runs.clock.now())
        return RunEnded(None, retry_after=retry, detail=exc.message)
    session_id = registered.session.id
    over = trio.Event()
    runs.going[session_id] = over
    # Cancelled (the provider or the broker stops): its process group is stopped on the way out.
    outcome, status, detail = RunOutcome.STOPPED, None, "the broker stopped"
    try:
        async with runs.identities.holding_lease(session_id) as session_ended:
            try:
                outcome, status, detail = await _process(
                    runs, manifest, spec, args, target, registered, run_id, session_ended
                )
            except Exception as exc:
                outcome, detail = RunOutcome.FAILED, f"failed: {exc!r}"
                raise
    finally:
        with trio.CancelScope(shield=True):
            done = await _finish(runs, agent_id, session_id, run_id, outcome, status, detail)
            over.set()
            runs.going.pop(session_id, None)
    return done


async def _process(
    runs: WakeRuns,
    manifest: Manifest,
    spec: LaunchSpec,
    args: tuple[str, ...],
    target: WakeTarget,
    registered: Registered,
    run_id: str,
    session_ended: trio.Event,
) -> tuple[RunOutcome, int | None, str]:
    """Start the harness under its guard and see it to its end."""
    directory = await trio.to_thread.run_sync(partial(tempfile.mkdtemp, prefix="pager-wake-"))
    try:
        try:  # files: the token, the connector's, the log's directory; off the event loop
            harness, log_path = await trio.to_thread.run_sync(
                _prepare, runs, manifest, spec, args, target, registered, directory
            )
        except Exception as exc:  # a missing program, a template that cannot be filled
            log.warning("wake run for %s could not start: %s", target.address, exc)
            return RunOutcome.FAILED, None, str(exc)
        read_end, write_end = os.pipe()  # the guard's lifeline: closed when the broker dies
        guard = [
            sys.executable, "-I", "-m", "pager.launch.wake_guard", "--watch", str(read_end),
            "--log", str(log_path), "--max-bytes", str(runs.log_max_bytes),
            "--kill-after", str(runs.kill_after), "--", *harness.argv,
        ]  # fmt: skip
        try:
            process = await trio.lowlevel.open_process(
                guard,
                env=dict(harness.env),
                cwd=target.workspace.path,  # gone: the run fails, saying so
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                pass_fds=(read_end,),
            )
        except OSError as exc:
            os.close(write_end)
            return RunOutcome.FAILED, None, f"could not start the guard: {exc}"
        finally:
            os.close(read_end)
        try:
            await runs.book.started(
                run_id, pid=process.pid, log=str(log_path), now=runs.clock.now()
            )
            outcome, detail = await _supervise(process, target.settings.timeout, session_ended)
        finally:
            with trio.CancelScope(shield=True):
                await _stop_group(process, runs.kill_after)
            os.close(write_end)
        return outcome, _status(process.returncode), detail
    finally:
        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(partial(shutil.rmtree, directory, ignore_errors=True))


def _prepare(
    runs: WakeRuns,
    manifest: Manifest,
    spec: LaunchSpec,
    args: tuple[str, ...],
    target: WakeTarget,
    registered: Registered,
    directory: str,
) -> tuple[HarnessCommand, Path]:
    """In a worker thread: the session's token file, the harness's command (its connector
    writes its files into `directory`) and a new log's path."""
    from pager.launch.wake_command import wake_command, wake_values

    token_file = Path(directory) / "session-token"
    write_private_text(token_file, registered.token + "\n")
    values = wake_values(
        url=runs.url(),
        token=registered.token,
        token_file=str(token_file),
        agent_id=target.identity.id,
        address=target.address,
        alias=target.identity.alias,
        session_id=registered.session.id,
        state_dir=str(runs.state_dir),
        conversation_key=target.conversation_key or "",
        implementation=manifest.id,
    )
    environ = {**runs.environ, "PAGER_HOME": str(runs.state_dir)}
    harness = wake_command(spec, manifest, args, values, directory, environ)
    return harness, _log_path(runs, target.identity.alias or target.identity.id)


async def _supervise(
    process: trio.Process, limit: float, session_ended: trio.Event
) -> tuple[RunOutcome, str]:
    """Until the run ends by itself, its timeout passes, or its session ends: which first."""
    first: tuple[RunOutcome, str] | None = None

    async with trio.open_nursery() as nursery:

        def over(outcome: RunOutcome, detail: str) -> None:
            nonlocal first
            if first is None:
                first = (outcome, detail)
            nursery.cancel_scope.cancel()

        async def exits() -> None:
            await process.wait()
            over(RunOutcome.EXITED, "ended by itself")

        async def superseded() -> None:
            await session_ended.wait()
            over(RunOutcome.SUPERSEDED, "its session ended (a session attached, or an archive)")

        nursery.start_soon(exits)
        nursery.start_soon(superseded)
        await trio.sleep(limit)
        over(RunOutcome.TIMED_OUT, f"stopped at its timeout ({limit:g} s)")
    assert first is not None
    return first


async def _stop_group(process: trio.Process, kill_after: float) -> None:
    """The run ends whole: SIGTERM to its group unless it ended; the guard then gives the
    harness `kill_after`, kills it and everything it started (pager/launch/wake_guard.py) and
    exits. Only a guard still there `GUARD_GRACE` later gets SIGKILL with its group; and
    SIGKILL to whatever is left in the group."""
    group = process.pid  # the guard leads its own group (start_new_session)
    if process.returncode is None:
        _signal_group(group, signal.SIGTERM)
        with trio.move_on_after(kill_after + GUARD_GRACE):
            await process.wait()
    if process.returncode is None:
        _signal_group(group, signal.SIGKILL)
        await process.wait()
    _signal_group(group, signal.SIGKILL)  # off Linux, what the harness left in the group


def _signal_group(group: int, signum: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signum)


def _status(returncode: int | None) -> int | None:
    """An exit status as a shell shows it (128 + N for a signal)."""
    if returncode is None:
        return None
    return 128 - returncode if returncode < 0 else returncode


def _log_path(runs: WakeRuns, name: str) -> Path:
    """A new log for a run of `name`; the oldest beyond LOGS_KEPT of that name are deleted."""
    logs = runs.state_dir / "logs"
    logs.mkdir(mode=0o700, parents=True, exist_ok=True)
    safe = "".join(c if c.isalnum() or c in "-_." else "-" for c in name)[:64] or "agent"
    stamp = time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + f"-{time.time_ns() % 10**9:09d}"
    mine = re.compile(rf"wake-{re.escape(safe)}-\d{{8}}T\d{{6}}-\d{{9}}\.log")
    kept = sorted(path for path in logs.iterdir() if mine.fullmatch(path.name))
    for old in kept[: max(0, len(kept) - (LOGS_KEPT - 1))]:
        with contextlib.suppress(OSError):
            old.unlink()
    return logs / f"wake-{safe}-{stamp}.log"


async def _finish(
    runs: WakeRuns,
    agent_id: str,
    session_id: str,
    run_id: str,
    outcome: RunOutcome,
    status: int | None,
    detail: str,
) -> RunEnded:
    """The run's session ends through its identity (which tells its streams), unless
    something ended it first, and the run's end is recorded (ending the session in the store
    if the identity could not: the broker is stopping)."""
    from actors.identity_protocol import EndSession

    try:
        await runs.identities.call(
            agent_id, EndSession(session_id, SessionState.DETACHED, RUN_OVER)
        )
    except Exception as exc:  # the identity is gone, or the store: the lease lapses anyway
        log.warning("wake run %s: could not end its session: %r", run_id, exc)
    try:
        run = await runs.book.end(
            run_id, outcome=outcome, exit_code=status, detail=detail, now=runs.clock.now()
        )
    except Exception as exc:
        log.warning("wake run %s: could not record its end: %r", run_id, exc)
        run = None
    log.info("wake run %s of %s: %s (%s)", run_id, agent_id, outcome.value, detail)
    return RunEnded(outcome, acknowledged=0 if run is None else run.acknowledged, detail=detail)
