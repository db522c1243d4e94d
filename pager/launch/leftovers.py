"""What a launch leaves running: processes that still hold its credential when the harness has
exited (a manifest's `[launch] stop_leftovers`, docs/implementations/README.md).

Some harnesses start a daemon detached (Cline CLI's hub), which outlives them with the
environment of the launch that started it: the relay's credential (`PAGER_TOKEN`), the
launch's own configuration. A session credential must not outlive its session, so when the
harness exits the launch stops every process of the user's whose environment carries
`PAGER_TOKEN=<this launch's credential>`: the credential is random per launch, so only a
process started from this launch (or one given it on purpose) holds it. Linux only (it reads
`/proc/PID/environ`); elsewhere nothing is found.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from pathlib import Path

from pager.launch.descendants import linux

#: After SIGTERM, how long a leftover has to exit before SIGKILL.
GRACE = 2.0
#: Between two looks at whether the stopped processes are gone.
PAUSE = 0.02


def holders(credential: str, variable: str = "PAGER_TOKEN") -> list[int]:
    """The pids (not this process's) whose environment has `variable=credential`, from one
    scan of /proc; processes of other users (unreadable) are skipped."""
    if not linux() or not credential:
        return []
    wanted = f"{variable}={credential}".encode()
    found = []
    for environ in Path("/proc").glob("[0-9]*/environ"):
        pid = int(environ.parent.name)
        if pid == os.getpid():
            continue
        try:
            entries = environ.read_bytes().split(b"\0")
        except OSError:
            continue  # gone meanwhile, or another user's
        if wanted in entries:
            found.append(pid)
    return sorted(found)


def stop_holders(credential: str, grace: float = GRACE) -> list[int]:
    """SIGTERM every holder of `credential`, then SIGKILL those still there after `grace`
    seconds; the pids stopped. A zombie's environment reads empty, so one that died and
    waits for its parent is not counted as left."""
    stopped = holders(credential)
    for pid in stopped:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while (left := holders(credential)) and time.monotonic() < deadline:
        time.sleep(PAUSE)
    for pid in left:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + grace  # SIGKILL takes effect at once, but not instantly
    while holders(credential) and time.monotonic() < deadline:
        time.sleep(PAUSE)
    return stopped
