"""The broker's log stays small: a capped, rotated, private file; identical records counted,
not repeated; a traceback of bounded size, however deep the stack that raised it."""

from __future__ import annotations

import logging
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from pager.launch.broker_log import CappedLogFile, LogStream, install_bounds
from pager.launch.lifecycle import _log_tail
from pager.launch.log_bounds import TRACEBACK_CAP, BoundedFormatter, RepeatFilter
from tests.launch.conftest import PROCESS_BOUND


class Collect(logging.Handler):
    """Keeps every record it is handed, formatted by the bounded formatter."""

    def __init__(self) -> None:
        super().__init__()
        self.setFormatter(BoundedFormatter("%(levelname)s %(name)s: %(message)s"))
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(self.format(record))


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def logger() -> Iterator[logging.Logger]:
    """A logger of its own, outside logging's tree: only the test's handlers see it."""
    log = logging.Logger("pager.test")
    yield log
    for handler in log.handlers[:]:
        log.removeHandler(handler)
        handler.close()


def fail(depth: int = 0) -> None:
    """Raises the same error from the same place each time."""
    if depth:
        fail(depth - 1)
    raise ValueError("poisoned")


def log_failure(log: logging.Logger) -> None:
    try:
        fail()
    except ValueError:
        log.exception("GET %s failed", "/v1/me/inbox")


def test_rotation_keeps_at_most_the_files_kept_each_under_the_cap(tmp_path: Path) -> None:
    """Writing ten times the cap leaves broker.log, .1 and .2 (3 kept), each ≤ the cap, 0600."""
    log = logging.getLogger("pager.test-rotation")
    log.propagate = False
    path = tmp_path / "broker.log"
    handler = CappedLogFile(path, cap=4096, kept=3)
    log.addHandler(handler)
    try:
        for number in range(400):  # ~100 bytes each: 40 KB in all
            log.warning("record %04d %s", number, "x" * 80)
    finally:
        log.removeHandler(handler)
        handler.close()
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["broker.log", "broker.log.1", "broker.log.2"]
    for name in files:
        info = (tmp_path / name).stat()
        assert 0 < info.st_size <= 4096
        assert stat.S_IMODE(info.st_mode) == 0o600
    assert "record 0399" in path.read_text()  # the newest is in broker.log


def test_rotation_makes_an_existing_log_private(tmp_path: Path) -> None:
    path = tmp_path / "broker.log"
    path.write_text("an older broker's line\n")
    path.chmod(0o644)
    CappedLogFile(path).close()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_a_record_that_cannot_be_written_is_reported_once_a_minute(
    logger: logging.Logger, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    """A log call that fails (here: its arguments do not fit its template) on every request
    is reported on descriptor 2 once, not once a request: that descriptor is the log file."""
    handler = CappedLogFile(tmp_path / "broker.log")
    logger.addHandler(handler)
    for _ in range(100):
        logger.error("%d messages", "not a number")
    [line] = capfd.readouterr().err.splitlines()
    assert line.startswith("pager: could not write a log record (TypeError(")


def test_repeats_are_counted_then_summarized_once(logger: logging.Logger) -> None:
    """200 identical failures within the window: the first with its traceback, then nothing;
    the next record after the window brings one summary line with the count."""
    clock, seen = Clock(), Collect()
    repeats = RepeatFilter(seen.handle, window=60.0, clock=clock)
    seen.addFilter(repeats)
    logger.addHandler(seen)
    for _ in range(200):
        log_failure(logger)
        clock.now += 0.1  # 20 s in all: inside the window
    assert len(seen.lines) == 1
    assert seen.lines[0].startswith("ERROR")
    assert "Traceback" in seen.lines[0]
    clock.now += 60
    logger.info("an unrelated record")
    assert len(seen.lines) == 3
    assert "repeated 199 more times within 60 s" in seen.lines[1]
    assert '"GET /v1/me/inbox failed" (ValueError)' in seen.lines[1]
    assert seen.lines[2].endswith("an unrelated record")
    log_failure(logger)  # a new window: shown again, with its traceback
    assert len(seen.lines) == 4
    assert "Traceback" in seen.lines[3]


def test_different_failures_are_not_folded_together(logger: logging.Logger) -> None:
    """Another exception type, another message template, another logger: each shown."""
    clock, seen = Clock(), Collect()
    seen.addFilter(RepeatFilter(seen.handle, clock=clock))
    logger.addHandler(seen)
    log_failure(logger)
    try:
        raise KeyError("other")
    except KeyError:
        logger.exception("GET %s failed", "/v1/me/inbox")
    for tool in ("fetch", "send"):  # the same template and line: the second is a repeat
        logger.error("tool %s failed", tool)
    for _ in range(2):  # DEBUG is never folded
        logger.debug("debug %d", 1)
    assert len(seen.lines) == 5


def test_open_runs_are_summarized_when_the_log_closes(
    logger: logging.Logger, tmp_path: Path
) -> None:
    """A broker that stops within the window still says how many repeats it held back."""
    path = tmp_path / "broker.log"
    handler = CappedLogFile(path)
    install_bounds(handler)
    logger.addHandler(handler)
    for _ in range(3):
        logger.warning("the same warning")
    logger.removeHandler(handler)
    handler.close()  # what logging does to every handler as the process exits
    lines = path.read_text().splitlines()
    assert len(lines) == 2
    assert lines[1].endswith('"the same warning" repeated 2 more times within 60 s; shown once')


def test_too_many_kinds_at_once_are_folded_by_the_line_that_logs_them(
    logger: logging.Logger,
) -> None:
    """A message built anew each time (an f-string) cannot defeat the filter: past the keys
    it tells apart, records are grouped by their logging line."""
    clock, seen = Clock(), Collect()
    seen.addFilter(RepeatFilter(seen.handle, clock=clock, max_keys=10))
    logger.addHandler(seen)
    for number in range(500):
        logger.error(f"failure {number}")
    assert len(seen.lines) == 11


def test_a_recursion_error_costs_one_bounded_traceback(logger: logging.Logger) -> None:
    """A RecursionError's traceback (hundreds of KB in full) is kept to its first and last
    lines, under TRACEBACK_CAP."""
    seen = Collect()
    logger.addHandler(seen)

    def ping(depth: int) -> int:  # alternating frames: Python cannot fold them up
        return pong(depth + 1) + 1

    def pong(depth: int) -> int:
        return ping(depth + 1) + 1

    try:
        ping(0)
    except RecursionError:
        logger.exception("GET /v1/me/inbox failed")
    [line] = seen.lines
    assert len(line) < TRACEBACK_CAP + 1024
    assert "lines of this traceback left out" in line
    assert line.splitlines()[-1].startswith("RecursionError: maximum recursion depth")


def test_a_huge_message_is_clipped(logger: logging.Logger) -> None:
    seen = Collect()
    logger.addHandler(seen)
    logger.error("bad value: %r", "x" * 1_000_000)
    assert len(seen.lines[0]) < 2000
    assert "more characters" in seen.lines[0]


def test_printed_lines_go_through_the_handler_rate_limited(logger: logging.Logger) -> None:
    """What a broker prints (sys.stdout/sys.stderr) becomes records, filtered like any."""
    seen = Collect()
    install_bounds(seen)
    logger.addHandler(seen)
    stream = LogStream(logger, logging.ERROR, 2)
    for _ in range(100):
        stream.write("Traceback (most recent call last):\n  spam\n")
    stream.write("no newline yet")
    assert len(seen.lines) == 2
    stream.flush()
    assert seen.lines[-1].endswith("no newline yet")


def test_the_start_error_is_read_from_a_log_rotated_meanwhile(tmp_path: Path) -> None:
    """The starter noted the log's size before the broker ran; the broker rotated it: its
    error is still what the starter shows."""
    log = tmp_path / "broker.log"
    log.write_text("the only line of the new file\n")
    assert _log_tail(log, start=10_000_000) == "the only line of the new file"


BROKER_LIKE = """
import logging, os, sys
from pathlib import Path
from pager.launch.broker_log import configure_broker_logging

configure_broker_logging("info", Path(sys.argv[1]))
logging.getLogger().handlers[0].maxBytes = 4000  # the real set-up, with a smaller cap
for number in range(100):  # each its own message: none is a repeat
    logging.getLogger("pager.test").warning(f"record {number:03d} " + "y" * 60)
print("printed by a library")
os.write(2, b"written on descriptor 2 by C code\\n")
raise RuntimeError("a crash at the end")
"""


def test_a_broker_s_prints_and_crash_stay_inside_the_rotated_log(tmp_path: Path) -> None:
    """In a process set up as `pager serve --log-file` is: what it prints and its final
    traceback go through the capped handler; descriptor 2 follows the current file across
    rotations, so nothing lands in a file that was rotated away."""
    log = tmp_path / "broker.log"
    done = subprocess.run(
        [sys.executable, "-c", BROKER_LIKE, str(log)],
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
        cwd=tmp_path,
    )
    assert done.returncode == 1
    assert done.stdout == done.stderr == ""
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["broker.log", "broker.log.1", "broker.log.2", "broker.log.3"]
    assert all((tmp_path / name).stat().st_size <= 4000 for name in files[1:])
    # Oldest first: the write on descriptor 2 sits between the records around it, in a
    # file still kept (the first file, which descriptor 2 was opened on, is gone by now).
    text = "".join((tmp_path / name).read_text() for name in reversed(files))
    printed = text.index("pager.stdout: printed by a library")
    written = text.index("written on descriptor 2 by C code")
    crashed = text.index("pager.stderr: RuntimeError: a crash at the end")
    assert printed < written < crashed
    assert "pager.stderr: Traceback (most recent call last):" in text
