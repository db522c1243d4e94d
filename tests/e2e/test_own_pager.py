"""`pager shell` and wake runs find this Pager as `pager` although a FAKE `pager` (it prints
WRONG PAGER, as Debian's /usr/bin/pager, a link to `less`, would misbehave) comes first on the
PATH Pager was started with."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from tests.e2e.conftest import Broker, start_broker
from tests.e2e.test_wake import WAKE_WINDOWS, pager, runs_ended
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for
from tests.launch.test_own_pager import wrong_pager

#: The venv's console script, as a person runs it (`…/.venv/bin/pager`).
CONSOLE_SCRIPT = str(Path(sys.executable).parent / "pager")


def _shell(broker: Broker, path: str, *program: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [CONSOLE_SCRIPT, "shell", "--session-name", "x", "--", *program],
        env={**broker.home.env, "PATH": path},
        cwd=broker.workspace,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def test_pager_inside_pager_shell_is_this_pager(broker: Broker, tmp_path: Path) -> None:
    path = f"{wrong_pager(tmp_path)}:/usr/bin:/bin"
    done = _shell(broker, path, "sh", "-c", "pager whoami --json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert "WRONG PAGER" not in done.stdout
    assert json.loads(done.stdout)["alias"] == "x"


def test_pager_as_the_shells_program_is_this_pager(broker: Broker, tmp_path: Path) -> None:
    """`pager shell -- pager whoami`: the program itself is looked up on the launch's PATH."""
    done = _shell(broker, f"{wrong_pager(tmp_path)}:/usr/bin:/bin", "pager", "whoami", "--json")
    assert done.returncode == 0, (done.stdout, done.stderr)
    assert json.loads(done.stdout)["alias"] == "x"


def test_a_wake_runs_pager_is_this_pager(tmp_path: Path) -> None:
    """The broker was started with the FAKE `pager` first on its PATH; the run's command
    calls `pager whoami`, which must act as the woken identity."""
    home = PagerHome(tmp_path / "home")
    path = f"{wrong_pager(tmp_path)}:{os.environ['PATH']}"
    broker = start_broker(home, tmp_path / "repo", PATH=path, **WAKE_WINDOWS)
    try:
        out = tmp_path / "whoami.out"
        pager(broker, "shell", "--session-name", "bot", "--", "true")  # the identity, detached
        pager(broker, "wake", "on", "bot", "--command", f"sh -c 'pager whoami --json > {out}'")
        pager(broker, "send", "bot", "wake up")
        (ended,) = wait_for(runs_ended(broker, 1), "the run to end")
        assert ended["data"]["exit_code"] == 0, ended
        assert json.loads(out.read_text())["alias"] == "bot"
    finally:
        home.kill_all()
