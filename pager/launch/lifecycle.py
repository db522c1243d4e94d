"""On-demand lifecycle: adopt or start the broker, stop it (SPEC §5). Stdlib-only.

`ensure_broker()` is what every command that needs a broker calls.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from pager.launch.discovery import Discovery, RunningBroker, discover
from pager.launch.files import read_json, write_private_json
from pager.launch.lock import LockHeld, holder_alive, start_lock
from pager.launch.paths import StatePaths, ensure_state_dir
from pager.versions import SCHEMA_VERSION, schema_verdict

START_TIMEOUT = 20.0  # generous: a cold interpreter on a loaded 2-core machine
STOP_TIMEOUT = 5.0


class LifecycleError(Exception):
    """The broker could not be started or stopped; the message says what to do."""


def ensure_broker(paths: StatePaths, *, timeout: float = START_TIMEOUT) -> RunningBroker:
    """Adopt the running broker, or start one; concurrent callers all end up on the same one."""
    ensure_state_dir(paths)
    found = discover(paths)
    if found.broker is not None and _adoptable(found.broker):
        return found.broker
    deadline = time.monotonic() + timeout
    try:
        with start_lock(paths.start_lock, timeout):
            # Whoever held the start lock before us may have started it meanwhile.
            found = discover(paths)
            if found.broker is not None:
                if _adoptable(found.broker):
                    return found.broker
                stop_broker(paths, found.broker)
            return _spawn_and_wait(paths, found, deadline)
    except LockHeld:
        raise LifecycleError(
            f"another `pager` is still starting the broker after {timeout:.0f}s; "
            f"see {paths.broker_log} and try again"
        ) from None


def _adoptable(broker: RunningBroker) -> bool:
    verdict = schema_verdict(broker.schema_version)
    if verdict == "refuse":
        raise LifecycleError(
            f"a newer Pager broker (schema {broker.schema_version}, version {broker.version}) "
            f"runs at {broker.url}; this installation only knows schema {SCHEMA_VERSION}. "
            "Upgrade this installation of Pager."
        )
    return verdict == "adopt"


def _spawn_and_wait(paths: StatePaths, previous: Discovery, deadline: float) -> RunningBroker:
    # Its stdout and stderr start on the log itself, for an error before its logging is set
    # up; from then on it writes the log through its capped handler (pager/launch/broker_log.py).
    log_fd = os.open(paths.broker_log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    log_start = os.lseek(log_fd, 0, os.SEEK_END)
    try:
        process = subprocess.Popen(
            [sys.executable, "-m", "pager", "serve", "--log-file", str(paths.broker_log)],
            stdin=subprocess.DEVNULL,
            stdout=log_fd,
            stderr=log_fd,
            cwd="/",
            start_new_session=True,  # outlives this command and its terminal's signals
        )
    finally:
        os.close(log_fd)
    while time.monotonic() < deadline:
        exit_code = process.poll()
        if exit_code is not None:
            raise LifecycleError(
                f"the broker exited with status {exit_code} while starting: "
                f"{_log_tail(paths.broker_log, log_start)} (log: {paths.broker_log})"
            )
        found = discover(paths, timeout=0.5)
        if found.broker is not None and found.broker.pid == process.pid:
            return found.broker
        time.sleep(0.01)
    with contextlib.suppress(ProcessLookupError):
        process.kill()
    raise LifecycleError(
        f"the broker did not become ready in time ({previous.reason}); see {paths.broker_log}"
    )


def _log_tail(log: Path, start: int) -> str:
    """The last non-empty line the failed broker wrote: its error message. A log rotated
    meanwhile (it reached its cap) is shorter than `start`: then it is all the broker's."""
    try:
        with log.open("rb") as file:
            file.seek(start if start <= os.fstat(file.fileno()).st_size else 0)
            lines = [line.strip() for line in file.read().decode(errors="replace").splitlines()]
    except OSError:
        return "(no log)"
    lines = [line for line in lines if line]
    return lines[-1] if lines else "(no output)"


def stop_broker(paths: StatePaths, broker: RunningBroker, *, timeout: float = STOP_TIMEOUT) -> bool:
    """SIGTERM the verified broker, SIGKILL it after `timeout`; True if it had to be killed.
    A note says who asks, so that a broker in the foreground says why it stops."""
    _leave_stop_note(paths, broker)
    _signal(broker.pid, signal.SIGTERM)
    killed = False
    if not _wait_gone(broker.pid, timeout):
        _signal(broker.pid, signal.SIGKILL)
        killed = True
        _wait_gone(broker.pid, timeout)
    # A killed process is a zombie a moment before its last threads let go of its files: the
    # next broker must find the lock free.
    deadline = time.monotonic() + timeout
    while holder_alive(paths.lock) and time.monotonic() < deadline:
        time.sleep(0.005)
    # A killed broker cannot tidy up after itself.
    info = read_json(paths.broker_json)
    if info is not None and info.get("instance_id") == broker.instance_id:
        with contextlib.suppress(FileNotFoundError):
            paths.broker_json.unlink()
    return killed


def _leave_stop_note(paths: StatePaths, broker: RunningBroker) -> None:
    command = " ".join(["pager", *sys.argv[1:2]]) if sys.argv[1:2] else "pager"
    note = {"instance_id": broker.instance_id, "by": f"`{command}` (pid {os.getpid()})"}
    with contextlib.suppress(OSError):  # only the log's words depend on it
        write_private_json(paths.stop_note, note)


def _signal(pid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signum)


def _wait_gone(pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)  # reap it if it happens to be our child
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        if _is_zombie(pid):  # exited; only its parent has yet to reap it
            return True
        time.sleep(0.01)
    return False


def _is_zombie(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False  # no /proc (macOS) or already gone
    return stat.rpartition(")")[2].split()[:1] == ["Z"]
