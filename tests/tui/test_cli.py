"""`pager` with no arguments: the TUI in a terminal (start or adopt the broker first), a clear
usage error without one; `pager --help` still prints the help."""

from __future__ import annotations

import os
import pty
import subprocess
import sys
import threading
import time
from pathlib import Path

from tests.launch.conftest import PROCESS_BOUND, PagerHome


def test_cli_without_a_terminal_exits_2_and_points_to_status(home: PagerHome) -> None:
    """Output to a pipe: exit status 2, a message naming `pager status`; no broker started."""
    result = home.run()
    assert result.returncode == 2
    assert "needs a terminal" in result.stderr
    assert "pager status" in result.stderr
    assert not (home.root / "broker.json").exists()


def test_cli_help_still_lists_the_commands(home: PagerHome) -> None:
    """`pager --help` is not swallowed by the TUI."""
    result = home.run("--help")
    assert result.returncode == 0
    assert "status" in result.stdout
    assert "restart" in result.stdout


def test_cli_in_a_terminal_starts_the_broker_opens_the_tui_and_quits_on_q(
    home: PagerHome, tmp_path: Path
) -> None:
    """In a pseudo-terminal: the broker is started, the TUI goes live, `q` exits with 0."""
    primary, secondary = pty.openpty()
    env = {**home.env, "TERM": "xterm-256color", "COLUMNS": "120", "LINES": "40"}
    process = subprocess.Popen(
        [sys.executable, "-m", "pager"],
        stdin=secondary,
        stdout=secondary,
        stderr=secondary,
        env=env,
        close_fds=True,
        start_new_session=True,
    )
    os.close(secondary)
    screen = bytearray()

    def drain() -> None:  # a full pty would block the app's writes
        while True:
            try:
                data = os.read(primary, 65536)
            except OSError:
                return
            if not data:
                return
            screen.extend(data)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    try:
        deadline = time.monotonic() + PROCESS_BOUND
        while b"live" not in screen:
            assert process.poll() is None, bytes(screen[-2000:])
            assert time.monotonic() < deadline, "the TUI never showed `live`"
            time.sleep(0.05)
        assert (home.root / "broker.json").exists()
        os.write(primary, b"q")
        assert process.wait(timeout=PROCESS_BOUND) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        os.close(primary)
        reader.join(timeout=5)
