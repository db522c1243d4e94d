"""The adoption lock `broker.lock` (SPEC §5). Stdlib-only.

The running broker holds an exclusive `flock` on the file for its whole life and writes its
identity (pid, instance id, schema version) into it. The kernel drops the lock when the holder
dies, so a stale lock is taken over simply by locking it again. Whether a broker holds it is
decided by the kernel's lock alone (`holder_alive`), never by the file's contents: a broker
killed with SIGKILL leaves its identity behind, and anyone who read `/health` could replay it.
"""

from __future__ import annotations

import fcntl
import os
import time

from pager.small_json import loads

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from pathlib import Path
    from types import TracebackType
    from typing import Any


class LockHeld(Exception):
    """Another process holds the lock."""


#: `holder_alive` takes a shared lock for a moment; a broker starting at that very moment
#: retries its exclusive lock this long before it concludes that another broker holds it.
ACQUIRE_PATIENCE = 1.0


class BrokerLock:
    """An acquired adoption lock; `release()` (or process exit) frees it."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd = fd

    @classmethod
    def acquire(cls, path: Path) -> BrokerLock:
        """Take the lock, or raise `LockHeld` when another process keeps it (a probe by
        `holder_alive` only holds it for a moment)."""
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
        deadline = time.monotonic() + ACQUIRE_PATIENCE
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return cls(path, fd)
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    os.close(fd)
                    raise LockHeld(str(path)) from None
                time.sleep(0.005)

    def write_identity(self, identity: dict[str, Any]) -> None:
        """Record who holds the lock; callers compare it with `/health` before adopting."""
        import json  # not at the top: readers of the lock (the quick commands) need only loads

        payload = json.dumps(identity, sort_keys=True).encode()
        os.ftruncate(self._fd, 0)
        os.pwrite(self._fd, payload, 0)
        os.fsync(self._fd)

    def release(self) -> None:
        """Clear the identity, then unlock: a reader never sees a released lock's identity."""
        if self._fd < 0:
            return
        try:  # noqa: SIM105 (contextlib.suppress: contextlib's imports cost the lock's readers)
            os.ftruncate(self._fd, 0)
        except OSError:
            pass
        os.close(self._fd)  # closing the only descriptor drops the flock
        self._fd = -1


def holder_alive(path: str | Path) -> bool:
    """Whether a live process holds the lock, asked of the kernel: a shared lock that can be
    taken means nobody holds the exclusive one (it is given back at once)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    finally:
        os.close(fd)  # also drops the shared lock, if it was taken
    return False


def read_lock_identity(path: str | Path) -> dict[str, Any] | None:
    try:
        with open(path, "rb") as file:
            data = loads(file.read() or b"null")
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def start_lock(path: Path, timeout: float) -> StartLock:
    """Serialise starters: the holder checks, spawns and waits; the others then adopt.
    `with start_lock(path, timeout):` holds it, or raises LockHeld after `timeout` seconds.

    Polls rather than blocking in `flock` so that the wait is bounded.
    """
    return StartLock(path, timeout)


class StartLock:
    """`start_lock`'s context manager: a class, not `contextlib.contextmanager`, which would
    cost every reader of the lock (the quick commands) `contextlib`'s imports."""

    def __init__(self, path: Path, timeout: float) -> None:
        self.path, self.timeout = path, timeout
        self._fd = -1

    def __enter__(self) -> None:
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            deadline = time.monotonic() + self.timeout
            while True:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    break
                except BlockingIOError:
                    if time.monotonic() >= deadline:
                        raise LockHeld(str(self.path)) from None
                    time.sleep(0.02)
        except BaseException:  # timed out, or interrupted while it waited
            os.close(fd)
            raise
        self._fd = fd

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        os.close(self._fd)
        self._fd = -1
