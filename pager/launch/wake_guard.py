"""The guard of one wake run (docs/wake.md): `python -m pager.launch.wake_guard --watch FD
--log PATH --max-bytes N -- COMMAND…`, started by the broker in a process group of its own.

It runs COMMAND (the harness) in that group with standard input closed, copies its output into
the log up to N bytes (then notes the cut and drains the rest), and exits with its status once
every process of the run is gone. On Linux it is a child subreaper (pager/launch/descendants.py):
whatever the harness started, even in a session of its own or after a double fork, stays its
descendant, and when the harness ends it kills and reaps them all. Elsewhere the run's group is
all it can reach.

The run is stopped by SIGTERM to the group: the broker sends it (timeout, a person attaching,
the broker stopping), and so does the guard itself when its broker is gone. FD is the read end
of a pipe whose write end only the broker holds: when the broker dies, however it dies (SIGKILL
included), the kernel closes it and the guard reads end-of-file. The guard survives the SIGTERM
and gives the harness `--kill-after` seconds, then SIGKILLs it and everything it started, and
writes the harness's end into the log. Standard library only: it starts per run.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from typing import IO

from pager.launch.descendants import become_subreaper, end_descendants, kill_descendants

#: After SIGTERM, how long the harness has before SIGKILL.
KILL_AFTER = 5.0
CHUNK = 64 * 1024
#: Once the run's processes are gone, how long the rest of their output may take to copy
#: (off Linux a process left in the group may hold the pipe until the broker kills it).
DRAIN = 1.0


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
    stopping, done, gone = threading.Event(), threading.Event(), threading.Event()
    # A handler, not SIG_IGN: ignored signals stay ignored across exec, handlers do not.
    signal.signal(signal.SIGTERM, lambda _signum, _frame: stopping.set())
    adopts = become_subreaper()  # before the harness starts: nothing it starts escapes
    fd = os.open(args.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    with os.fdopen(fd, "ab") as file:
        log = _Log(file)
        log.line(f"pager wake run: {command[0]} (guard pid {os.getpid()})")
        try:
            harness = subprocess.Popen(
                command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
            )
        except OSError as exc:
            log.line(f"pager wake run: could not start {command[0]}: {exc}")
            return 127
        assert harness.stdout is not None
        # The output is copied aside: a helper the harness left may hold the pipe open after it
        # exits, and the guard must go on to end it.
        copier = _thread(_copy, harness.stdout, log, args.max_bytes)
        _thread(_watch_broker, args.watch, stopping, gone)
        _thread(_stop_when_asked, stopping, done, args.kill_after, harness, adopts)
        status = harness.wait()
        done.set()
        if adopts:  # the rest of the run: the group, and whatever left it
            end_descendants()
        copier.join(DRAIN)  # its pipe closed with the last process of the run that held it
        log.line(f"pager wake run: {command[0]} ended with status {status}")
        if gone.is_set():
            log.line("pager wake run: the broker is gone; the run was stopped with it")
        log.close()
    if gone.is_set() and not adopts:  # nobody else will: what is left of the group, the guard too
        os.killpg(os.getpgrp(), signal.SIGKILL)
    return 128 - status if status < 0 else status


class _Log:
    """The run's log, written by the copier and the guard's own lines, one writer at a time;
    once closed, the copier's late output is dropped."""

    def __init__(self, file: IO[bytes]) -> None:
        self._file = file
        self._lock = threading.Lock()
        self._closed = False

    def write(self, data: bytes) -> None:
        with self._lock:
            if not self._closed:
                self._file.write(data)
                self._file.flush()

    def line(self, text: str) -> None:
        self.write(f"{text}\n".encode())

    def close(self) -> None:
        with self._lock:
            self._closed = True


def _thread(target: Callable[..., None], *args: object) -> threading.Thread:
    """A daemon thread running `target`, with SIGTERM blocked in it: the kernel hands the
    signal to the main thread, whose handler marks the run as stopping even while it waits."""

    def run() -> None:
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM})
        target(*args)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread


def _copy(source: IO[bytes], log: _Log, limit: int) -> None:
    """The harness's output into the log, at most `limit` bytes; the rest is read and dropped
    (a full pipe would stop the harness)."""
    written = 0
    cut = False
    while chunk := os.read(source.fileno(), CHUNK):
        if written < limit:
            part = chunk[: limit - written]
            log.write(part)
            written += len(part)
        if written >= limit and not cut:
            cut = True
            log.line(f"\npager wake run: output cut at {limit} bytes")


def _watch_broker(fd: int, stopping: threading.Event, gone: threading.Event) -> None:
    """Blocks until the broker's end of the pipe closes, then stops the run as the broker
    would have: SIGTERM to the group, and the grace starts."""
    with contextlib.suppress(OSError):
        while os.read(fd, 1):
            pass
    gone.set()
    stopping.set()
    with contextlib.suppress(ProcessLookupError):
        os.killpg(os.getpgrp(), signal.SIGTERM)


def _stop_when_asked(
    stopping: threading.Event,
    done: threading.Event,
    kill_after: float,
    harness: subprocess.Popen[bytes],
    adopts: bool,
) -> None:
    """Once the run is asked to stop (SIGTERM), give the harness `kill_after` seconds, then
    SIGKILL it and, when the guard adopts, everything it started (the guard waits for the
    harness and reaps the rest)."""
    stopping.wait()
    if done.wait(kill_after):
        return
    if adopts:
        kill_descendants()
    else:
        with contextlib.suppress(ProcessLookupError):
            harness.kill()


if __name__ == "__main__":
    sys.exit(main())
