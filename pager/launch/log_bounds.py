"""What one log record may cost: a bounded size, and one appearance per minute when it repeats.

A request that fails the same way every time (a poisoned message, a hostile body) must not
turn each attempt into a traceback on disk: `BoundedFormatter` cuts a record to a few KB (the
first and last lines of a long traceback, such as a RecursionError's thousand frames), and
`RepeatFilter` lets the first of a run of identical records through, with its traceback, then
counts the repeats and writes one summary line for them. Stdlib-only.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from types import TracebackType

#: A record's message, or one line of its traceback, is clipped to this many characters.
LINE_CAP = 1000
#: A traceback keeps its first and last lines (where it started; what was raised, and where).
TRACEBACK_HEAD_LINES = 20
TRACEBACK_TAIL_LINES = 40
#: No record's traceback is longer than this, whatever its lines.
TRACEBACK_CAP = 16 * 1024
#: A record identical to one logged less than this long ago is counted, not written.
REPEAT_WINDOW = 60.0
#: Records told apart at once; past this, new ones are grouped by the line that logged them.
REPEAT_KEYS = 1024


def clip(text: str, cap: int = LINE_CAP) -> str:
    if len(text) <= cap:
        return text
    return f"{text[:cap]}… ({len(text) - cap} more characters)"


def bound_traceback(text: str) -> str:
    """`text` (a formatted traceback) with its long lines clipped, and its middle left out
    past TRACEBACK_HEAD_LINES + TRACEBACK_TAIL_LINES lines or TRACEBACK_CAP characters."""
    lines = [clip(line) for line in text.splitlines()]
    if len(lines) > TRACEBACK_HEAD_LINES + TRACEBACK_TAIL_LINES:
        omitted = len(lines) - TRACEBACK_HEAD_LINES - TRACEBACK_TAIL_LINES
        lines = [
            *lines[:TRACEBACK_HEAD_LINES],
            f"  … {omitted} lines of this traceback left out …",
            *lines[-TRACEBACK_TAIL_LINES:],
        ]
    bounded = "\n".join(lines)
    if len(bounded) > TRACEBACK_CAP:
        head, tail = TRACEBACK_CAP // 3, TRACEBACK_CAP - TRACEBACK_CAP // 3
        omitted = len(bounded) - head - tail
        bounded = f"{bounded[:head]}\n  … {omitted} characters left out …\n{bounded[-tail:]}"
    return bounded


class BoundedFormatter(logging.Formatter):
    """A formatter whose output for one record is at most a few KB."""

    def format(self, record: logging.LogRecord) -> str:
        if record.exc_text:  # formatted (in full) by another handler first
            record.exc_text = bound_traceback(record.exc_text)
        return super().format(record)

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = clip(record.message)
        return super().formatMessage(record)

    def formatException(self, ei: _ExcInfo) -> str:
        return bound_traceback(super().formatException(ei))

    def formatStack(self, stack_info: str) -> str:
        return bound_traceback(stack_info)


_ExcInfo = tuple[type[BaseException], BaseException, TracebackType | None] | tuple[None, None, None]
_Key = tuple[object, ...]


class _Run:
    """A record first let through at `since`, and how many like it were held back since."""

    __slots__ = ("first", "repeats", "since")

    def __init__(self, first: logging.LogRecord, since: float) -> None:
        self.first = first
        self.since = since
        self.repeats = 0


class RepeatFilter(logging.Filter):
    """Let a record through unless one like it (same logger, level, logging line, message
    template, and exception type with the place it was raised) went through less than
    `window` seconds ago; those are counted, and once the window has passed one summary
    record says how many there were ("… repeated N more times within 60 s"). The summary is
    handed to `summarize` (the handler's `handle`) with the next record that arrives after
    the window, or by `drain()` when the handler closes. DEBUG records pass untouched: whoever asked
    for them asked for everything. `clock` is injectable for tests."""

    def __init__(
        self,
        summarize: Callable[[logging.LogRecord], object],
        *,
        window: float = REPEAT_WINDOW,
        clock: Callable[[], float] = time.monotonic,
        max_keys: int = REPEAT_KEYS,
    ) -> None:
        super().__init__()
        self._summarize = summarize
        self._window = window
        self._clock = clock
        self._max_keys = max_keys
        self._runs: dict[_Key, _Run] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno < logging.INFO or getattr(record, "pager_summary", False):
            return True
        with self._lock:
            now = self._clock()
            due = self._ended(now)
            key = _key(record)
            if key not in self._runs and len(self._runs) >= self._max_keys:
                key = _site(record)  # too many kinds at once: one run per logging line
            run = self._runs.get(key)
            if run is None:
                self._runs[key] = _Run(record, now)
            else:
                run.repeats += 1
        for summary in due:
            self._summarize(summary)
        return run is None

    def drain(self) -> None:
        """Write the summaries of every run still open (at shutdown)."""
        with self._lock:
            due = self._ended(float("inf"))
        for summary in due:
            self._summarize(summary)

    def _ended(self, now: float) -> list[logging.LogRecord]:
        ended = [key for key, run in self._runs.items() if now - run.since >= self._window]
        summaries = []
        for key in ended:
            run = self._runs.pop(key)
            if run.repeats:
                summaries.append(self._summary(run))
        return summaries

    def _summary(self, run: _Run) -> logging.LogRecord:
        first = run.first
        exc = first.exc_info[1] if first.exc_info else None
        what = f" ({type(exc).__name__})" if exc is not None else ""
        summary = logging.LogRecord(
            first.name,
            first.levelno,
            first.pathname,
            first.lineno,
            '"%s"%s repeated %d more times within %g s; shown once',
            (clip(first.getMessage(), 200), what, run.repeats, self._window),
            None,
        )
        summary.pager_summary = True  # let through as it is
        return summary


def _site(record: logging.LogRecord) -> _Key:
    return (record.name, record.levelno, record.pathname, record.lineno)


def _key(record: logging.LogRecord) -> _Key:
    template = record.msg if isinstance(record.msg, str) else type(record.msg).__name__
    raised: tuple[object, ...] = ()
    if record.exc_info and record.exc_info[1] is not None:
        exc = record.exc_info[1]
        tb = exc.__traceback__
        while tb is not None and tb.tb_next is not None:
            tb = tb.tb_next
        where = (tb.tb_frame.f_code.co_filename, tb.tb_lineno) if tb is not None else ()
        raised = (type(exc), *where)
    return (*_site(record), template[:500], *raised)
