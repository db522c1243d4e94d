"""Whatever Pager launches or writes for a host reaches this Pager as `pager`, even where PATH
finds another `pager` first (Debian's /usr/bin/pager is `less`). A FAKE `pager` that prints
WRONG PAGER plays that other one."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pager.install.command import pager_argv
from pager.launch import own_pager
from pager.launch.wrapper import LaunchSpec, harness_command, hook_command
from pager.versions import VERSION
from tests.launch.conftest import PROCESS_BOUND


def wrong_pager(directory: Path) -> Path:
    """A bin directory whose `pager` is not Pager: it prints WRONG PAGER and fails."""
    bin_dir = directory / "wrong-bin"
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / "pager"
    script.write_text("#!/bin/sh\necho WRONG PAGER\nexit 1\n")
    script.chmod(0o755)
    return bin_dir


def _values(tmp_path: Path) -> dict[str, str]:
    return {
        "url": "http://127.0.0.1:9",
        "token": "relay-credential",
        "token_file": str(tmp_path / "session-token"),
        "agent_id": "agt_x",
        "address": "x@ws",
    }


def test_a_wrapped_launch_finds_this_pager_first_on_its_path(tmp_path: Path) -> None:
    """The harness's environment (what its shell tool runs) finds this Pager as `pager`, with
    the user's PATH after it, and nothing else of Pager's environment (no `python`) before."""
    wrong = wrong_pager(tmp_path)
    directory = tmp_path / "launch"
    directory.mkdir()
    spec = LaunchSpec(implementation="x", executable="sh")
    environ = {"PATH": f"{wrong}:/usr/bin:/bin", "HOME": str(tmp_path)}
    command = harness_command(spec, "/bin/sh", (), _values(tmp_path), str(directory), environ)
    done = subprocess.run(
        ["sh", "-c", "pager --version"],
        env=dict(command.env),
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )
    assert done.stdout.strip() == f"pager {VERSION}", (done.stdout, done.stderr)
    first, rest = command.env["PATH"].split(os.pathsep, 1)
    assert rest == environ["PATH"]
    assert os.listdir(first) == ["pager"]


def test_writing_the_wrapped_path_twice_adds_the_directory_once(tmp_path: Path) -> None:
    once = own_pager.with_own_pager({"PATH": "/usr/bin"}, str(tmp_path))
    assert own_pager.with_own_pager(once, str(tmp_path)) == once


def test_a_pager_beside_the_interpreter_that_is_not_pager_is_never_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Pager run by /usr/bin/python3 (a `pip install --user`): /usr/bin/pager beside it is
    `less`. Hooks and MCP commands written for hosts, and the launches' `pager`, name this
    Pager (here: the interpreter with `-m pager`), never that file."""
    wrong = wrong_pager(tmp_path)
    python = wrong / "python3"
    python.symlink_to(sys.executable)
    monkeypatch.setattr(sys, "executable", str(python))
    monkeypatch.setattr("sysconfig.get_path", lambda *args, **kwargs: str(tmp_path / "none"))
    assert pager_argv({}) == (str(python), "-m", "pager")
    assert shlex.split(hook_command("claude"))[:3] == [str(python), "-m", "pager"]
    assert own_pager.console_script() is None


def test_this_venvs_console_script_is_found_and_named_absolutely() -> None:
    """In a venv (a wheel or an editable install), the console script beside the interpreter."""
    script = Path(sys.executable).parent / "pager"
    assert own_pager.console_script() == script
    assert pager_argv({}) == (str(script),)
    assert shlex.split(hook_command("claude")) == [str(script), "hook", "--implementation",
                                                   "claude"]  # fmt: skip
