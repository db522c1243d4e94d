"""The guard of one wake run (docs/wake.md): `python -m pager.launch.wake_guard --watch FD
--log PATH --max-bytes N -- COMMAND…`, started by the broker in a process group of its own.

It runs COMMAND (the harness) in that group with standard input closed, copies its output into
the log up to N bytes (then notes the cut and drains the rest), and exits with its status. FD
is the read end of a pipe whose write end only the broker holds: when the broker dies, however
it dies (SIGKILL included), the kernel closes it, the guard reads end-of-file and stops the
whole group (SIGTERM, then SIGKILL after a bound), so no harness process outlives its broker.
The broker stops a run the same way, by signalling the group; the guard itself survives the
SIGTERM to write the harness's end into the log. Standard library only: it starts per run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Sequence
from typing import IO

#: After SIGTERM, how long the group has before SIGKILL when the broker is gone.
KILL_AFTER = 5.0
CHUNK = 64 * 1024


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pager.launch.wake_guard")
    parser.add_argument("--watch", type=int, required=True, help="the broker's pipe (read end)")
    parser.add_argument("--log", required=True)
    parser.add_argument("--max-bytes", type=int, required=True)
    parser.add_argument("--kill-after", type=float, default=KILL_AFTER)
    parser.add_argument("command", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if not command:
        parser.error("give the command after --")
    # A handler, not SIG_IGN: ignored signals stay ignored across exec, handlers do not.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: None)
    fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "ab") as log:
        _line(log, f"pager wake run: {command[0]} (guard pid {os.getpid()})")
        try:
            harness = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            _line(log, f"pager wake run: could not start {command[0]}: {exc}")
            return 127
        done, gone = threading.Event(), threading.Event()
        watcher = threading.Thread(
            target=_watch_broker, args=(args.watch, args.kill_after, done, gone), daemon=True
        )
        watcher.start()
        assert harness.stdout is not None
        _copy(harness.stdout, log, args.max_bytes)
        status = harness.wait()
        done.set()
        _line(log, f"pager wake run: {command[0]} ended with status {status}")
        if gone.is_set():
            _line(log, "pager wake run: the broker is gone; ending what is left of the run")
    if gone.is_set():  # nobody else will: whatever the harness left behind goes, and the guard
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return 128 - status if status < 0 else status


def _copy(source: IO[bytes], log: IO[bytes], limit: int) -> None:
    """The harness's output into the log, at most `limit` bytes; the rest is read and dropped
    (a full pipe would stop the harness)."""
    written = 0
    cut = False
    while chunk := os.read(source.fileno(), CHUNK):
        if written < limit:
            part = chunk[: limit - written]
            log.write(part)
            log.flush()
            written += len(part)
        if written >= limit and not cut:
            cut = True
            _line(log, f"\npager wake run: output cut at {limit} bytes")


def _watch_broker(fd: int, kill_after: float, done: threading.Event, gone: threading.Event) -> None:
    """Blocks until the broker's end of the pipe closes, then stops the whole group: SIGTERM,
    and SIGKILL if the harness has not ended `kill_after` seconds later."""
    with contextlib.suppress(OSError):
        while os.read(fd, 1):
            pass
    gone.set()
    group = os.getpgrp()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(group, signal.SIGTERM)
    if not done.wait(kill_after):
        os.killpg(group, signal.SIGKILL)  # the guard included


def _line(log: IO[bytes], text: str) -> None:
    log.write(f"{text}\n".encode())
    log.flush()


if __name__ == "__main__":
    sys.exit(main())
