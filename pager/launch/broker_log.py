"""The broker's log: where `pager serve` writes, and what keeps it small. Stdlib-only.

A background broker (started by `pager start` or any command that needs one) writes
`logs/broker.log` through `CappedLogFile`: at LOG_FILE_CAP bytes the file becomes
`broker.log.1` (the older ones shift to `.2` …) and a new one starts, so at most
LOG_FILES_KEPT files of at most LOG_FILE_CAP bytes are ever kept, each private (0600). Every
record goes through `RepeatFilter` and `BoundedFormatter` (pager/launch/log_bounds.py), in the
foreground too: a request that fails the same way over and over costs one bounded traceback
a minute and a summary line, whatever the destination.

Output that does not go through `logging` must not get around the cap either:
- Before logging is set up (an import error, a crash on the first lines) there is nothing to
  rotate yet: the starter points the broker's stdout and stderr (file descriptors 1 and 2)
  at `broker.log` itself, so that error lands at its end, where `pager start` reads it.
- Once it is set up, Python's `sys.stdout` and `sys.stderr` become `LogStream`s: whatever
  is printed (a library's print, an uncaught exception in a thread, the final traceback of a
  crash) is written line by line through the same handler, capped and rate-limited.
- Descriptors 1 and 2 stay on the current `broker.log` (moved onto the new file at each
  rotation) for what only the C level writes: a fatal interpreter error or a faulthandler
  dump. Those end the process, so they are written once.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import sys
import threading
import time
from logging.handlers import RotatingFileHandler
from pathlib import Path

from pager.launch.log_bounds import LINE_CAP, REPEAT_WINDOW, BoundedFormatter, RepeatFilter

#: One log file is at most this many bytes (a record is never split across two files).
LOG_FILE_CAP = 10 * 1024 * 1024
#: `broker.log` and the rotated `broker.log.1` … `broker.log.3`: at most 40 MiB in all.
LOG_FILES_KEPT = 4

LOG_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"
_STD_FDS = (1, 2)


class _SummarizeOnClose(logging.Handler):
    """Writes what its RepeatFilter still holds before it closes (logging closes every
    handler as the process exits)."""

    def close(self) -> None:
        for repeats in self.filters:
            if isinstance(repeats, RepeatFilter):
                repeats.drain()
        super().close()


class _Stderr(_SummarizeOnClose, logging.StreamHandler):  # type: ignore[type-arg]
    """A broker in the foreground logs to its stderr."""


class CappedLogFile(_SummarizeOnClose, RotatingFileHandler):
    """A size-capped, rotated, private (0600) log file. With `hold_std_fds`, descriptors 1
    and 2 follow the current file across rotations (see the module's docstring)."""

    def __init__(
        self,
        path: Path,
        *,
        cap: int = LOG_FILE_CAP,
        kept: int = LOG_FILES_KEPT,
        hold_std_fds: bool = False,
    ) -> None:
        self._hold_std_fds = hold_std_fds
        self._quiet_until = 0.0  # handleError's own rate limit
        super().__init__(path, maxBytes=cap, backupCount=kept - 1, encoding="utf-8", delay=False)
        self._point_std_fds()

    def _open(self) -> io.TextIOWrapper:
        fd = os.open(self.baseFilename, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        os.fchmod(fd, 0o600)  # a file left by an older broker, or created by hand
        return open(fd, "a", encoding=self.encoding, errors="backslashreplace")

    def doRollover(self) -> None:
        super().doRollover()
        self._point_std_fds()

    def handleError(self, record: logging.LogRecord) -> None:
        """One clipped line on descriptor 2 a minute at most, not logging's traceback on
        `sys.stderr`: that is this handler again, which has just failed (a full disk, say)."""
        now = time.monotonic()
        if now < self._quiet_until:
            return
        self._quiet_until = now + REPEAT_WINDOW
        error = sys.exc_info()[1]
        line = f"pager: could not write a log record ({error!r}): {record.msg!r}"
        with contextlib.suppress(OSError):
            os.write(2, (line[:LINE_CAP] + "\n").encode(errors="backslashreplace"))

    def _point_std_fds(self) -> None:
        if self._hold_std_fds and self.stream is not None:
            for fd in _STD_FDS:
                os.dup2(self.stream.fileno(), fd)


class LogStream(io.TextIOBase):
    """`sys.stdout`/`sys.stderr` of a broker: each line written becomes a record of `logger`
    (its text is its template, so identical lines are rate-limited like any record). A line
    written while one of its own is being logged goes to the descriptor `fd` instead,
    clipped, so that it cannot loop."""

    def __init__(self, logger: logging.Logger, level: int, fd: int) -> None:
        super().__init__()
        self._logger = logger
        self._level = level
        self._fd = fd
        self._pending = ""
        self._pending_lock = threading.Lock()  # threads print too
        self._inside = threading.local()

    def writable(self) -> bool:
        return True

    def fileno(self) -> int:  # faulthandler and subprocesses write to the descriptor
        return self._fd

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        with self._pending_lock:
            lines = (self._pending + text).split("\n")
            self._pending = lines.pop()
            if len(self._pending) > LINE_CAP:  # no newline in sight: do not hold it forever
                lines.append(self._pending)
                self._pending = ""
        for line in lines:
            if line.strip():
                self._emit(line)
        return len(text)

    def flush(self) -> None:
        with self._pending_lock:
            line, self._pending = self._pending, ""
        if line.strip():
            self._emit(line)

    def _emit(self, line: str) -> None:
        if getattr(self._inside, "active", False):
            os.write(self._fd, (line[:LINE_CAP] + "\n").encode(errors="backslashreplace"))
            return
        self._inside.active = True
        try:
            self._logger.log(self._level, line)
        finally:
            self._inside.active = False


def configure_broker_logging(level: str, log_file: Path | None) -> None:
    """The broker process's logging: to `log_file` (capped and rotated, descriptors 1 and 2
    following it, `sys.stdout`/`sys.stderr` written through it) or, without one, to stderr
    (a broker in the foreground); bounded and rate-limited either way."""
    handler: logging.Handler
    if log_file is None:
        handler = _Stderr(sys.stderr)
    else:
        handler = CappedLogFile(log_file, hold_std_fds=True)
    install_bounds(handler)
    root = logging.getLogger()
    for old in root.handlers[:]:
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    logging.captureWarnings(True)  # warnings are records too
    if log_file is not None:
        sys.stdout = LogStream(logging.getLogger("pager.stdout"), logging.INFO, 1)
        sys.stderr = LogStream(logging.getLogger("pager.stderr"), logging.ERROR, 2)


def install_bounds(handler: logging.Handler) -> RepeatFilter:
    """Give `handler` the bounded format and the repeat filter (returned for tests)."""
    handler.setFormatter(BoundedFormatter(LOG_FORMAT))
    repeats = RepeatFilter(handler.handle)
    handler.addFilter(repeats)
    return repeats
