"""`pager send` as a script or an agent's shell runs it, against a real broker: it imports only
what a send needs (checked as a set of modules, never a time), and the checkout's quick start
(scripts/pager, Python without `site`) sends to every kind of recipient."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.e2e.conftest import Broker
from tests.launch.conftest import PROCESS_BOUND

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "pager"
#: What a plain send must not load: the argument parser (and the gettext, locale, shutil,
#: bz2 and lzma it pulls in), typing, and the idna codec a str host costs getaddrinfo.
NOT_FOR_A_SEND = {"argparse", "gettext", "locale", "shutil", "typing", "encodings.idna"}


def _loaded(argv: list[str], env: dict[str, str], cwd: Path) -> tuple[str, set[str]]:
    """Run `argv` with Python's import report on: its stdout and the modules it loaded."""
    done = subprocess.run(
        argv,
        env={**env, "PYTHONPROFILEIMPORTTIME": "1"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    names = {
        line.rsplit("|", 1)[1].strip()
        for line in done.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return done.stdout, names


def _script(args: list[str], env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    """scripts/pager ARGS: the checkout's quick start."""
    return subprocess.run(
        [str(SCRIPT), *args],
        env=env,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


@pytest.mark.parametrize("options", [[], ["--json"], ["--thread", "t1", "--key", "k1"]])
async def test_a_plain_send_loads_no_parser_typing_or_idna(
    broker: Broker, options: list[str]
) -> None:
    sender = await broker.register("me")
    await broker.register("api")
    env = {**broker.home.env, "PAGER_TOKEN": sender["token"]}
    argv = [sys.executable, "-m", "pager", "send", "api", "hello", *options]
    out, names = _loaded(argv, env, broker.workspace)
    assert "sent" in out or '"message_id"' in out
    assert names & NOT_FOR_A_SEND == set()


@pytest.mark.skipif(not (ROOT / ".venv" / "bin" / "python").exists(), reason="no .venv")
async def test_the_quick_script_sends_to_a_shell_agent_whose_mail_is_queued(
    broker: Broker,
) -> None:
    """The recipient is attached and not reading: the reply names what a shell does with
    queued mail, which reads the manifests (attrs, in site-packages, which the script's
    `python -S` leaves out until a command needs it)."""
    sender = await broker.register("me")
    await broker.register("sh", implementation="shell")
    done = _script(
        ["send", "sh", "hello"],
        {**broker.home.env, "PAGER_TOKEN": sender["token"]},
        broker.workspace,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.rstrip().endswith("; it waits in its inbox: pager read")
