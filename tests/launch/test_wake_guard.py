"""The guard of a wake run (pager/launch/wake_guard.py) as a real process: the harness's exit
status, its output cut at the log's cap, and the whole process group ended when the broker's
end of the lifeline closes (as when the broker is killed)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
