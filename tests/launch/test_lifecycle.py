"""The on-demand lifecycle with real processes: start, adopt, status, exit, restart."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from tests.launch.conftest import PROCESS_BOUND, PagerHome, wait_for


def _runs(home: PagerHome) -> list[tuple[str, int, str | None]]:
    conn = sqlite3.connect(f"file:{home.root / 'pager.db'}?mode=ro", uri=True)
    try:
        rows = conn.execute("SELECT instance_id, pid, stopped_at FROM broker_runs ORDER BY id")
        return [(str(a), int(b), c) for a, b, c in rows]
    finally:
        conn.close()


def test_start_sixteen_concurrent_leave_one_broker(home: PagerHome) -> None:
    """16 racing `pager start` processes all adopt the one broker that wins."""
    with ThreadPoolExecutor(16) as pool:
        results = list(pool.map(lambda _: home.run("start", "--json"), range(16)))
    assert [r.returncode for r in results] == [0] * 16, [r.stderr for r in results]
    reports = [json.loads(r.stdout) for r in results]
    assert len({(r["pid"], r["url"]) for r in reports}) == 1
    assert home.broker_pids() == [reports[0]["pid"]]


def test_start_prints_status_and_adopts_on_second_call(home: PagerHome) -> None:
    """A second `pager start` adopts the running broker instead of starting another."""
    first = home.run("start")
    assert first.returncode == 0, first.stderr
    assert "Pager broker running" in first.stdout
    again = home.run("start", "--json")
    assert json.loads(again.stdout)["pid"] == home.status()["pid"]
    assert len(home.broker_pids()) == 1


def test_status_json_reports_running_broker(home: PagerHome) -> None:
    """`status --json` has every field of SPEC §4 while a broker runs."""
    assert home.run("start").returncode == 0
    report = home.status()
    assert report["running"] is True
    assert report["pid"] in home.broker_pids()
    assert str(report["mcp_url"]).endswith("/mcp")
    assert str(report["mcp_url"]).startswith("http://127.0.0.1:")
    assert report["database"] == str(home.root / "pager.db")
    assert report["installed_version"] == report["broker_version"]
    assert report["schema_version"] == report["installed_schema_version"]
    assert isinstance(report["uptime_s"], float)
    assert report["uptime_s"] >= 0


def test_status_without_broker_exits_3(home: PagerHome) -> None:
    """With no broker, `status` exits 3 and says `running: false` with a reason."""
    result = home.run("status", "--json")
    assert result.returncode == 3
    report = json.loads(result.stdout)
    assert report["running"] is False
    assert report["reason"]
    human = home.run("status")
    assert human.returncode == 3
    assert "pager start" in human.stdout


def test_restart_gives_new_pid(home: PagerHome) -> None:
    """`restart` stops the broker and starts a fresh one."""
    assert home.run("start").returncode == 0
    old = home.status()["pid"]
    result = home.run("restart", "--json")
    assert result.returncode == 0, result.stderr
    new = json.loads(result.stdout)["pid"]
    assert new != old
    assert home.broker_pids() == [new]


def test_exit_stops_broker_and_removes_broker_json(home: PagerHome) -> None:
    """`exit` leaves no broker process, no broker.json, and a clean stop in the store."""
    assert home.run("start").returncode == 0
    result = home.run("exit")
    assert result.returncode == 0, result.stderr
    assert home.broker_pids() == []
    assert not (home.root / "broker.json").exists()
    assert _runs(home)[-1][2] is not None  # stopped_at recorded by the graceful stop
    assert home.run("exit").returncode == 0  # nothing to stop is not an error


def test_start_after_sigkill_takes_over_stale_lock(home: PagerHome) -> None:
    """A SIGKILLed broker's stale lock is taken over and its data survives."""
    assert home.run("start").returncode == 0
    killed = int(str(home.status()["pid"]))
    before = _runs(home)
    os.kill(killed, signal.SIGKILL)
    wait_for(lambda: home.broker_pids() == [], "the killed broker to go")
    assert (home.root / "broker.json").exists()  # it could not tidy up
    result = home.run("start", "--json")
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["pid"] != killed
    after = _runs(home)
    assert after[: len(before)] == before  # nothing written before the kill was lost
    assert after[len(before) - 1][2] is None  # the killed run never recorded a stop


def test_serve_sigterm_stops_gracefully_with_open_connection(home: PagerHome) -> None:
    """SIGTERM with a half-sent request open: exit 0, lock released, broker.json removed."""
    import socket

    serve = home.popen("serve")
    try:
        wait_for(lambda: home.run("status").returncode == 0, "the broker to answer")
        port = int(str(home.status()["url"]).rsplit(":", 1)[1])
        with socket.create_connection(("127.0.0.1", port)) as stalled:
            stalled.sendall(
                b"POST /health HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100\r\n\r\n"
            )
            serve.send_signal(signal.SIGTERM)
            _, err = serve.communicate(timeout=PROCESS_BOUND)
    finally:
        if serve.poll() is None:
            serve.kill()
    assert serve.returncode == 0, err
    assert "shutting down" in err
    assert not (home.root / "broker.json").exists()
    assert (home.root / "broker.lock").read_bytes() == b""
    assert _runs(home)[-1][2] is not None


def test_second_serve_refuses_while_one_runs(home: PagerHome) -> None:
    """A second `pager serve` exits 1 naming the lock; the first keeps running."""
    assert home.run("start").returncode == 0
    pid = home.status()["pid"]
    result = home.run("serve")
    assert result.returncode == 1
    assert "broker.lock is held" in result.stderr
    assert home.broker_pids() == [pid]


def test_state_files_are_private(home: PagerHome) -> None:
    """The state directory is 0700; the database, secret and broker.json are 0600."""
    assert home.run("start").returncode == 0
    assert (home.root.stat().st_mode & 0o777) == 0o700
    for name in ("pager.db", "secret", "broker.json", "broker.lock"):
        assert ((home.root / name).stat().st_mode & 0o777) == 0o600, name


def test_port_is_kept_across_restarts(home: PagerHome) -> None:
    """The port chosen at first start is used again by the next broker."""
    assert home.run("start").returncode == 0
    url = home.status()["url"]
    assert home.run("restart").returncode == 0
    assert home.status()["url"] == url


def test_console_script_help_lists_commands(tmp_path: Path) -> None:
    """`pager --help` names every lifecycle command."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("pager")), "--help"],
        capture_output=True,
        text=True,
        check=False,
        timeout=PROCESS_BOUND,
    )
    assert result.returncode == 0
    for command in ("serve", "start", "status", "exit", "restart"):
        assert command in result.stdout
