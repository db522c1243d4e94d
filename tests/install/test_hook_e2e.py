"""The hook command written into the Claude Code plugin, run against a real broker."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pager.cli import main
from tests.install.conftest import Env

BOUND = 60.0  # a hang guard, not a timing assertion


@pytest.fixture
def broker(env: Env, monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, str]]:
    """A broker in a private PAGER_HOME; stopped afterwards."""
    pager_home = env.root / "pager-home"
    monkeypatch.setenv("PAGER_HOME", str(pager_home))
    process_env = {**os.environ, "PAGER_HOME": str(pager_home)}
    started = subprocess.run(
        [sys.executable, "-m", "pager", "start", "--json"],
        env=process_env,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=True,
    )
    try:
        yield {
            "url": json.loads(started.stdout)["url"],
            "secret": (pager_home / "secret").read_text().strip(),
        }
    finally:
        subprocess.run(
            [sys.executable, "-m", "pager", "exit"],
            env=process_env,
            capture_output=True,
            timeout=BOUND,
            check=False,
        )


def _post(url: str, token: str, body: dict[str, Any]) -> Any:
    request = urllib.request.Request(
        url,
        data=json.dumps(body).encode(),
        headers={
            "Authorization": f"Bearer {token}",
            "Content-Type": "application/json",
            "Accept": "application/json, text/event-stream",
        },
    )
    with urllib.request.urlopen(request, timeout=BOUND) as response:
        return json.loads(response.read())


def _run_hook(command: str, payload: dict[str, Any]) -> str:
    result = subprocess.run(
        ["/bin/sh", "-c", command],  # as Claude Code runs it
        input=json.dumps(payload),
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert result.returncode == 0
    return result.stdout


def test_the_plugins_hook_command_injects_waiting_mail(
    env: Env, broker: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plugin", "install", "claude"]) == 0
    capsys.readouterr()
    hooks_file = env.home / ".claude/plugins/pager/plugins/pager/hooks/hooks.json"
    hooks = json.loads(Path(hooks_file).read_text())["hooks"]
    command = hooks["UserPromptSubmit"][0]["hooks"][0]["command"]

    register = f"{broker['url']}/v1/register"
    workspace = str(env.root)
    _post(
        register,
        broker["secret"],
        {
            "workspace": workspace,
            "implementation": "claude",
            "session_name": "bob",
            "conversation_key": "conversation-1",
        },
    )
    alice = _post(
        register,
        broker["secret"],
        {"workspace": workspace, "implementation": "shell", "session_name": "alice"},
    )
    sent = _post(
        f"{broker['url']}/mcp",
        alice["token"],
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "send", "arguments": {"to": "bob", "body": "hello from alice"}},
        },
    )
    assert not sent["result"]["isError"]

    payload = {
        "session_id": "conversation-1",
        "cwd": workspace,
        "hook_event_name": "UserPromptSubmit",
        "prompt": "hi",
    }
    output = json.loads(_run_hook(command, payload))
    injected = output["hookSpecificOutput"]
    assert injected["hookEventName"] == "UserPromptSubmit"
    assert "hello from alice" in injected["additionalContext"]
    assert _run_hook(command, payload) == ""  # acknowledged: not offered again
