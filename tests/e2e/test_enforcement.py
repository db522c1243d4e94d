"""Reservations enforced before the edit (docs/reservations.md, "What is enforced where"): two
FAKE Claude Code sessions launched by the real `pager claude` wrapper against a real broker.
Agent A reserves `src/*.py`; agent B's PreToolUse hook (the one its launch wired) refuses B's
Edit of src/x.py naming A, lets docs/y.md through, and lets src/x.py through once A released,
or once A's wrapper was killed and its lease lapsed; the git guard refuses the person's commit
of src/x.py while A holds it; and with no broker, the edit and the commit go ahead.

The attacker here is agent B, an agent that edits without asking: before enforcement, nothing
stopped its edit (the fake writes the file when no hook denies it)."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import trio

from tests.e2e.conftest import FAST_WINDOWS, Broker, start_broker
from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for

ROOT = Path(__file__).parents[2]


@pytest.fixture
def fake_claude(tmp_path: Path, broker: Broker) -> Path:
    """A FAKE `claude` first on PATH that runs in the directory it is launched in (the
    workspace), so that its `pager reserve` and its edits are the workspace's."""
    return _install_fake(tmp_path, broker)


def _install_fake(tmp_path: Path, broker: Broker) -> Path:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    shim = bin_dir / "claude"
    shim.write_text(
        f'#!/bin/sh\nPYTHONPATH={ROOT} exec {sys.executable} -m tests.fakes.fake_harness "$@"\n'
    )
    shim.chmod(0o755)
    broker.home.env["PATH"] = f"{bin_dir}:{os.environ['PATH']}"
    subprocess.run(["git", "init", "-q", str(broker.workspace)], check=True)
    return tmp_path


def _launch(broker: Broker, log: Path, steps: str, name: str) -> subprocess.Popen[str]:
    env = {**broker.home.env, "FAKE_HARNESS_STEPS": steps, "FAKE_HARNESS_LOG": str(log)}
    return subprocess.Popen(
        [sys.executable, "-m", "pager", "claude", "--session-name", name],
        env=env,
        cwd=broker.workspace,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _records(log: Path) -> list[dict[str, Any]]:
    if not log.exists():
        return []
    return [json.loads(line) for line in log.read_text().splitlines()]


def _found(log: Path, key: str, count: int = 1) -> list[dict[str, Any]]:
    found = [r for r in _records(log) if key in r]
    return found if len(found) >= count else []


def _stop(*processes: subprocess.Popen[str]) -> None:
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait(PROCESS_BOUND)


def _kill_harness(log: Path) -> None:
    """The fake harness of a launch whose wrapper was killed (it outlives it), by its pid."""
    for record in _records(log):
        if "pid" in record:
            with contextlib.suppress(ProcessLookupError):
                os.kill(record["pid"], signal.SIGKILL)


async def test_a_reservation_refuses_anothers_edit_until_released(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """A reserves src/*.py; B's Edit of src/x.py is refused before it writes, naming A, its
    reason and how to ask; docs/y.md goes ahead; once A released, B's next edit goes ahead."""
    a_log, b_log = tmp_path / "a.log", tmp_path / "b.log"
    release, again, never = tmp_path / "release", tmp_path / "again", tmp_path / "never"
    a = _launch(broker, a_log, f"reserve:src/*.py,wait:{release},release,wait:{never}", "alice")
    b: subprocess.Popen[str] | None = None
    try:
        with trio.fail_after(PROCESS_BOUND):
            [reserved] = await trio.to_thread.run_sync(
                wait_for, lambda: _found(a_log, "reserve"), "A's reserve"
            )
            assert reserved["status"] == 0, reserved
            alice = _records(a_log)[0]["env"]["PAGER_ADDRESS"]
            steps = f"edit:src/x.py,edit:docs/y.md,wait:{again},edit:src/x.py,exit:0"
            b = _launch(broker, b_log, steps, "bob")
            first, second = await trio.to_thread.run_sync(
                wait_for, lambda: _found(b_log, "edit", 2), "B's first two edits"
            )
            assert first["edit"] == "src/x.py"
            assert first["denied"], first
            assert alice in first["reason"]
            assert "refactor" in first["reason"]  # A's reason
            assert f"pager send {alice}" in first["reason"]
            assert not (broker.workspace / "src" / "x.py").exists()  # refused before it wrote
            assert second == {"edit": "docs/y.md", "denied": False}
            assert (broker.workspace / "docs" / "y.md").read_text() == "B was here\n"

            release.touch()
            await trio.to_thread.run_sync(wait_for, lambda: _found(a_log, "release"), "A's release")
            again.touch()
            assert await trio.to_thread.run_sync(b.wait, PROCESS_BOUND) == 0
            third = _found(b_log, "edit", 3)[2]
            assert third == {"edit": "src/x.py", "denied": False}
            assert (broker.workspace / "src" / "x.py").read_text() == "B was here\n"
    finally:
        never.touch()
        _stop(a, *([b] if b else []))


@pytest.fixture
def short_lease(tmp_path: Path) -> Iterator[Broker]:
    """A broker whose leases lapse after 2 s (a killed session's reservations go stale)."""
    home = PagerHome(tmp_path / "home")
    windows = {**FAST_WINDOWS, "PAGER_WINDOW_LEASE_TTL": "2s"}
    yield start_broker(home, tmp_path / "repo", **windows)
    home.kill_all()


def _pre_tool(
    broker: Broker, launch: dict[str, Any], path: str
) -> subprocess.CompletedProcess[str]:
    """B's PreToolUse hook, run as B's harness runs it (its environment, its command)."""
    [[hook]] = [group["hooks"] for group in launch["settings"]["hooks"]["PreToolUse"]]
    payload = {"session_id": "b", "hook_event_name": "PreToolUse", "cwd": str(broker.workspace),
               "tool_name": "Edit", "tool_input": {"file_path": path}}  # fmt: skip
    return subprocess.run(
        hook["command"],
        shell=True,
        input=json.dumps(payload),
        env={**broker.home.env, **launch["env"]},
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def _denied(done: subprocess.CompletedProcess[str]) -> bool:
    assert done.returncode == 0, done.stderr
    if not done.stdout.strip():
        return False
    decided = json.loads(done.stdout)["hookSpecificOutput"]
    return bool(decided["permissionDecision"] == "deny")


async def test_a_killed_agents_reservation_stops_blocking_after_its_lease(
    short_lease: Broker, tmp_path: Path
) -> None:
    """kill -9 of A's wrapper: A's reservation blocks B until A's lease lapses, then not."""
    broker = short_lease
    _install_fake(tmp_path, broker)
    a_log, b_log, never = tmp_path / "a.log", tmp_path / "b.log", tmp_path / "never"
    a = _launch(broker, a_log, f"reserve:src/*.py,wait:{never}", "alice")
    b = _launch(broker, b_log, f"wait:{never}", "bob")
    try:
        with trio.fail_after(PROCESS_BOUND):
            [reserved] = await trio.to_thread.run_sync(
                wait_for, lambda: _found(a_log, "reserve"), "A's reserve"
            )
            assert reserved["status"] == 0, reserved
            [b_launch] = await trio.to_thread.run_sync(
                wait_for, lambda: _found(b_log, "settings"), "B's launch"
            )
            done = await trio.to_thread.run_sync(_pre_tool, broker, b_launch, "src/x.py")
            assert _denied(done)
            a.send_signal(signal.SIGKILL)
            await trio.to_thread.run_sync(a.wait, PROCESS_BOUND)
            _kill_harness(a_log)

            def allowed() -> bool:
                return not _denied(_pre_tool(broker, b_launch, "src/x.py"))

            await trio.to_thread.run_sync(wait_for, allowed, "A's reservation to go stale")
    finally:
        never.touch()
        _stop(a, b)


def _git(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**broker.home.env, "GIT_AUTHOR_NAME": "p", "GIT_AUTHOR_EMAIL": "p@example.com",
           "GIT_COMMITTER_NAME": "p", "GIT_COMMITTER_EMAIL": "p@example.com"}  # fmt: skip
    return subprocess.run(
        ["git", *args],
        cwd=broker.workspace,
        env=env,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


def _pager(broker: Broker, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pager", *args],
        cwd=broker.workspace,
        env=broker.home.env,
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )


async def test_the_git_guard_refuses_a_commit_of_a_reserved_file(
    broker: Broker, fake_claude: Path, tmp_path: Path
) -> None:
    """`pager reserve --git-hook` installs the guard; while A holds src/*.py, the person's
    commit of src/x.py is refused naming A (docs/y.md alone commits); `--no-verify` commits;
    once the broker is gone the guard lets commits through."""
    installed = _pager(broker, "reserve", "--git-hook")
    assert installed.returncode == 0, installed.stderr
    assert "git guard installed" in installed.stdout
    a_log, never = tmp_path / "a.log", tmp_path / "never"
    a = _launch(broker, a_log, f"reserve:src/*.py,wait:{never}", "alice")
    try:
        with trio.fail_after(PROCESS_BOUND):
            [reserved] = await trio.to_thread.run_sync(
                wait_for, lambda: _found(a_log, "reserve"), "A's reserve"
            )
            assert reserved["status"] == 0, reserved
            alice = _records(a_log)[0]["env"]["PAGER_ADDRESS"]
            (broker.workspace / "docs").mkdir()
            (broker.workspace / "docs" / "y.md").write_text("y\n")
            (broker.workspace / "src").mkdir()
            (broker.workspace / "src" / "x.py").write_text("x = 1\n")
            _git(broker, "add", "docs/y.md")
            assert _git(broker, "commit", "-qm", "docs").returncode == 0
            _git(broker, "add", "src/x.py")
            refused = _git(broker, "commit", "-qm", "src")
            assert refused.returncode == 1
            assert "src/x.py" in refused.stderr
            assert alice in refused.stderr
            assert "--no-verify" in refused.stderr
            assert _git(broker, "log", "--format=%s").stdout.split() == ["docs"]
            assert _git(broker, "commit", "-qm", "src", "--no-verify").returncode == 0

            (broker.workspace / "src" / "x.py").write_text("x = 2\n")
            _git(broker, "add", "src/x.py")
            assert _pager(broker, "exit").returncode == 0  # no broker: the guard fails open
            assert _git(broker, "commit", "-qm", "again").returncode == 0
    finally:
        never.touch()
        _stop(a)


def test_the_git_guard_never_replaces_a_users_own_hook(broker: Broker, tmp_path: Path) -> None:
    """A pre-commit hook that is not Pager's is left alone, and the refusal says what to add."""
    subprocess.run(["git", "init", "-q", str(broker.workspace)], check=True)
    own = broker.workspace / ".git" / "hooks" / "pre-commit"
    own.parent.mkdir(parents=True, exist_ok=True)
    own.write_text("#!/bin/sh\nmake lint\n")
    refused = _pager(broker, "reserve", "--git-hook")
    assert refused.returncode == 1
    assert "your own pre-commit hook" in refused.stderr
    assert "hook --git-pre-commit || exit 1" in refused.stderr
    assert own.read_text() == "#!/bin/sh\nmake lint\n"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
    return port


@pytest.fixture
def junk_server() -> Iterator[str]:
    """A loopback server answering every request with 200 and a body that is not JSON."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nnot json")

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.getsockname()[1]}"
    server.close()


@pytest.mark.parametrize("answer", ["unreachable", "malformed"])
def test_the_edit_goes_ahead_when_the_broker_cannot_answer(
    broker: Broker, junk_server: str, answer: str
) -> None:
    """Fail open: no broker, or an answer that is not the check's, prints nothing (the edit
    goes ahead) and logs one line."""
    url = f"http://127.0.0.1:{_closed_port()}" if answer == "unreachable" else junk_server
    spec = json.dumps({"paths": {"Edit": ["file_path"]}})
    payload = {"hook_event_name": "PreToolUse", "cwd": str(broker.workspace),
               "tool_name": "Edit", "tool_input": {"file_path": "src/x.py"}}  # fmt: skip
    done = subprocess.run(
        [sys.executable, "-m", "pager", "hook", "--pre-tool", spec, "PreToolUse"],
        input=json.dumps(payload),
        env={**broker.home.env, "PAGER_URL": url, "PAGER_TOKEN": "prl_x"},
        capture_output=True,
        text=True,
        timeout=PROCESS_BOUND,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")
    log = (broker.home.root / "logs" / "hook.log").read_text()
    assert "pre-tool" in log.splitlines()[-1] or "failed" in log.splitlines()[-1]


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("", "deny"),
        ('[reservations]\nenforce = "warn"\n', "warn"),
        ('[reservations]\nenforce = "off"\n', "off"),
        (
            '[reservations]\nenforce = "off"\n[reservations.workspaces]\n"{workspace}" = "deny"\n',
            "deny",
        ),
    ],
)
async def test_enforce_deny_warn_or_off(broker: Broker, config: str, expected: str) -> None:
    """`[reservations] enforce`: deny refuses, warn lets the edit through with a note for the
    model, off asks nothing; a workspace's own line wins over the global one."""
    (broker.home.root / "config.toml").write_text(config.format(workspace=broker.workspace))
    alice, bob = await broker.register("alice"), await broker.register("bob")
    async with httpx2.AsyncClient(timeout=10) as http:
        taken = await http.post(
            broker.url + "/v1/me/reservations",
            headers={"Authorization": f"Bearer {alice['token']}"},
            json={"paths": ["src/*.py"], "reason": "refactor"},
        )
    assert taken.status_code == 200, taken.text
    spec = json.dumps({"paths": {"Edit": ["file_path"]}})
    payload = {"hook_event_name": "PreToolUse", "cwd": str(broker.workspace),
               "tool_name": "Edit", "tool_input": {"file_path": "src/x.py"}}  # fmt: skip
    done = await trio.to_thread.run_sync(
        lambda: subprocess.run(
            [sys.executable, "-m", "pager", "hook", "--pre-tool", spec, "PreToolUse"],
            input=json.dumps(payload),
            env={**broker.home.env, "PAGER_URL": broker.url, "PAGER_TOKEN": bob["token"]},
            capture_output=True,
            text=True,
            timeout=PROCESS_BOUND,
            check=False,
        )
    )
    assert done.returncode == 0, done.stderr
    if expected == "off":
        assert done.stdout == ""
        return
    said = json.loads(done.stdout)["hookSpecificOutput"]
    if expected == "deny":
        assert said["permissionDecision"] == "deny"
        assert alice["address"] in said["permissionDecisionReason"]
    else:
        assert "permissionDecision" not in said
        assert alice["address"] in said["additionalContext"]
