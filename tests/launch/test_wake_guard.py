"""The guard of a wake run (pager/launch/wake_guard.py) as a real process: the harness's exit
status, its output cut at the log's cap, and the whole run ended (its process group, and on
Linux every process that left it) when the harness exits, when the broker stops it, and when
the broker's end of the lifeline closes (as when the broker is killed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.launch import descendants
from tests.launch.conftest import PROCESS_BOUND, wait_for
from tests.processes import alive


def _guard(
    tmp_path: Path, script: str, *, max_bytes: int = 1000
) -> tuple[subprocess.Popen[bytes], int, Path]:
    """The guard running `sh -c script` in a group of its own; the broker's pipe end."""
    read_end, write_end = os.pipe()
    log = tmp_path / "wake.log"
    guard = subprocess.Popen(
        [sys.executable, "-I", "-m", "pager.launch.wake_guard", "--watch", str(read_end),
         "--log", str(log), "--max-bytes", str(max_bytes), "--kill-after", "0.5",
         "--", "sh", "-c", script],
        pass_fds=(read_end,),
        start_new_session=True,
    )  # fmt: skip
    os.close(read_end)
    return guard, write_end, log


def test_wake_guard_exits_with_the_harness_status_and_cuts_its_output(tmp_path: Path) -> None:
    guard, lifeline, log = _guard(tmp_path, "head -c 5000 /dev/zero | tr '\\0' x; exit 7")
    try:
        assert guard.wait(timeout=PROCESS_BOUND) == 7
    finally:
        os.close(lifeline)
    text = log.read_text()
    assert text.count("x") == 1000
    assert "output cut at 1000 bytes" in text
    assert "ended with status 7" in text


def test_wake_guard_ends_the_group_when_the_broker_is_gone(tmp_path: Path) -> None:
    """The harness ignores SIGTERM and leaves a child behind: once the lifeline closes, every
    process of the group is gone (SIGKILL after the grace)."""
    pids = tmp_path / "pids"
    script = f"trap '' TERM; sleep 600 & echo $$ $! > {pids}; wait"
    guard, lifeline, _ = _guard(tmp_path, script)
    wait_for(lambda: pids.exists() and pids.read_text().strip(), "the harness to start")
    harness, child = (int(pid) for pid in pids.read_text().split())
    os.close(lifeline)  # what the kernel does when the broker dies
    guard.wait(timeout=PROCESS_BOUND)
    wait_for(lambda: not alive(harness) and not alive(child), "the group to be gone")


#: A harness's helpers that leave its process group, written so the test can find them:
#: `setsid` (a session and group of their own, stdout still the guard's pipe), and a double
#: fork with output elsewhere (its parent exits at once: it is reparented).
ESCAPES = (
    "setsid sh -c 'sleep 301 & echo $! > {d}/a.tmp; mv {d}/a.tmp {d}/a; wait' &"
    " sh -c '(setsid sleep 302 >/dev/null 2>&1 & echo $! > {d}/b.tmp; mv {d}/b.tmp {d}/b) &';"
    " while [ ! -e {d}/a ] || [ ! -e {d}/b ]; do sleep 0.01; done"
)


def _escaped(directory: Path) -> list[int]:
    """The pids of the helpers that left the group, once both are written."""
    wait_for(lambda: (directory / "a").exists() and (directory / "b").exists(), "the helpers")
    return [int((directory / name).read_text()) for name in ("a", "b")]


@pytest.fixture
def helpers(tmp_path: Path) -> Iterator[Path]:
    """Where the helpers write their pids; any still alive after the test (it failed) are
    killed, so a failure leaves nothing behind."""
    yield tmp_path
    for name in ("a", "b"):
        path = tmp_path / name
        pid = int(path.read_text()) if path.exists() else 0
        if pid and alive(pid):
            os.kill(pid, signal.SIGKILL)


def _all_gone(pids: list[int]) -> None:
    wait_for(lambda: not any(alive(pid) for pid in pids), f"{pids} to be gone")


def test_wake_guard_ends_what_left_the_group_when_the_harness_exits(helpers: Path) -> None:
    """A harness that detaches helpers (setsid, double fork) and exits: the guard ends them
    all before it exits, with the harness's status."""
    guard, lifeline, log = _guard(helpers, ESCAPES.format(d=helpers) + "; exit 3")
    try:
        escaped = _escaped(helpers)
        assert guard.wait(timeout=PROCESS_BOUND) == 3
    finally:
        os.close(lifeline)
    _all_gone(escaped)
    assert "ended with status 3" in log.read_text()


def test_wake_guard_ends_what_left_the_group_when_the_broker_is_gone(helpers: Path) -> None:
    """The broker dies during a run whose harness ignores SIGTERM and detached helpers: the
    guard ends the harness and every helper, however far it went."""
    script = "trap '' TERM; " + ESCAPES.format(d=helpers) + "; wait"
    guard, lifeline, _ = _guard(helpers, script)
    escaped = _escaped(helpers)
    os.close(lifeline)  # what the kernel does when the broker dies
    guard.wait(timeout=PROCESS_BOUND)
    _all_gone(escaped)


def test_wake_guard_stopped_by_the_broker_ends_what_left_the_group(helpers: Path) -> None:
    """The broker stops a run (its timeout) with SIGTERM to the group; the harness ignores it:
    the guard kills the harness after its grace, ends every helper, and exits by itself
    (the broker need not kill it), reporting SIGKILL as the harness's end."""
    script = "trap '' TERM; " + ESCAPES.format(d=helpers) + "; wait"
    guard, lifeline, log = _guard(helpers, script)
    try:
        escaped = _escaped(helpers)
        os.killpg(guard.pid, signal.SIGTERM)
        assert guard.wait(timeout=PROCESS_BOUND) == 128 + signal.SIGKILL
    finally:
        os.close(lifeline)
    _all_gone(escaped)
    assert f"ended with status {-signal.SIGKILL}" in log.read_text()


def test_wake_guard_off_linux_adopts_nothing_and_walks_nothing(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where there is no subreaper or /proc (macOS), the guard is told so and falls back on
    the run's process group: no prctl call, no descendants found."""
    monkeypatch.setattr(sys, "platform", "darwin")
    assert descendants.become_subreaper() is False
    assert descendants.descendants(os.getpid()) == {}
    assert descendants.end_descendants() is True  # nothing it can reach is left
