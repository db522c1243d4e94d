"""`pager run --pid PID`: watch a process `pager run` did not start, and page when it ends;
what can be read about it (its command line, start and directory from /proc, or `ps`)."""

from __future__ import annotations

import os
import sys
import time

from pager.commands.common import EXIT_OK
from pager.commands.run.page import COMMAND_CAP, PREFIX, cut, deliver, duration_text, one_line
from pager.commands.run.process import Signals

TYPE_CHECKING = False  # not typing.TYPE_CHECKING: importing typing costs milliseconds
if TYPE_CHECKING:
    from typing import Any


def watch_process(pid: int, to: str | None, job: str, whom: str, retry_s: float) -> int:
    """Wait for the running process `pid` to end and page `to` (`whom` on stderr) as `job`."""
    began_wall, began = time.time(), time.monotonic()
    command, started_at, cwd = _process_facts(pid)
    shown = f"process {pid}" + (f" (`{one_line(command)}`)" if command else "")
    print(f"{PREFIX} job {job}: watching {shown}; the page goes to {whom} when it ends",
          file=sys.stderr)  # fmt: skip
    try:
        _wait_gone(pid, started_at)
    except KeyboardInterrupt:
        print(f"{PREFIX} stopped watching process {pid}; nothing was paged", file=sys.stderr)
        return 130
    signals = Signals()
    signals.job_ended()
    signals.install()  # from here a signal stops the retries, and the page is printed
    if started_at is not None:
        duration = max(0.0, time.time() - started_at)
        since = "the process's start"
    else:
        duration = time.monotonic() - began
        since = f"when pager run began watching it ({_clock(began_wall)})"
    page: dict[str, Any] = {
        "message": f"job {job}: {shown} ended after {duration_text(duration)}",
        "job_id": job,
        "status": "ended",
        "pid": pid,
        "exit_status": "unknown: pager run did not start this process, so it cannot see how"
        " it ended",
        "duration_s": round(duration, 3),
        "duration_from": since,
    }
    if command:
        page["command"] = cut(command, COMMAND_CAP)
    if cwd:
        page["cwd"] = cwd
    deliver(to, page, signals, retry_s)
    return EXIT_OK


def exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # another user's: it exists
    except OverflowError:
        return False
    return True


def _process_facts(pid: int) -> tuple[str, float | None, str | None]:
    """The process's command line, when it started (epoch seconds) and its directory, each
    as far as they can be read (/proc on Linux, `ps` elsewhere)."""
    import shlex

    proc = f"/proc/{pid}"
    if not os.path.isdir(proc):
        return _ps(pid, "args"), _ps_start(pid), None
    command = ""
    try:
        with open(f"{proc}/cmdline", "rb") as file:
            argv = [arg.decode(errors="replace") for arg in file.read().split(b"\0")[:-1]]
        command = shlex.join(argv)
        if not argv:  # a kernel thread, or a process that has just ended
            with open(f"{proc}/comm", "rb") as file:
                command = f"[{file.read().decode(errors='replace').strip()}]"
    except OSError:
        pass
    try:
        cwd: str | None = os.readlink(f"{proc}/cwd")
    except OSError:
        cwd = None
    return command, _proc_start(pid), cwd


def _proc_start(pid: int) -> float | None:
    """When `pid` started, from /proc/PID/stat (clock ticks after boot) and the boot time in
    /proc/stat; None when unreadable."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            fields = file.read().rsplit(b")", 1)[1].split()
        ticks = int(fields[19])  # field 22 of proc(5); these start at field 3
        with open("/proc/stat", "rb") as file:
            boot = next(int(line.split()[1]) for line in file if line.startswith(b"btime "))
        return boot + ticks / os.sysconf("SC_CLK_TCK")
    except (OSError, IndexError, ValueError, StopIteration):
        return None


def _ps(pid: int, field: str) -> str:
    import subprocess

    try:
        done = subprocess.run(["ps", "-o", f"{field}=", "-p", str(pid)], capture_output=True,
                              text=True, timeout=10, check=False)  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return ""
    return done.stdout.strip() if done.returncode == 0 else ""


def _ps_start(pid: int) -> float | None:
    """When `pid` started, from `ps -o etime=` (`[[DD-]HH:]MM:SS` since it started)."""
    text = _ps(pid, "etime")
    if not text:
        return None
    days, _, clock = text.rpartition("-")
    try:
        seconds = 0
        for part in clock.split(":"):
            seconds = seconds * 60 + int(part)
        seconds += int(days or 0) * 86400
    except ValueError:
        return None
    return time.time() - seconds


def _wait_gone(pid: int, started_at: float | None) -> None:
    """Until `pid` has ended: a pidfd where the system has them, else a look every 0.5 s."""
    opener = getattr(os, "pidfd_open", None)
    if opener is not None:
        try:
            fd = opener(pid)
        except ProcessLookupError:
            return
        except OSError:
            pass  # an older kernel: look instead
        else:
            import select

            try:
                select.select([fd], [], [])  # readable once the process has ended
            finally:
                os.close(fd)
            return
    while _alive(pid, started_at):
        time.sleep(0.5)


def _alive(pid: int, started_at: float | None) -> bool:
    if not exists(pid):
        return False
    try:
        with open(f"/proc/{pid}/stat", "rb") as file:
            state = file.read().rsplit(b")", 1)[1].split()[0]
    except (OSError, IndexError):
        return True  # no /proc (macOS): it exists
    if state == b"Z":
        return False  # ended; its parent has not collected it yet
    now_started = _proc_start(pid)
    # The pid given to another process after this one ended is not the one watched.
    return started_at is None or now_started is None or abs(now_started - started_at) < 1.0


def _clock(epoch: float) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S %z", time.localtime(epoch))
