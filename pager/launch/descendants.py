"""Every process a program started, wherever it went: what a wake run's guard uses to end a run
whole (docs/wake.md). Standard library only (the guard starts per run).

On Linux the guard becomes a *child subreaper* (`prctl(PR_SET_CHILD_SUBREAPER)`): a process
that leaves the run's group (`setsid`) or whose parent exits (a double fork) is reparented to
the guard instead of to init, so it stays a descendant, found by walking `/proc`. Elsewhere
(macOS) there is neither: `become_subreaper` says so and the walk finds nothing, leaving the
process group as the only handle on the run.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
import time
from pathlib import Path

#: <linux/prctl.h>
PR_SET_CHILD_SUBREAPER = 36
#: How long `end_descendants` keeps at it (a process stuck in the kernel cannot be killed).
END_BOUND = 5.0
#: Between two passes over /proc while killed processes are dying.
PASS_PAUSE = 0.005


def linux() -> bool:
    return sys.platform.startswith("linux")


def become_subreaper() -> bool:
    """Make orphaned descendants of this process its children rather than init's; whether it
    took (never off Linux, or when the C library has no `prctl`)."""
    if not linux():
        return False
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        return int(libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)) == 0
    except (OSError, AttributeError):
        return False


def descendants(root: int) -> dict[int, bool]:
    """The descendants of `root` (all generations) from one scan of /proc: pid -> whether it
    still runs (False: a zombie waiting to be reaped). Empty off Linux."""
    if not linux():
        return {}
    children: dict[int, list[tuple[int, bool]]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone meanwhile
        state, ppid = fields[0], int(fields[1])
        children.setdefault(ppid, []).append((int(stat.parent.name), state != "Z"))
    found: dict[int, bool] = {}
    frontier = [root]
    while frontier:
        for pid, running in children.get(frontier.pop(), ()):
            if pid not in found:
                found[pid] = running
                frontier.append(pid)
    return found


def kill_descendants() -> None:
    """SIGKILL every running descendant of this process once (reaping none: the caller may
    still wait for a child of its own)."""
    for pid, running in descendants(os.getpid()).items():
        if running:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def end_descendants(bound: float = END_BOUND) -> bool:
    """SIGKILL every descendant of this process, pass after pass (one may fork while the pass
    runs; its child is found by the next), and reap those reparented to it, until none is
    left or `bound` seconds passed. Whether none is left. Call it once this process has
    waited for its own child: it reaps any child."""
    deadline = time.monotonic() + bound
    while True:
        kill_descendants()
        _reap()
        if not descendants(os.getpid()):
            return True
        if time.monotonic() > deadline:
            return False
        time.sleep(PASS_PAUSE)  # the killed are dying; their parents reap them or they come here


def _reap() -> None:
    """Collect every child of this process that has ended."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
