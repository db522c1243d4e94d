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


def test_the_plugins_pre_tool_hook_refuses_an_edit_in_a_session_started_without_pager(
    env: Env, broker: dict[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """A Claude Code started without `pager`: its prompt hook binds the harness process, and
    its PreToolUse hook then refuses an Edit of a file alice reserved (acting as that session,
    through the harness process it runs under)."""
    assert main(["plugin", "install", "claude"]) == 0
    capsys.readouterr()
    hooks_file = env.home / ".claude/plugins/pager/plugins/pager/hooks/hooks.json"
    hooks = json.loads(Path(hooks_file).read_text())["hooks"]
    workspace = env.root / "repo"
    (workspace / "src").mkdir(parents=True)
    register = f"{broker['url']}/v1/register"
    alice = _post(
        register,
        broker["secret"],
        {"workspace": str(workspace), "implementation": "shell", "session_name": "alice"},
    )
    _post(f"{broker['url']}/v1/me/reservations", alice["token"], {"paths": ["src/*.py"]})
    bob = {"workspace": str(workspace), "implementation": "claude", "session_name": "bob",
           "conversation_key": "conversation-2"}  # fmt: skip
    _post(register, broker["secret"], bob)  # as its `pager mcp` server registers it
    prompt = {"session_id": "conversation-2", "cwd": str(workspace),
              "hook_event_name": "UserPromptSubmit", "prompt": "hi"}  # fmt: skip
    edit = {"session_id": "conversation-2", "cwd": str(workspace), "hook_event_name": "PreToolUse",
            "tool_name": "Edit", "tool_input": {"file_path": "src/x.py"}}  # fmt: skip
    (env.root / "prompt.json").write_text(json.dumps(prompt))
    (env.root / "edit.json").write_text(json.dumps(edit))
    # A program named `claude` (a script: its name is the harness's) that runs both hooks.
    harness = env.root / "claude"
    harness.write_text(
        "#!/bin/sh\n"
        f'/bin/sh -c "$PROMPT_HOOK" < {env.root}/prompt.json > /dev/null\n'
        f'/bin/sh -c "$PRE_TOOL_HOOK" < {env.root}/edit.json\n'
    )
    harness.chmod(0o755)
    done = subprocess.run(
        ["/bin/sh", str(harness)],
        env={
            **os.environ,
            "PROMPT_HOOK": hooks["UserPromptSubmit"][0]["hooks"][0]["command"],
            "PRE_TOOL_HOOK": hooks["PreToolUse"][0]["hooks"][0]["command"],
        },
        cwd=workspace,
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    decided = json.loads(done.stdout)["hookSpecificOutput"]
    assert decided["permissionDecision"] == "deny"
    assert alice["address"] in decided["permissionDecisionReason"]
