"""`pager shell` as a person first meets it: with no program it opens their shell, it says who
it joined as (on stderr: a script's stdout stays the program's), and a send to a shell agent
says what a shell does with mail (it waits to be read), not that it has turns."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pager.implementations import discover
from tests.e2e.conftest import Broker
from tests.launch.conftest import PROCESS_BOUND

PAGER = [sys.executable, "-m", "pager"]


def _pager(
    broker: Broker, *args: str, stdin: str = "", **env: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*PAGER, *args],
        env={**broker.home.env, **env},
        cwd=broker.workspace,
        input=stdin,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def test_pager_shell_alone_opens_the_users_shell_and_says_who_joined(
    broker: Broker, tmp_path: Path
) -> None:
    shell = tmp_path / "my-shell"
    shell.write_text('#!/bin/sh\necho "my shell ran: $*"\npager whoami --json\n')
    shell.chmod(0o755)
    done = _pager(broker, "shell", "--session-name", "api", SHELL=str(shell))
    assert done.returncode == 0, done.stderr
    first, rest = done.stdout.split("\n", 1)
    assert first == "my shell ran: "  # the shell itself, with no arguments
    who = json.loads(rest)
    assert who["alias"] == "api"
    assert f"joined as {who['address']} — pager read to read mail" in done.stderr


def test_without_shell_set_it_is_bin_sh(broker: Broker) -> None:
    env = {key: value for key, value in broker.home.env.items() if key != "SHELL"}
    done = subprocess.run(
        [*PAGER, "shell", "--session-name", "api"],
        env=env,
        cwd=broker.workspace,
        input="pager whoami --json\n",  # /bin/sh reads its commands from standard input
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["alias"] == "api"


async def test_a_send_says_what_the_recipients_harness_does_with_queued_mail(
    broker: Broker, places: dict[str, Path]
) -> None:
    """Both recipients are attached and not reading, so the mail is queued for each; only the
    harness with turns (hooks) will be shown it at its next one."""
    await broker.register("sh", implementation="shell")
    await broker.register("cc", implementation="claude")
    to_shell = _pager(broker, "send", "sh", "hello")
    assert to_shell.returncode == 0, to_shell.stderr
    assert to_shell.stdout.rstrip().endswith("; it waits in its inbox: pager read")
    assert "next turn" not in to_shell.stdout
    to_claude = _pager(broker, "send", "cc", "hello")
    assert to_claude.stdout.rstrip().endswith("; its session will see it at its next turn")
    sent = json.loads(_pager(broker, "send", "sh", "again", "--json").stdout)
    assert sent["wake"] == "queued"
    assert sent["recipient"]["implementation"] == "shell"


HOOKED = ("claude", "cline", "codex", "copilot", "gemini", "kilo", "opencode", "pi", "qwen")
TURNS = {"shell": False, **dict.fromkeys(HOOKED, True)}


@pytest.mark.parametrize(("implementation", "at_turns"), TURNS.items())
def test_the_built_in_manifests_say_who_sees_mail_at_turns(
    implementation: str, at_turns: bool
) -> None:
    assert discover().get(implementation).manifest.sees_mail_at_turns is at_turns
