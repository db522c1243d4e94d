"""`pager serve`'s tree in process: a crashing child is restarted; too many crashes stop the
broker with a clear log line and a non-zero exit."""

from __future__ import annotations

import gc
import logging
import os
import signal
from pathlib import Path

import pytest
import trio

from pager.config import Config
from pager.launch.paths import StatePaths
from pager.launch.serve import GC_THRESHOLDS, serve_main, tune_gc
from supervisors import ChildSpec


def _crash_on_start(count: list[int], *, crashes: int) -> ChildSpec:
    """A child that raises on each of its first `crashes` runs, then asks for a shutdown."""

    async def start(*, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        task_status.started()
        count.append(1)
        if len(count) <= crashes:
            raise RuntimeError(f"injected fault #{len(count)}")
        os.kill(os.getpid(), signal.SIGTERM)  # the real shutdown path
        await trio.sleep_forever()

    return ChildSpec("faulty", start)


def _paths(tmp_path: Path) -> StatePaths:
    return StatePaths(tmp_path / "home")


def test_serve_restarts_crashed_child_and_stops_on_signal(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Two crashes are within the intensity: the broker restarts the child and keeps going."""
    runs: list[int] = []
    with caplog.at_level(logging.INFO):
        code = serve_main(
            _paths(tmp_path), Config(port=None), extra_children=[_crash_on_start(runs, crashes=2)]
        )
    assert code == 0
    assert len(runs) == 3
    assert "injected fault #1" in caplog.text
    assert "SIGTERM: shutting down" in caplog.text
    assert not (tmp_path / "home" / "broker.json").exists()


def test_serve_exits_nonzero_when_intensity_exceeded(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A child that keeps crashing makes the root give up: exit 1, one clear error line."""
    runs: list[int] = []
    code = serve_main(
        _paths(tmp_path), Config(port=None), extra_children=[_crash_on_start(runs, crashes=100)]
    )
    assert code == 1
    errors = [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR]
    assert any("broker stopped" in line and "gave up" in line for line in errors), errors
    assert "injected fault" in caplog.text
    assert not (tmp_path / "home" / "broker.json").exists()
    assert (tmp_path / "home" / "broker.lock").read_bytes() == b""  # released


def test_tune_gc_sets_the_broker_thresholds() -> None:
    before = gc.get_threshold()
    try:
        tune_gc()
        assert gc.get_threshold() == GC_THRESHOLDS
    finally:
        gc.set_threshold(*before)
