"""Bad configuration and hostile state directories: a clear message, never two brokers,
and the database untouched."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.launch.conftest import PROCESS_BOUND, PagerHome


@pytest.fixture
def fake(home: PagerHome) -> Iterator[list[subprocess.Popen[str]]]:
    """Started fakes; each is killed after the test."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        process.kill()
        process.wait(timeout=PROCESS_BOUND)


def _start_fake(home: PagerHome, started: list[subprocess.Popen[str]], *args: str) -> int:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.fakes.fake_broker", args[0], str(home.root), *args[1:]],
        stdout=subprocess.PIPE,
        text=True,
        cwd=Path(__file__).parents[2],
    )
    started.append(process)
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "ready"
    return process.pid


def test_start_unknown_config_key_refused(home: PagerHome) -> None:
    """An unknown key in config.toml is named; no broker starts, no database appears."""
    home.root.mkdir(mode=0o700)
    (home.root / "config.toml").write_text("[windows]\nack_wiat = '5s'\n")
    result = home.run("start")
    assert result.returncode == 1
    assert "windows.ack_wiat" in result.stderr
    assert "ack_wait" in result.stderr  # the known keys are listed
    assert home.broker_pids() == []
    assert not (home.root / "pager.db").exists()


def test_start_on_a_taken_port_says_so_in_words(home: PagerHome) -> None:
    """A configured port another program holds: `pager start` says which port and what to do,
    not which supervisor's child raised what."""
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen()
    port = holder.getsockname()[1]
    home.env["PAGER_PORT"] = str(port)
    try:
        result = home.run("start")
    finally:
        holder.close()
    assert result.returncode == 1
    assert f"cannot listen on 127.0.0.1:{port} (Address already in use)" in result.stderr
    assert "PAGER_PORT" in result.stderr
    assert "supervisor" not in result.stderr
    assert "PortInUse" not in result.stderr


def test_start_non_loopback_host_refused(home: PagerHome) -> None:
    """`host = "0.0.0.0"` without `allow_remote` is refused before anything listens."""
    home.root.mkdir(mode=0o700)
    (home.root / "config.toml").write_text('host = "0.0.0.0"\n')
    result = home.run("start")
    assert result.returncode == 1
    assert "'0.0.0.0' is not a loopback address" in result.stderr
    assert "allow_remote = true" in result.stderr
    assert home.broker_pids() == []
    assert not (home.root / "pager.db").exists()


@pytest.mark.parametrize(
    ("var", "value"),
    [
        ("PAGER_WINDOW_ACK_WAIT", "5 minutes"),
        ("PAGER_WINDOW_LEASE_TTL", "-1s"),
        ("PAGER_WINDOW_REDELIVERY", "1s,,2s"),
        ("PAGER_WINDOW_MAX_ATTEMPTS", "many"),
        ("PAGER_WINDOW_ACK_WAITT", "5s"),
        ("PAGER_PORT", "70000"),
    ],
)
def test_start_malformed_environment_refused(home: PagerHome, var: str, value: str) -> None:
    """A malformed PAGER_* value is named with what to write instead; nothing starts."""
    home.env[var] = value
    result = home.run("start")
    assert result.returncode == 1
    assert var in result.stderr
    assert home.broker_pids() == []
    assert not (home.root / "pager.db").exists()


def test_serve_malformed_duration_is_startup_error(home: PagerHome) -> None:
    """`pager serve` itself refuses a bad window before touching anything."""
    home.env["PAGER_WINDOW_ACK_WAIT"] = "soon"
    result = home.run("serve")
    assert result.returncode == 1
    assert "PAGER_WINDOW_ACK_WAIT" in result.stderr
    assert "e.g. 500ms" in result.stderr
    assert not (home.root / "pager.db").exists()


def test_start_unwritable_home_refused(home: PagerHome, tmp_path: Path) -> None:
    """A PAGER_HOME that cannot be created gets a message naming it and the fix."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    home.env["PAGER_HOME"] = str(blocker / "pager")
    result = home.run("start")
    assert result.returncode == 1
    assert str(blocker / "pager") in result.stderr
    assert "PAGER_HOME" in result.stderr


def test_start_broker_json_of_dead_process_replaced(home: PagerHome) -> None:
    """broker.json naming a dead pid and a closed port: a new broker starts."""
    home.root.mkdir(mode=0o700)
    stale = {"url": "http://127.0.0.1:9", "pid": 999999, "instance_id": "gone", "schema_version": 2}
    (home.root / "broker.json").write_text(json.dumps(stale))
    (home.root / "broker.lock").write_text(json.dumps(stale))
    result = home.run("start", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pid"] in home.broker_pids()


def test_start_ignores_foreign_http_server(
    home: PagerHome, fake: list[subprocess.Popen[str]]
) -> None:
    """broker.json pointing at a foreign HTTP server is never adopted."""
    foreign = _start_fake(home, fake, "foreign-http")
    result = home.run("start", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["pid"] != foreign
    assert report["pid"] in home.broker_pids()


def test_start_lock_held_by_non_broker_refused(
    home: PagerHome, fake: list[subprocess.Popen[str]]
) -> None:
    """A live non-broker lock holder: clear error, no broker, database untouched."""
    _start_fake(home, fake, "lock-holder")
    result = home.run("start")
    assert result.returncode == 1
    assert "broker.lock is held by another process" in result.stderr
    assert home.broker_pids() == []
    assert not (home.root / "pager.db").exists()


def test_start_replaces_broker_of_older_schema(
    home: PagerHome, fake: list[subprocess.Popen[str]]
) -> None:
    """A running broker of an older schema is stopped and replaced by this build."""
    old = _start_fake(home, fake, "broker", "1")
    result = home.run("start", "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["pid"] != old
    assert fake[0].wait(timeout=PROCESS_BOUND) == 0  # asked to stop with SIGTERM
    assert report["schema_version"] == report["installed_schema_version"]


def test_start_refuses_newer_schema_broker(
    home: PagerHome, fake: list[subprocess.Popen[str]]
) -> None:
    """A running broker of a newer schema is left alone; the message says to upgrade."""
    newer = _start_fake(home, fake, "broker", "99")
    result = home.run("start")
    assert result.returncode == 1
    assert "Upgrade this installation" in result.stderr
    assert fake[0].poll() is None
    assert home.broker_pids() == []
    os.kill(newer, 0)  # still alive


def test_status_with_foreign_broker_json_says_not_running(
    home: PagerHome, fake: list[subprocess.Popen[str]]
) -> None:
    """`status` does not mistake a foreign server for the broker."""
    _start_fake(home, fake, "foreign-http")
    result = home.run("status", "--json")
    assert result.returncode == 3
    report = json.loads(result.stdout)
    assert report["running"] is False
    assert "broker.lock is not held" in report["reason"]


def test_cli_a_reader_that_left_gets_no_traceback(tmp_path: Path) -> None:
    """`pager implementations | head -1`: when the reader closes the pipe early, the command
    ends quietly (no BrokenPipeError traceback on stderr)."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first write
    done = subprocess.run(
        [sys.executable, "-m", "pager", "implementations"],
        stdout=write_end,
        stderr=subprocess.PIPE,
        env={**os.environ, "PAGER_HOME": str(tmp_path / "home")},
        timeout=60,
        check=False,
    )
    os.close(write_end)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert done.returncode == 0
