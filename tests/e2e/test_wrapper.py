"""`pager <implementation>` with a FAKE `claude` on PATH against a real broker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.e2e.conftest import Broker, mcp_session, structured
from tests.launch.conftest import PROCESS_BOUND, wait_for


@pytest.fixture
def fake_claude(tmp_path: Path, broker: Broker) -> Path:
    """Puts a FAKE `claude` first on PATH; yields its log file."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "claude"
    root = Path(__file__).parents[2]
    shim.write_text(
        f"#!/bin/sh\ncd {root} 2>/dev/null; exec {sys.executable} -m tests.fakes.fake_harness"
        ' "$@"\n'
    )
    shim.chmod(0o755)
    log = tmp_path / "harness.log"
    broker.home.env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    broker.home.env["FAKE_HARNESS_LOG"] = str(log)
    return log


def _records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _run(broker: Broker, argv: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        argv,
        env=broker.home.env,
        cwd=broker.workspace,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def _run_claude(broker: Broker, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pager", "claude", *args],
        env={**broker.home.env, "FAKE_HARNESS_STEPS": "exit:0"},
        cwd=broker.workspace,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def _launch(broker: Broker, steps: str, *args: str) -> subprocess.Popen[str]:
    env = {**broker.home.env, "FAKE_HARNESS_STEPS": steps}
    return subprocess.Popen(
        [sys.executable, "-m", "pager", "claude", *args],
        env=env,
        cwd=broker.workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


async def test_wrapped_claude_joins_authenticates_and_gets_mail_by_hook(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """The fake gets the Pager MCP config and hooks, authenticates as `api`, and mail sent to
    `api` comes out of its hook as additionalContext, acknowledged after that."""
    go = tmp_path / "go"
    wrapper = _launch(broker, f"whoami,wait:{go},hook,exit:0", "--session-name", "api", "--",
                      "--resume", "X")  # fmt: skip
    try:
        wait_for(lambda: any("whoami" in r for r in _records(fake_claude)), "the fake's whoami")
        [launch, who] = _records(fake_claude)[:2]
        assert launch["argv"][-2:] == ["--resume", "X"]
        assert "--mcp-config" in launch["argv"]
        assert "--settings" in launch["argv"]
        assert who["whoami"]["alias"] == "api"
        alice = await broker.register("alice")
        async with mcp_session(broker.url, alice["token"]) as a:
            sent = structured(await a.call_tool("send", {"to": "api", "body": "mail for api"}))
        go.touch()
        _, err = await trio.to_thread.run_sync(wrapper.communicate, None, PROCESS_BOUND)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    assert wrapper.returncode == 0, err
    hook = next(r["hook"] for r in _records(fake_claude) if "hook" in r)
    context = json.loads(hook["stdout"])["hookSpecificOutput"]["additionalContext"]
    assert "mail for api" in context
    assert alice["address"] in context
    async with mcp_session(broker.url, alice["token"]) as a:
        status = structured(await a.call_tool("message_status", {"message_id": sent["message_id"]}))
    assert status["state"] == "acknowledged"


async def test_second_launch_with_held_name_refused_then_rejoins(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """A held name exits non-zero naming the holder without starting the harness; after the
    first exits, the name rejoins the same agent id."""
    go = tmp_path / "go"
    first = _launch(broker, f"whoami,wait:{go},exit:0", "--session-name", "api")
    try:
        wait_for(lambda: any("whoami" in r for r in _records(fake_claude)), "the first whoami")
        agent_id = next(r["whoami"]["agent_id"] for r in _records(fake_claude) if "whoami" in r)
        launches = len(_records(fake_claude))
        second = await trio.to_thread.run_sync(_run_claude, broker, ["--session-name", "api"])
        assert second.returncode == 1
        assert "is held by api@" in second.stderr
        assert agent_id in second.stderr
        assert len(_records(fake_claude)) == launches  # the harness never started
        go.touch()
        assert await trio.to_thread.run_sync(first.wait, PROCESS_BOUND) == 0
    finally:
        if first.poll() is None:
            first.kill()
    third = _launch(broker, "whoami,exit:0", "--session-name", "api")
    assert await trio.to_thread.run_sync(third.wait, PROCESS_BOUND) == 0
    rejoined = [r["whoami"]["agent_id"] for r in _records(fake_claude) if "whoami" in r]
    assert rejoined[-1] == agent_id


async def test_resume_under_another_name_rejoins_conversation(
    broker: Broker, fake_claude: Path
) -> None:
    """Resuming the same conversation under another name rejoins that conversation's identity."""
    first = _launch(broker, "whoami,exit:0", "--session-name", "one", "--", "--resume", "conv-9")
    assert await trio.to_thread.run_sync(first.wait, PROCESS_BOUND) == 0
    second = _launch(broker, "whoami,exit:0", "--session-name", "two", "--", "--resume", "conv-9")
    assert await trio.to_thread.run_sync(second.wait, PROCESS_BOUND) == 0
    ids = [r["whoami"]["agent_id"] for r in _records(fake_claude) if "whoami" in r]
    names = [r["whoami"]["alias"] for r in _records(fake_claude) if "whoami" in r]
    assert ids[0] == ids[1]
    assert names == ["one", "one"]


@pytest.mark.parametrize(("steps", "status"), [("exit:0", 0), ("exit:1", 1), ("exit:7", 7),
                                                ("signal:SIGTERM", 128 + 15)])  # fmt: skip
async def test_wrapper_exits_with_harness_status_and_detaches(
    broker: Broker, fake_claude: Path, steps: str, status: int
) -> None:
    """The wrapper exits with the harness's status and detaches its session."""
    wrapper = _launch(broker, steps, "--session-name", "api")
    assert await trio.to_thread.run_sync(wrapper.wait, PROCESS_BOUND) == status
    again = await broker.register("api")  # detached: the name is free to rejoin
    assert again["epoch"] == 2


async def test_wrapper_sigkill_leaves_mail_waiting(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """SIGKILL of the wrapper: the session is not detached, its mail keeps waiting."""
    never = tmp_path / "never"
    wrapper = _launch(broker, f"whoami,wait:{never}", "--session-name", "api")
    try:
        wait_for(lambda: any("whoami" in r for r in _records(fake_claude)), "the fake's whoami")
        wrapper.send_signal(signal.SIGKILL)
        await trio.to_thread.run_sync(wrapper.wait, PROCESS_BOUND)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
        await trio.run_process(["pkill", "-f", "tests.fakes.fake_harness"], check=False)
    alice = await broker.register("alice")
    async with mcp_session(broker.url, alice["token"]) as a:
        sent = structured(await a.call_tool("send", {"to": "api", "body": "still here"}))
        status = structured(await a.call_tool("message_status", {"message_id": sent["message_id"]}))
    assert status["state"] == "queued"
    status_code, answer = await broker.post(
        "/v1/register",
        {"workspace": str(broker.workspace), "implementation": "claude", "session_name": "api"},
        token=broker.secret,
    )
    assert status_code == 409  # still attached until its lease lapses
    assert answer["error"]["code"] == "alias_conflict"


@pytest.mark.parametrize(("script", "status"), [("exit 0", 0), ("exit 3", 3)])
async def test_shell_runs_any_program_with_pager_environment(
    broker: Broker, tmp_path: Path, script: str, status: int
) -> None:
    """`pager shell -- PROGRAM` gives the program PAGER_* and exits with its status; PAGER_URL
    and PAGER_TOKEN are the launch relay's, through which plain `curl` acts as the session."""
    out = tmp_path / "env.txt"
    answer = tmp_path / "whoami.json"
    call = json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
         "params": {"name": "whoami", "arguments": {}}}
    )  # fmt: skip
    command = (
        f'echo "$PAGER_ADDRESS $PAGER_AGENT_ID $PAGER_URL $PAGER_TOKEN" > {out};'
        f' curl -sS -H "Authorization: Bearer $PAGER_TOKEN" -H "Content-Type: application/json"'
        f" -H \"Accept: application/json, text/event-stream\" --data '{call}'"
        f' "$PAGER_URL/mcp" > {answer}; {script}'
    )
    argv = [sys.executable, "-m", "pager", "shell", "--session-name", "job", "--", "sh", "-c"]
    done = await trio.to_thread.run_sync(_run, broker, [*argv, command])
    assert done.returncode == status, done.stderr
    address, agent_id, url, token = out.read_text().split()
    assert address.startswith("job@")
    assert agent_id.startswith("agt_")
    assert url.startswith("http://127.0.0.1:")
    assert url != broker.url
    assert token.startswith("prl_")
    result = json.loads(answer.read_text())["result"]["structuredContent"]
    assert result["agent_id"] == agent_id


async def test_user_manifest_is_listed_and_launched(broker: Broker, tmp_path: Path) -> None:
    """A manifest dropped in the user's implementations folder appears in `pager
    implementations` and `pager <id>` launches it with its templates filled in."""
    config_home = tmp_path / "config"
    folder = config_home / "pager" / "implementations"
    folder.mkdir(parents=True)
    out = tmp_path / "mytool.txt"
    (folder / "mytool.toml").write_text(
        'id = "mytool"\nname = "My tool"\nexecutable = "sh"\n'
        "[launch]\n"
        f'args = ["-c", "echo $MYTOOL_ADDRESS {{alias}} > {out}", "mytool"]\n'
        'env = { MYTOOL_ADDRESS = "{address}" }\n'
    )
    broker.home.env["XDG_CONFIG_HOME"] = str(config_home)
    listed = await trio.to_thread.run_sync(
        _run, broker, [sys.executable, "-m", "pager", "implementations", "--json"]
    )
    [mine] = [i for i in json.loads(listed.stdout)["implementations"] if i["id"] == "mytool"]
    assert str(folder / "mytool.toml") in json.dumps(mine)
    launched = await trio.to_thread.run_sync(
        _run, broker, [sys.executable, "-m", "pager", "mytool", "--session-name", "tool"]
    )
    assert launched.returncode == 0, launched.stderr
    address, alias = out.read_text().split()
    assert address.startswith("tool@")
    assert alias == "tool"


async def test_wrapper_says_when_its_session_is_taken_over(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """A forced takeover of the name reaches the wrapper through its event stream: it tells
    the user on stderr, and the harness keeps running."""
    go = tmp_path / "go"
    wrapper = _launch(broker, f"whoami,wait:{go},exit:0", "--session-name", "api")
    try:
        wait_for(lambda: any("whoami" in r for r in _records(fake_claude)), "the fake's whoami")
        await broker.register("api", force=True)
        assert wrapper.stderr is not None
        with trio.fail_after(PROCESS_BOUND):
            notice = await trio.to_thread.run_sync(wrapper.stderr.readline, abandon_on_cancel=True)
        assert notice.strip() == (
            "pager: the broker ended this session: its identity was taken over by another"
            " session; its calls now act as a new agent"
        )  # once, in words a person reads (not "ended: … ended")
        go.touch()  # the harness was still running all along
        await trio.to_thread.run_sync(wrapper.communicate, None, PROCESS_BOUND)
    finally:
        if wrapper.poll() is None:
            wrapper.kill()
    assert wrapper.returncode == 0


async def test_wrapped_session_follows_its_broker_to_another_port_and_rejoins(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """The broker dies and another program takes its kept port: the new broker listens
    elsewhere and revokes every earlier token. The harness, wired once to its launch relay,
    notices nothing: its next MCP call answers as the same agent (a new session), and its hook
    (which reads the rejoined token from PAGER_TOKEN_FILE) gets the mail that waited."""
    go = tmp_path / "go"
    wrapper = _launch(broker, f"whoami,wait:{go},whoami,hook,exit:0", "--session-name", "api")
    holder = socket.socket()
    try:
        wait_for(lambda: any("whoami" in r for r in _records(fake_claude)), "the fake's whoami")
        await trio.to_thread.run_sync(broker.home.kill_all)
        holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # past TIME_WAIT
        holder.bind(("127.0.0.1", int(broker.url.rpartition(":")[2])))  # the kept port
        holder.listen()
        started = broker.home.run("start", "--json")
        assert started.returncode == 0, started.stderr
        moved = Broker(broker.home, json.loads(started.stdout)["url"], broker.secret,
                       broker.workspace)  # fmt: skip
        assert moved.url != broker.url
        alice = await moved.register("alice")
        async with mcp_session(moved.url, alice["token"]) as a:
            structured(await a.call_tool("send", {"to": "api", "body": "after the move"}))
        go.touch()
        _, err = await trio.to_thread.run_sync(wrapper.communicate, None, PROCESS_BOUND)
    finally:
        holder.close()
        if wrapper.poll() is None:
            wrapper.kill()
    assert wrapper.returncode == 0, err
    first, second = [r["whoami"] for r in _records(fake_claude) if "whoami" in r]
    assert second["agent_id"] == first["agent_id"]
    assert second["session"]["id"] != first["session"]["id"]  # the old token was revoked
    assert f"rejoined the broker at {moved.url} as api@" in err
    [hooked] = [r["hook"] for r in _records(fake_claude) if "hook" in r]
    assert hooked["status"] == 0
    assert "after the move" in hooked["stdout"]
