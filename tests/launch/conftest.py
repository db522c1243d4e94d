"""Real `pager` processes against a private PAGER_HOME; every broker is stopped afterwards."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TypeVar

import pytest

from pager.launch.lock import holder_alive

T = TypeVar("T")

#: A hang guard for waits on real processes, not a timing assertion.
PROCESS_BOUND = 60.0


class PagerHome:
    """A state directory and helpers to run the CLI against it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.env = {key: value for key, value in os.environ.items() if not key.startswith("PAGER_")}
        self.env["PAGER_HOME"] = str(root)

    def run(self, *args: str, timeout: float = PROCESS_BOUND) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pager", *args],
            env=self.env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def popen(self, *args: str, **kwargs: object) -> subprocess.Popen[str]:
        return subprocess.Popen(  # type: ignore[call-overload, no-any-return]
            [sys.executable, "-m", "pager", *args],
            env=self.env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            **kwargs,
        )

    def status(self) -> dict[str, object]:
        result = self.run("status", "--json")
        report: dict[str, object] = json.loads(result.stdout)
        return report

    def broker_pids(self) -> list[int]:
        """Every live `pager serve` process whose PAGER_HOME is this one (via /proc)."""
        found = []
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                cmdline = (entry / "cmdline").read_bytes().split(b"\0")
                environ = (entry / "environ").read_bytes().split(b"\0")
                state = (entry / "stat").read_text().split(")")[-1].split()[0]
            except OSError:
                continue
            if state == "Z" or b"serve" not in cmdline or b"pager" not in cmdline:
                continue
            if f"PAGER_HOME={self.root}".encode() in environ:
                found.append(int(entry.name))
        return sorted(found)

    def kill_all(self) -> None:
        for pid in self.broker_pids():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        wait_for(lambda: not self.broker_pids(), "brokers to die")
        # A killed process shows as a zombie before its last threads let go of its files.
        wait_for(lambda: not holder_alive(self.root / "broker.lock"), "the broker lock to be freed")


def wait_for(predicate: Callable[[], T], what: str, bound: float = PROCESS_BOUND) -> T:
    """Poll `predicate` until it answers something true, and return that; fail (never pass)
    after the hang guard."""
    deadline = time.monotonic() + bound
    while time.monotonic() < deadline:
        if found := predicate():
            return found
        time.sleep(0.02)  # paces the polling of observable state
    pytest.fail(f"timed out waiting for {what}")


@pytest.fixture
def home(tmp_path: Path) -> Iterator[PagerHome]:
    pager_home = PagerHome(tmp_path / "home")
    yield pager_home
    pager_home.kill_all()
